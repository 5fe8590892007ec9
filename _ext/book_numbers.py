"""Numbers pasted into prose read as numbers, not as Python's e-notation (a Sphinx extension).

Chapters paste measured values with ``{glue:text}`key:.1e``` (myst-nb formats them with Python's
format spec, giving ``1.2e-01``). After the references are resolved, every pasted value
(``<span class="pasted-text">``) in e-notation is rewritten as a reader writes it: ``1.2 × 10⁻¹``,
``3 × 10⁻⁸``, ``10⁻¹⁰`` for a mantissa of one, ``0`` for an exact zero (``0.0e+00``). Other pasted
text is left as it is.
"""

from __future__ import annotations

import re

from docutils import nodes

E_NOTATION = re.compile(r"^([+-]?)(\d+(?:\.\d+)?)[eE]([+-]?)(\d+)$")
SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def readable(text: str) -> str | None:
    """``text`` in scientific notation for prose (``"1.2e-01"`` -> ``"1.2 × 10⁻¹"``), or None if it is
    not a number in e-notation."""
    match = E_NOTATION.match(text.strip())
    if match is None:
        return None
    sign, mantissa, exp_sign, digits = match.groups()
    if float(mantissa) == 0.0:  # only an exact zero has a zero mantissa: it is 0, not "0.0"
        return "0"
    exponent = int(digits)
    minus = "−" if sign == "-" else ""
    if exponent == 0:
        return minus + mantissa
    power = "10" + ("⁻" if exp_sign == "-" else "") + str(exponent).translate(SUPERSCRIPT)
    if float(mantissa) == 1.0:
        return minus + power
    return f"{minus}{mantissa} × {power}"


def rewrite_pasted_numbers(app, doctree, docname) -> None:
    for node in list(doctree.findall(nodes.inline)):
        if "pasted-text" in node.get("classes", []):
            new = readable(node.astext())
            if new is not None:
                node.children = [nodes.Text(new)]


def setup(app):
    app.connect("doctree-resolved", rewrite_pasted_numbers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
