"""Shared docstring fragments (tokendynamics.docstrings)."""

import importlib
import inspect
import pkgutil

import pytest

import tokendynamics
from tokendynamics.docstrings import fill_doc, substitute


def test_substitute_indents_every_line_like_the_placeholder():
    doc = "Title.\n\n    Parameters\n    ----------\n    %(x)s\n    y : int\n"
    out = substitute(doc, {"x": "x : float\n    The value.\n\n    More."})
    assert (
        out
        == "Title.\n\n    Parameters\n    ----------\n    x : float\n        The value.\n\n        More.\n    y : int\n"
    )


def test_substitute_refuses_an_unknown_placeholder_by_name():
    with pytest.raises(KeyError, match=r"%\(nmae\)s"):
        substitute("    %(nmae)s\n", {"name": "x"})


def test_substitute_leaves_inline_percent_text_and_none_alone():
    doc = "Rate 5 %(not a placeholder)s in text.\n"
    assert substitute(doc, {}) == doc
    assert substitute(None, {"x": "y"}) is None


def test_fill_doc_returns_the_object_with_its_docstring_completed():
    @fill_doc({"ref": "Paper 1."})
    def f():
        """F.

        References
        ----------
        %(ref)s
        """

    assert f.__name__ == "f"
    assert f.__doc__.rstrip().endswith("Paper 1.")


def _public_objects():
    for info in pkgutil.walk_packages(tokendynamics.__path__, "tokendynamics."):
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            yield f"{info.name}.{name}", obj
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if not attr.startswith("_") and callable(member):
                        yield f"{info.name}.{name}.{attr}", member


def test_no_public_docstring_keeps_an_unfilled_placeholder():
    """Every placeholder of the package's public docstrings was substituted at import."""
    left = []
    for name, obj in _public_objects():
        try:
            substitute(obj.__doc__, {})
        except KeyError:
            left.append(name)
    assert not left, left
