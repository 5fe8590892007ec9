"""Numbers and small tables as a reader sees them in the book's prose.

Values glued into the prose (``myst_nb.glue`` with ``{glue:text}``) are pasted as plain text, outside
math: a TeX string there would show as raw ``$...$``. These helpers format numbers with Unicode
(``1.3 × 10⁻¹⁰``, ``−0.47 ± 0.03``) and build MyST tables to show with ``IPython.display.Markdown``
(the book parses Markdown outputs as MyST, so ``$math$`` works inside tables).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

__all__ = ["sci", "pm", "markdown_table"]

_SUPERSCRIPT = str.maketrans("0123456789-+", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺")


def sci(x: float, digits: int = 2, *, threshold: float = 1e-3) -> str:
    """A number for prose: ``0.042`` as is, ``1.3e-10`` as ``1.3 × 10⁻¹⁰`` (Unicode, no TeX).

    Parameters
    ----------
    x : float
        The number.
    digits : int
        Significant digits.
    threshold : float
        Numbers with absolute value in ``[threshold, 1e4)`` are written in positional notation.

    Returns
    -------
    str

    Examples
    --------
    >>> sci(1.3e-10)
    '1.3 × 10⁻¹⁰'
    >>> sci(0.0421)
    '0.042'
    >>> sci(-2.5e6)
    '−2.5 × 10⁶'
    """
    x = float(x)
    if not math.isfinite(x):
        return "∞" if x > 0 else "−∞" if x < 0 else "NaN"
    if x == 0:
        return "0"
    sign = "−" if x < 0 else ""
    a = abs(x)
    if threshold <= a < 1e4:
        text = f"{a:.{digits}g}"
        return sign + text
    exponent = math.floor(math.log10(a))
    mantissa = a / 10**exponent
    if round(mantissa, digits - 1) >= 10:
        mantissa, exponent = mantissa / 10, exponent + 1
    m = f"{mantissa:.{digits}g}"
    head = "" if m == "1" else f"{m} × "
    return f"{sign}{head}10{str(exponent).translate(_SUPERSCRIPT)}"


def pm(value: float, error: float, digits: int = 2) -> str:
    """``value ± error`` with a true minus sign, e.g. ``−0.47 ± 0.03``.

    >>> pm(-0.4712, 0.0291)
    '−0.47 ± 0.03'
    """
    v = f"{abs(value):.{digits}f}"
    return f"{'−' if value < 0 else ''}{v} ± {abs(error):.{digits}f}"


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]], align: str | None = None) -> str:
    """A MyST (GitHub-style) table: ``header`` cells, then one line per row; cells may hold ``$math$``.

    ``align`` is one character per column: ``l``, ``r`` or ``c`` (default: left-aligned text).

    >>> print(markdown_table(["a", "b"], [[1, 2]], align="lr"))
    | a | b |
    |:---|---:|
    | 1 | 2 |
    """
    header = [str(h) for h in header]
    marks = {"l": ":---", "r": "---:", "c": ":---:"}
    align = align or "l" * len(header)
    if len(align) != len(header):
        raise ValueError(f"align must have one character per column ({len(header)}), got {align!r}")
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    for row in rows:
        cells = [str(c) for c in row]
        if len(cells) != len(header):
            raise ValueError(f"a row has {len(cells)} cells, the header {len(header)}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
