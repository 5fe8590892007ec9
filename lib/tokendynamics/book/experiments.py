"""Every figure's parameters in one place, each with a fast setting (CI, default) and a full one.

The numbers are data: the table ``experiments.toml`` next to this module, read once at import
(:data:`EXPERIMENTS`).

A chapter's ``parameters`` cell sets ``mode = "fast"`` or ``"full"`` (papermill: ``-p mode full``)
and reads its settings with :func:`settings`. Keeping the numbers here makes them citable, testable
and identical between the book, the tests and a reader's own runs.
"""

from __future__ import annotations

import ast
import math
import numbers
import re
import sys
from copy import deepcopy
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "EXPERIMENTS",
    "EXPERIMENTS_FILE",
    "MODES",
    "load_experiments",
    "settings",
    "PARAMETER_RULES",
    "ChapterParameter",
    "parameters_cell",
    "parameter_schema",
    "check_parameters",
]

MODES = ("fast", "full")

#: Name of the parameter table, a package file next to this module.
EXPERIMENTS_FILE = "experiments.toml"


def load_experiments(path: str | Path | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """The parameter table: experiment name -> ``{"fast": {...}, "full": {...}}``.

    The table is a TOML file (``experiments.toml`` in this package: one ``[name.fast]`` and
    ``[name.full]`` table per experiment, each commented), so that the numbers of every figure are
    data, read in one place. A key missing from ``full`` falls back to ``fast`` (:func:`settings`).

    Parameters
    ----------
    path : str or Path, optional
        Another table in the same format (default: the package's).

    Returns
    -------
    dict
        The experiments, each with a ``"fast"`` setting and a ``"full"`` one (possibly empty).

    Raises
    ------
    ValueError
        An experiment without a ``fast`` setting, or with a setting other than ``fast``/``full``.
    """
    if path is None:
        text = resources.files(__package__).joinpath(EXPERIMENTS_FILE).read_text(encoding="utf-8")
    else:
        text = Path(path).read_text(encoding="utf-8")
    table = tomllib.loads(text)
    for name, entry in table.items():
        if not isinstance(entry, dict) or "fast" not in entry or set(entry) - set(MODES):
            raise ValueError(f"experiment {name!r} must have a [{name}.fast] table and at most a [{name}.full] one")
    return table


#: Every experiment's parameters (:func:`load_experiments` of the package's ``experiments.toml``).
#:
#: :meta hide-value:
EXPERIMENTS: dict[str, dict[str, dict[str, Any]]] = load_experiments()


def settings(name: str, mode: str = "fast", **overrides) -> dict[str, Any]:
    """Parameters of experiment ``name`` in ``mode`` ("fast" or "full"), with reader overrides.

    Parameters
    ----------
    name : str
        Experiment name, a top-level table of ``experiments.toml`` (a key of :data:`EXPERIMENTS`),
        e.g. ``"intro_clustering"``.
    mode : {"fast", "full"}
        ``"fast"`` (default) takes the experiment's fast table; ``"full"`` takes the fast table updated
        by the full one, so a key missing from ``full`` keeps its fast value.
    **overrides
        Reader values replacing parameters of the chosen setting; each name must already be one of
        its keys. An override whose value is None is ignored (the table's value is kept).

    Returns
    -------
    dict of str to Any
        A fresh (deep) copy of the setting, overrides applied: parameter name -> value, with the
        table's ints and floats kept apart. Changing it leaves :data:`EXPERIMENTS` untouched.

    Raises
    ------
    ValueError
        If ``mode`` is not ``"fast"`` or ``"full"``.
    KeyError
        If ``name`` is not an experiment, or an override names a parameter the setting lacks.

    Examples
    --------
    >>> settings("intro_clustering")["n"]
    32
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if name not in EXPERIMENTS:
        raise KeyError(f"unknown experiment {name!r}; known: {sorted(EXPERIMENTS)}")
    entry = EXPERIMENTS[name]
    out = deepcopy(entry["fast"])
    if mode == "full":
        out.update(deepcopy(entry.get("full", {})))
    unknown = set(overrides) - set(out)
    if unknown:
        raise KeyError(f"experiment {name!r} has no parameter(s) {sorted(unknown)}")
    out.update({k: v for k, v in overrides.items() if v is not None})
    return out


# ---------------------------------------------------------------------------------------------
# the chapters' own parameters (papermill's ``-p name value``), checked before a chapter runs
# ---------------------------------------------------------------------------------------------

#: Types and ranges of chapter parameters, by name. A chapter's parameters, their defaults and
#: their descriptions come from its ``parameters`` cell (:func:`parameter_schema`); the type is
#: ``"type"`` here if given, else that of the default (None is accepted iff the default is None);
#: ``"min"``/``"max"`` bound numbers (``"strict"``: the bound itself is excluded), ``"choices"``
#: lists the accepted values. A new chapter's parameter needs an entry here only if its default
#: is None or its range is restricted.
PARAMETER_RULES: dict[str, dict[str, Any]] = {
    "mode": {"choices": MODES},
    "n": {"type": int, "min": 1, "max": 20_000},
    "seed": {"type": int, "min": 0, "max": 2**32 - 1},
    "beta": {"type": float, "min": 0.0, "strict": True, "max": 1e3},
    "T": {"type": float, "min": 0.0, "strict": True, "max": 1e3},
    "clouds": {"type": int, "min": 1, "max": 10_000},
}

_TYPE_WORDS = {bool: "True or False", int: "an integer", float: "a number", str: "a string"}


@dataclass(frozen=True)
class ChapterParameter:
    """One parameter of a chapter: its name, default, description (the comment on its line) and rule."""

    name: str
    default: Any
    comment: str
    type: type
    rule: dict

    def expected(self) -> str:
        """What a valid value is, in words (for error messages).

        Returns
        -------
        str
            E.g. ``"a number > 0"`` or ``"one of 'fast', 'full'"``.
        """
        rule = self.rule
        if "choices" in rule:
            words = "one of " + ", ".join(repr(c) for c in rule["choices"])
        else:
            words = _TYPE_WORDS.get(self.type, self.type.__name__)
            if "min" in rule:
                words += f" >{'' if rule.get('strict') else '='} {rule['min']:g}"
            if "max" in rule:
                top = rule["max"]
                words += f" and <= {top}" if isinstance(top, int) else f" and <= {top:g}"
        return words + (" or None" if self.default is None else "")

    def check(self, value) -> Any:
        """``value`` if it is valid; a ValueError naming the parameter and what is expected otherwise.

        Parameters
        ----------
        value : object
            The value a reader gave (papermill's ``-p name value``).

        Returns
        -------
        object
            ``value`` itself.
        """
        if value is None and self.default is None:
            return None
        given = value
        ok = value is not None
        if ok and self.type is bool:
            ok = isinstance(value, bool)
        elif ok and self.type is int:
            ok = isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
            value = int(value) if ok else value
        elif ok and self.type is float:  # numpy floats are numbers too; an int too large for a float is not
            ok = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
            try:
                ok = ok and math.isfinite(float(value))
            except OverflowError:
                ok = False
            value = float(value) if ok else value
        elif ok:
            ok = isinstance(value, self.type)
        rule = self.rule
        if ok and "choices" in rule:
            ok = value in rule["choices"]
        if ok and "min" in rule:
            ok = value > rule["min"] if rule.get("strict") else value >= rule["min"]
        if ok and "max" in rule:
            ok = value <= rule["max"]
        if not ok:
            hint = f" ({self.comment})" if self.comment else ""
            raise ValueError(f"parameter {self.name} must be {self.expected()}, got {given!r}{hint}")
        return value


_FENCE = re.compile(r"^(`{3,}|~{3,})\{code-cell\}")


def parameters_cell(markdown: str) -> str | None:
    """Source of the code cell tagged ``parameters`` in a MyST-markdown notebook (None if there is none).

    Reads ``:tags: [parameters]`` option lines and ``---``-delimited YAML option blocks, the two
    forms jupytext writes.

    Parameters
    ----------
    markdown : str
        The whole text of a MyST-markdown notebook (e.g. a ``chapters/*.md`` file), whose code cells
        are ``{code-cell}`` fences of backticks or tildes.

    Returns
    -------
    str or None
        The body of the first code cell whose ``tags`` option contains ``parameters``, without its
        option lines and fences and with leading and trailing blank lines stripped; None if no
        code cell is tagged so.
    """
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence = m.group(1)
        j = i + 1
        options = []
        if j < len(lines) and lines[j].strip() == "---":
            j += 1
            while j < len(lines) and lines[j].strip() != "---":
                options.append(lines[j])
                j += 1
            j += 1
        else:
            while j < len(lines) and lines[j].startswith(":"):
                options.append(lines[j])
                j += 1
        body = []
        while j < len(lines) and not lines[j].startswith(fence):
            body.append(lines[j])
            j += 1
        tagged = any(re.match(r"^:?tags:\s*\[[^\]]*\bparameters\b[^\]]*\]", o.strip()) for o in options)
        if tagged:
            return "\n".join(body).strip("\n")
        i = j + 1
    return None


def parameter_schema(source: str) -> dict[str, ChapterParameter]:
    """The parameters defined by a ``parameters`` cell: ``name = literal  # description`` lines.

    Names and defaults come from the cell (parsed with ``ast``; defaults must be literals), the
    description from the comment on each line, the type from the default (or from
    :data:`PARAMETER_RULES` when the default is None) and the range from :data:`PARAMETER_RULES`.

    Parameters
    ----------
    source : str
        Python source of a chapter's ``parameters`` cell (as returned by :func:`parameters_cell`):
        only single assignments of a literal to a name, each optionally followed by a ``#`` comment.

    Returns
    -------
    dict of str to ChapterParameter
        Parameter name -> its :class:`ChapterParameter` (default, comment, type and rule), in the
        cell's order; every default has been checked against its own rule.

    Raises
    ------
    ValueError
        If a statement of the cell is not ``name = literal``, a default is not a literal, a None
        default has no type in :data:`PARAMETER_RULES`, or a default breaks its rule.
    """
    tree = ast.parse(source)
    lines = source.splitlines()
    out: dict[str, ChapterParameter] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            raise ValueError(f"the parameters cell may only assign literals to names, found: {ast.unparse(node)}")
        name = node.targets[0].id
        try:
            default = ast.literal_eval(node.value)
        except ValueError:
            raise ValueError(
                f"the default of parameter {name} must be a literal, got {ast.unparse(node.value)}"
            ) from None
        line = lines[(node.end_lineno or node.lineno) - 1]
        comment = line.split("#", 1)[1].strip() if "#" in line[node.end_col_offset :] else ""
        rule = dict(PARAMETER_RULES.get(name, {}))
        typ = rule.pop("type", None) or (None if default is None else type(default))
        if typ is None:
            raise ValueError(
                f"parameter {name} defaults to None and has no type in PARAMETER_RULES "
                "(tokendynamics.book.experiments): add one"
            )
        param = ChapterParameter(name, default, comment, typ, rule)
        try:
            param.check(default)
        except ValueError as exc:
            raise ValueError(f"the default of parameter {name} breaks its own rule: {exc}") from None
        out[name] = param
    return out


def check_parameters(schema: dict[str, ChapterParameter], given: dict[str, Any], chapter: str = "") -> dict[str, Any]:
    """Check reader-given parameter values against a chapter's schema; return them (floats as floats).

    Raises a one-line ValueError naming the first wrong parameter: an unknown name (listing the
    chapter's parameters) or a value of the wrong type or out of range (saying what is expected).

    Parameters
    ----------
    schema : dict of str to ChapterParameter
        The chapter's parameters, from :func:`parameter_schema`.
    given : dict of str to Any
        The values the reader passes (papermill's ``-p name value``), by parameter name; parameters
        not given are not checked and keep their defaults elsewhere.
    chapter : str
        Chapter name quoted in the error messages (``""``, default: none is quoted).

    Returns
    -------
    dict of str to Any
        The same names as ``given`` with their checked values: unchanged, except that an integer
        given for a float parameter becomes a float.
    """
    where = f" of chapter {chapter}" if chapter else ""
    out = {}
    for name, value in given.items():
        if name not in schema:
            known = ", ".join(schema) or "none"
            raise ValueError(f"unknown parameter {name!r}{where}; its parameters are: {known}")
        out[name] = schema[name].check(value)
    return out
