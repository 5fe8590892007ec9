"""Numbers and small tables as a reader sees them in the book's prose.

Values glued into the prose (``myst_nb.glue`` with ``{glue:text}``) are pasted as plain text, outside
math: a TeX string there would show as raw ``$...$``. These helpers format numbers with Unicode
(``1.3 × 10⁻¹⁰``, ``−0.47 ± 0.03``) and build MyST tables to show with ``IPython.display.Markdown``
(the book parses Markdown outputs as MyST, so ``$math$`` works inside tables).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

__all__ = ["sci", "pm", "count_phrase", "markdown_table"]

_SUPERSCRIPT = str.maketrans("0123456789-+", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺")


def sci(x: float, digits: int = 2, *, threshold: float = 1e-3, whole: bool = False) -> str:
    """A number for prose: ``0.042`` as is, ``1.3e-10`` as ``1.3 × 10⁻¹⁰`` (Unicode, no TeX).

    Parameters
    ----------
    x : float
        The number.
    digits : int
        Significant digits.
    threshold : float
        Numbers with absolute value in ``[threshold, 1e4)`` are written in positional notation.
    whole : bool
        Write numbers with absolute value in ``[100, 1e4)`` rounded to a whole number with all their
        digits (``543``), not to ``digits`` significant digits (``540``).

    Returns
    -------
    str

    Examples
    --------
    >>> sci(1.3e-10)
    '1.3 × 10⁻¹⁰'
    >>> sci(0.0421)
    '0.042'
    >>> sci(543.2)
    '540'
    >>> sci(-2.5e6)
    '−2.5 × 10⁶'
    >>> sci(543.2, whole=True)
    '543'
    """
    x = float(x)
    if not math.isfinite(x):
        return "∞" if x > 0 else "−∞" if x < 0 else "NaN"
    if x == 0:
        return "0"
    sign = "−" if x < 0 else ""
    a = abs(x)
    if whole and 100 <= a < 1e4:
        return sign + f"{a:.0f}"
    if threshold <= a < 1e4:
        exponent = math.floor(math.log10(a))
        if exponent >= digits - 1:  # whole numbers in positional notation: 540, never 5.4e+02
            return sign + f"{round(a, digits - 1 - exponent):.0f}"
        return sign + f"{a:.{digits}g}"
    exponent = math.floor(math.log10(a))
    mantissa = a / 10**exponent
    if round(mantissa, digits - 1) >= 10:
        mantissa, exponent = mantissa / 10, exponent + 1
    m = f"{mantissa:.{digits}g}"
    head = "" if m == "1" else f"{m} × "
    return f"{sign}{head}10{str(exponent).translate(_SUPERSCRIPT)}"


def pm(value: float, error: float, digits: int = 2) -> str:
    """``value ± error`` with a true minus sign, e.g. ``−0.47 ± 0.03``.

    Parameters
    ----------
    value, error : float
        The estimate and its uncertainty.
    digits : int
        Decimals.

    Returns
    -------
    str

    Examples
    --------
    >>> pm(-0.4712, 0.0291)
    '−0.47 ± 0.03'
    """
    v = f"{abs(value):.{digits}f}"
    return f"{'−' if value < 0 else ''}{v} ± {abs(error):.{digits}f}"


def count_phrase(count: int, total: int, noun: str) -> str:
    """``count`` of ``total`` things in words that stay true at the ends: none, all, or ``k of the n``.

    A sentence built on "k of the n" (and "the rest ...") is empty or false when k is 0 or n; this
    says "none of the n" and "all n" there, so the prose around it can be chosen by the value.

    Parameters
    ----------
    count, total : int
        How many of how many; ``0 <= count <= total``.
    noun : str
        The things counted, in the plural (``"clouds"``).

    Returns
    -------
    str

    Examples
    --------
    >>> count_phrase(3, 10, "clouds"), count_phrase(0, 10, "clouds"), count_phrase(10, 10, "clouds")
    ('3 of the 10 clouds', 'none of the 10 clouds', 'all 10 clouds')
    """
    count, total = int(count), int(total)
    if not 0 <= count <= total:
        raise ValueError(f"count must lie in [0, total={total}], got {count}")
    if count == 0:
        return f"none of the {total} {noun}"
    if count == total:
        return f"all {total} {noun}"
    return f"{count} of the {total} {noun}"


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]], align: str | None = None) -> str:
    """A MyST (GitHub-style) table: ``header`` cells, then one line per row; cells may hold ``$math$``.

    Parameters
    ----------
    header : sequence of str
        Column titles.
    rows : iterable of sequences
        Cells, converted with ``str``.
    align : str, optional
        One character per column: ``l``, ``r`` or ``c`` (default: left-aligned text).

    Returns
    -------
    str

    Examples
    --------
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
