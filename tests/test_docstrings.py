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


def test_no_public_docstring_holds_a_control_character():
    r"""A LaTeX command in a docstring that is not raw becomes a control character (the "\b" of "\beta"
    is a backspace): MathJax then fails on the API page."""
    bad = [
        name
        for name, obj in _public_objects()
        if isinstance(obj.__doc__, str) and any(ord(c) < 32 and c not in "\n\t" for c in obj.__doc__)
    ]
    assert not bad, bad


# ---- every public function documents its parameters, what it returns and where it comes from ----

_SECTION_UNDERLINE = "-"


def _sections(doc: str) -> dict[str, list[str]]:
    """Numpydoc sections of a (cleaned) docstring: title -> its lines."""
    lines = inspect.cleandoc(doc or "").splitlines()
    out: dict[str, list[str]] = {}
    current = None
    for k, line in enumerate(lines):
        following = lines[k + 1] if k + 1 < len(lines) else ""
        if line.strip() and following.strip() and set(following.strip()) == {_SECTION_UNDERLINE}:
            current = line.strip()
            out[current] = []
        elif current is not None and not (set(line.strip()) == {_SECTION_UNDERLINE}):
            out[current].append(line)
    return out


def _documented_parameters(section: list[str]) -> set[str]:
    """Names of the entries of a Parameters section (``a, b : float`` names two; ``**kw`` is kw)."""
    names: set[str] = set()
    for line in section:
        if line and not line[0].isspace():
            head = line.split(" : ")[0]
            names |= {n.strip().lstrip("*") for n in head.split(",") if n.strip()}
    return names


def _returns_a_value(func) -> bool:
    """True if the function's own body has a ``return <value>`` (nested functions do not count)."""
    import ast
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return False
    root = tree.body[0]
    stack = list(ast.iter_child_nodes(root))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return) and node.value is not None:
            if not (isinstance(node.value, ast.Constant) and node.value.value is None):
                return True
        stack.extend(ast.iter_child_nodes(node))
    return False


def _public_functions():
    for info in pkgutil.walk_packages(tokendynamics.__path__, "tokendynamics."):
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if inspect.isfunction(obj) and obj.__module__ == info.name:
                yield f"{info.name}.{name}", obj


#: Modules of the core that hold no mathematics of their own (checks, errors, docstring tools):
#: their functions need no References section. Neither do the book layer's (figures, caches, widgets).
_NO_REFERENCES = {"tokendynamics.validation", "tokendynamics.errors", "tokendynamics.docstrings"}


def _public_methods():
    """Public methods of the package's public classes, except overrides of a documented base method
    (an explorer's ``compute`` is documented once, by :class:`~tokendynamics.book.widgets.Explorer`)."""
    for info in pkgutil.walk_packages(tokendynamics.__path__, "tokendynamics."):
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", []):
            cls = getattr(module, name)
            if not (inspect.isclass(cls) and cls.__module__ == info.name):
                continue
            for attr, member in vars(cls).items():
                member = getattr(member, "__func__", member)  # staticmethod, classmethod
                if attr.startswith("_") or not inspect.isfunction(member):
                    continue
                inherited = [getattr(base, attr, None) for base in cls.__mro__[1:]]
                if any(m is not None and "Parameters" in _sections(m.__doc__) for m in inherited):
                    continue
                yield f"{info.name}.{name}.{attr}", member


def docstring_gaps() -> dict[str, list[str]]:
    """Public function or method -> what its docstring lacks: undocumented parameters, a Returns
    section for one that returns a value, and (for a function of the mathematics) References."""
    gaps = {}
    functions = list(_public_functions())
    for name, func in [*functions, *_public_methods()]:
        sections = _sections(func.__doc__)
        missing = []
        params = [p for p in inspect.signature(func).parameters if p not in ("self", "cls")]
        undocumented = [p for p in params if p not in _documented_parameters(sections.get("Parameters", []))]
        if undocumented:
            missing.append("parameters " + ", ".join(undocumented))
        if _returns_a_value(func) and not ({"Returns", "Yields"} & set(sections)):
            missing.append("Returns")
        module = name.rsplit(".", 1)[0]
        mathematics = module not in _NO_REFERENCES and not module.startswith("tokendynamics.book")
        if (name, func) in functions and mathematics and "References" not in sections:
            missing.append("References")  # a method is covered by its class's references
        if missing:
            gaps[name] = missing
    return gaps


def test_every_public_function_documents_parameters_returns_and_references():
    """The house rule of the package (and of its API pages): every public function says what each
    parameter is, what it returns, and where the formula comes from (the paper, the book's chapter)."""
    gaps = docstring_gaps()
    assert not gaps, "\n".join(f"{name}: {'; '.join(m)}" for name, m in sorted(gaps.items()))
