"""Shared paragraphs of numpydoc docstrings: a docstring names a fragment on a line of its own, ``%(name)s``,
and :func:`fill_doc` substitutes it at import, indented like the placeholder, so ``help()``, doctests and the
API pages see the whole text (the technique of SciPy's ``scipy._lib.doccer`` and MNE's ``mne.utils.fill_doc``)."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Mapping
from typing import TypeVar

__all__ = ["fill_doc", "substitute"]

T = TypeVar("T")

_PLACEHOLDER = re.compile(r"^(?P<indent>[ \t]*)%\((?P<name>\w+)\)s[ \t]*$", re.MULTILINE)


def substitute(doc: str | None, fragments: Mapping[str, str]) -> str | None:
    """Replace each whole-line placeholder ``%(name)s`` of ``doc`` by its fragment (dedented), every
    line indented like the placeholder.

    Parameters
    ----------
    doc : str or None
        A docstring; ``None`` (``python -OO``) is returned unchanged.
    fragments : mapping of str to str
        The shared fragments, by name.

    Returns
    -------
    str or None
        The docstring with every placeholder replaced; a placeholder naming no fragment raises a
        ``KeyError``.
    """
    if doc is None:
        return None

    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in fragments:
            known = ", ".join(sorted(fragments))
            raise KeyError(f"docstring placeholder %({name})s has no fragment; known fragments: {known}")
        lines = textwrap.dedent(fragments[name]).strip("\n").splitlines()
        return "\n".join(match["indent"] + line if line.strip() else "" for line in lines)

    return _PLACEHOLDER.sub(replace, doc)


def fill_doc(fragments: Mapping[str, str]) -> Callable[[T], T]:
    """Decorator substituting the shared fragments into a function's or class's docstring.

    Parameters
    ----------
    fragments : mapping of str to str
        The shared fragments, by name (see :func:`substitute`).

    Returns
    -------
    callable
        A decorator returning its argument with ``__doc__`` completed.
    """

    def decorate(obj: T) -> T:
        obj.__doc__ = substitute(obj.__doc__, fragments)
        return obj

    return decorate
