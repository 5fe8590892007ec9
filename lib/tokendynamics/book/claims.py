r"""What the two papers claim, where the book shows it, and which tests check it.

One registry, ``CLAIMS``, of every checkable statement of

1. Castin, Ablin, Carrillo, Peyré, *A Unified Perspective on the Dynamics of Deep Transformers*
   (arXiv 2501.18322), and
2. Li, Maranzatto, Peszek, Teolis, Akkoc, Riedl, Ulukus, García Trillos, *On the Diverse Dynamical
   Behaviors Arising in Deep Linear Transformers* (2026),

as this book states them. The registry is data: the file ``claims.toml`` next to this module (one
``[[claims]]`` table per claim, and the tables ``[papers]``, ``[tags]`` and ``[chapters]`` they
refer to), read and checked once at import by :func:`load_claims`. Each :class:`Claim` names the
chapter that shows it, the value that chapter measured (a key glued with ``myst_nb.glue``), a
tolerance, and the tests that check it (pytest node ids). Tests carry the same key in a marker,
``@pytest.mark.claim("<key>")``, and a test of the suite (``tests/book/test_claims.py``) keeps the
two sides in step.

:func:`claims_markdown` renders the registry as MyST tables: the appendix page
``chapters/claims.md`` shows one per chapter, and a chapter can show its own rows with
``claims_markdown(chapter="04_kuramoto_reduction", local=True)``.

Provenance tags (``TAGS``), as in the chapters:

* ``S`` — stated in the paper's abstract or summary;
* ``R`` — read in the authors' public code;
* ``D`` — derived for this book, checked numerically;
* ``I`` — inferred: our reconstruction of the paper's content, to be read with caution.

>>> len({c.key for c in CLAIMS}) == len(CLAIMS)
True
>>> claim("theorem-b-mean-field-limit").paper
1
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "CHAPTERS",
    "CLAIMS",
    "CLAIMS_FILE",
    "PAPERS",
    "TAGS",
    "Claim",
    "claim",
    "claims_for",
    "claims_by_test",
    "claims_markdown",
    "load_claims",
]

#: Name of the registry, a package file next to this module.
CLAIMS_FILE = "claims.toml"


@dataclass(frozen=True)
class Claim:
    """One checkable statement of one of the two papers, as the book states and checks it.

    Parameters
    ----------
    key : str
        Stable slug; the label of the claim's row on the claims page is ``claim-<key>``.
    paper : int
        1 (Castin et al.) or 2 (Li et al.).
    statement : str
        One line of MyST (inline math ``$...$`` allowed).
    tag : str
        Provenance, one of ``TAGS``.
    chapter : str
        Stem of the chapter that shows the claim (a key of ``CHAPTERS``).
    measured : tuple (str, str) or None
        ``(glue key, format spec)`` of the value the chapter measured (format ``""``: as glued);
        ``None`` where the statement is exact or qualitative and only the tests check it.
    tolerance : str
        What the tests (and the chapter) accept, in words.
    tests : tuple of str
        Pytest node ids, ``tests/<file>.py::<function>`` (parametrised tests without ``[...]``).
    """

    key: str
    paper: int
    statement: str
    tag: str
    chapter: str
    measured: tuple[str, str] | None
    tolerance: str
    tests: tuple[str, ...]


#: field of a ``[[claims]]`` table -> its TOML type (every field is required but ``measured``)
_FIELDS = {
    "key": str,
    "paper": int,
    "tag": str,
    "chapter": str,
    "statement": str,
    "measured": list,
    "tolerance": str,
    "tests": list,
}
_SLUG = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
_NODE_ID = re.compile(r"tests/\S+\.py::\S+")


def _names(table: dict[str, Any], section: str, source: str) -> dict[str, str]:
    names = table.get(section)
    if not isinstance(names, dict) or not all(isinstance(v, str) for v in names.values()):
        raise ValueError(f"{source}: [{section}] must be a table of names to strings")
    return names


def _claim(entry: Any, where: str, known: dict[str, dict[Any, str]]) -> Claim:
    """One ``[[claims]]`` table as a :class:`Claim`; a ``ValueError`` names the claim and the field."""
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: must be a table, got {entry!r}")
    missing = [f for f in _FIELDS if f not in entry and f != "measured"]
    unknown = sorted(set(entry) - set(_FIELDS))
    if missing or unknown:
        raise ValueError(f"{where}: missing field(s) {missing}, unknown field(s) {unknown}")
    for field, kind in _FIELDS.items():
        value = entry.get(field, [])
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ValueError(f"{where}, field {field!r}: expected {kind.__name__}, got {value!r}")
        if field in known and value not in known[field]:
            raise ValueError(f"{where}, field {field!r}: {value!r} is not one of {list(known[field])}")
    # a statement or tolerance wrapped over lines in the file is one line of MyST
    text = {f: " ".join(entry[f].split()) for f in ("statement", "tolerance")}
    tests, measured = entry["tests"], entry.get("measured")
    checks = [
        ("key", _SLUG.fullmatch(entry["key"]), "a slug of lower-case words joined by '-'"),
        ("statement", text["statement"], "a non-empty string"),
        ("tolerance", text["tolerance"], "a non-empty string"),
        ("tests", tests and all(isinstance(t, str) and _NODE_ID.fullmatch(t) for t in tests), "node ids"),
        ("measured", measured is None or [type(m) for m in measured] == [str, str], "[glue key, format]"),
    ]
    for field, ok, what in checks:
        if not ok:
            raise ValueError(f"{where}, field {field!r}: must be {what}, got {entry[field]!r}")
    pair = None if measured is None else (measured[0], measured[1])
    return Claim(**{**entry, **text, "measured": pair, "tests": tuple(tests)})


def load_claims(
    path: str | Path | None = None,
) -> tuple[dict[int, str], dict[str, str], dict[str, str], tuple[Claim, ...]]:
    """Read and check a claims registry: its papers, tags, chapters and claims.

    The registry is a TOML file (``claims.toml`` in this package) with three tables of names,
    ``[papers]`` (number -> reference), ``[tags]`` (provenance tag -> meaning) and ``[chapters]``
    (chapter stem -> title, in book order), and one ``[[claims]]`` table per claim, in the order of
    the claims page, whose fields are those of :class:`Claim`: ``key``, ``paper``, ``tag``,
    ``chapter``, ``statement``, ``measured = [glue key, format]`` (absent where nothing is measured),
    ``tolerance`` and ``tests`` (a list of node ids). A statement or tolerance wrapped over several
    lines of the file is joined with single spaces. The module reads the package's file once, at
    import, into ``PAPERS``, ``TAGS``, ``CHAPTERS`` and ``CLAIMS``.

    Parameters
    ----------
    path : str or Path, optional
        Another registry in the same format (default: the package's ``claims.toml``).

    Returns
    -------
    papers : dict of int to str
        Paper number -> its reference.
    tags : dict of str to str
        Provenance tag -> its meaning.
    chapters : dict of str to str
        Chapter stem -> title, in book order.
    claims : tuple of Claim
        The claims, in the file's order.

    Raises
    ------
    ValueError
        If the file is not valid TOML, has a top-level table other than the four, a table of names
        that is not one, or a claim with a missing or unknown field, a field of the wrong type, a
        paper, tag or chapter the tables do not name, or a key that another claim already has; the
        message names the file, the claim (its key, or its position when the key is unusable) and the
        field.
    """
    if path is None:
        source, text = CLAIMS_FILE, resources.files(__package__).joinpath(CLAIMS_FILE).read_text(encoding="utf-8")
    else:
        source, text = str(path), Path(path).read_text(encoding="utf-8")
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{source}: {err}") from None
    unknown = sorted(set(table) - {"papers", "tags", "chapters", "claims"})
    if unknown:
        raise ValueError(f"{source}: unknown top-level table(s) {unknown}")
    names = _names(table, "papers", source)
    if not all(k.isdigit() for k in names):
        raise ValueError(f"{source}: the keys of [papers] must be paper numbers, got {list(names)}")
    papers = {int(k): v for k, v in names.items()}
    tags, chapters = _names(table, "tags", source), _names(table, "chapters", source)
    entries = table.get("claims")
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"{source}: no [[claims]] table")
    claims: dict[str, Claim] = {}
    for number, entry in enumerate(entries, 1):
        key = entry.get("key") if isinstance(entry, dict) else None
        where = f"{source}: claim number {number}" + (f" ({key!r})" if isinstance(key, str) else "")
        c = _claim(entry, where, {"paper": papers, "tag": tags, "chapter": chapters})
        if c.key in claims:
            raise ValueError(f"{where}, field 'key': {c.key!r} is already the key of an earlier claim")
        claims[c.key] = c
    return papers, tags, chapters, tuple(claims.values())


PAPERS, TAGS, CHAPTERS, CLAIMS = load_claims()
_BY_KEY = {c.key: c for c in CLAIMS}


def claim(key: str) -> Claim:
    """The claim registered under ``key`` (a ``KeyError`` names the unknown key).

    Parameters
    ----------
    key : str
        The claim's slug, ``Claim.key`` (e.g. ``"theorem-b-mean-field-limit"``); its row on the
        claims page carries the label ``claim-<key>``.

    Returns
    -------
    Claim
        The registry's entry for ``key`` (the same frozen object as in ``CLAIMS``).

    Raises
    ------
    KeyError
        If no claim of ``CLAIMS`` has this key.
    """
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"no claim {key!r} in the registry") from None


def claims_for(chapter: str | None = None, paper: int | None = None) -> tuple[Claim, ...]:
    """The claims shown in ``chapter`` and/or stated by ``paper``, in registry order.

    Parameters
    ----------
    chapter : str, optional
        Chapter stem, a key of ``CHAPTERS`` (e.g. ``"04_kuramoto_reduction"``); ``None`` keeps every
        chapter.
    paper : int, optional
        1 (Castin et al.) or 2 (Li et al.); ``None`` keeps both papers. Any other number selects nothing.

    Returns
    -------
    tuple of Claim
        The entries of ``CLAIMS`` that pass both filters, in the registry's order; empty if none does.

    Raises
    ------
    ValueError
        If ``chapter`` is given and is not a key of ``CHAPTERS``.
    """
    if chapter is not None and chapter not in CHAPTERS:
        raise ValueError(f"unknown chapter {chapter!r}; known: {', '.join(CHAPTERS)}")
    return tuple(c for c in CLAIMS if (chapter is None or c.chapter == chapter) and (paper is None or c.paper == paper))


def claims_by_test() -> dict[str, tuple[str, ...]]:
    """Pytest node id -> the keys of the claims it checks.

    Returns
    -------
    dict of str to tuple of str
        One entry per test named by some claim's ``Claim.tests``
        (``tests/<file>.py::<function>``, without parametrisation brackets); its value lists the keys of
        the claims that name the test, in registry order. Tests that check no claim are absent.
    """
    out: dict[str, list[str]] = {}
    for c in CLAIMS:
        for t in c.tests:
            out.setdefault(t, []).append(c.key)
    return {t: tuple(keys) for t, keys in out.items()}


def _measured_cell(c: Claim, local: bool) -> str:
    if c.measured is None:
        return "—"
    key, fmt = c.measured
    if local:
        return f"{{glue:text}}`{key}:{fmt}`" if fmt else f"{{glue:text}}`{key}`"
    # another page's value: `path::key:format` (an empty format after the last colon pastes the value as is)
    return f"{{glue:text}}`{c.chapter}.ipynb::{key}:{fmt}`"


def claims_markdown(chapter: str | None = None, *, local: bool = False, paper: int | None = None) -> str:
    r"""The claims of ``chapter`` (every chapter if ``None``) as a MyST ``list-table``.

    Columns: statement, paper, tag, measured, tolerance, tests. The measured cell pastes the value
    the chapter glued: ``{glue:text}`<chapter>.ipynb::<key>:<fmt>``` from another page (the claims
    appendix), or ``{glue:text}`<key>:<fmt>``` with ``local=True``, for a chapter showing its own
    rows. Without ``local`` each row starts with the target ``(claim-<key>)=``, so that any page can
    link to it with ``{ref}`text <claim-key>```; ``local=True`` leaves the targets to the appendix
    (one label, one place). Display the result with ``IPython.display.Markdown``: the book parses
    Markdown outputs as MyST (``nb_render_markdown_format: myst``).

    Parameters
    ----------
    chapter : str, optional
        Chapter stem (a key of ``CHAPTERS``) whose claims are listed; ``None`` lists the claims of
        every chapter, in registry order, in one table.
    local : bool
        True for a chapter showing its own rows: the measured cells paste glue keys of the current
        page and the rows carry no ``(claim-<key>)=`` target. False (default) for the appendix: the
        values are pasted from each claim's chapter notebook and each row gets its target.
    paper : int, optional
        Keep only the claims of paper 1 or 2; ``None`` keeps both.

    Returns
    -------
    str
        The MyST source of one ``list-table`` directive (header row plus one row per claim selected
        by :func:`claims_for`), ending with a newline; or the line ``*No claim is registered here.*``
        when no claim is selected.
    """
    rows = claims_for(chapter, paper)
    if not rows:
        return "*No claim is registered here.*\n"
    lines = [":::{list-table}", ":header-rows: 1", ":widths: 32 7 5 11 16 29", ":class: claims-table", ""]
    lines += ["* - statement"] + [f"  - {h}" for h in ("paper", "tag", "measured", "tolerance", "tests")]
    for c in rows:
        statement = c.statement if local else f"(claim-{c.key})=\n\n    {c.statement}"
        tests = "\n\n    ".join(f"`{t.removeprefix('tests/')}`" for t in c.tests)
        cells = (c.paper, c.tag, _measured_cell(c, local), c.tolerance, tests)
        lines += [f"* - {statement}"] + [f"  - {v}" for v in cells]
    lines.append(":::")
    return "\n".join(lines) + "\n"
