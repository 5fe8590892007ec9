"""The shape of the package: imports go one way, and the mathematics never reaches the book layer.

The core (every module of ``tokendynamics`` outside ``tokendynamics.book``) is the mathematics:
attention, integrators, transport, the reductions of both papers, energies and metrics. It imports
neither matplotlib nor any notebook machinery nor the book layer, has no import cycle, and its
modules use each other's public names only. The only imports inside functions are the optional
numba accelerators, kept out of ``import tokendynamics`` so that the library imports (and runs)
where numba is missing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lib" / "tokendynamics"
FORBIDDEN_IN_CORE = ("matplotlib", "ipywidgets", "IPython", "myst_nb", "tokendynamics.book")
LAZY_ACCELERATORS = {"tokendynamics._kernels", "tokendynamics._gaussian_kernels", "tokendynamics._batch_kernels"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path):
    """(imported module, imported names, lineno, inside a function) for every import of a module."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nested = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    nested.add(id(sub))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno, id(node) in nested
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [a.name for a in node.names]
            if node.module is None or node.level and not node.module:
                # "from . import x": each name is a module of the package
                for a in names:
                    yield f"{target}.{a}", [], node.lineno, id(node) in nested
            else:
                yield target, names, node.lineno, id(node) in nested


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
CORE = sorted(m for m in MODULES if not m.startswith("tokendynamics.book"))


def _internal_target(target: str) -> str | None:
    """The package module an import refers to (a name imported from a package counts as the package)."""
    while target and target not in MODULES:
        target = target.rsplit(".", 1)[0] if "." in target else ""
    return target or None


@pytest.mark.parametrize("module", CORE)
def test_core_module_imports_neither_plotting_nor_the_book_layer(module):
    bad = [
        f"line {line}: {target}"
        for target, _, line, _ in _imports(MODULES[module])
        if any(target == f or target.startswith(f + ".") for f in FORBIDDEN_IN_CORE)
    ]
    assert not bad, f"{module} imports what the mathematics must not need: {bad}"


def test_package_has_no_import_cycle():
    graph = {m: set() for m in MODULES}
    for m, path in MODULES.items():
        for target, _, _, _ in _imports(path):
            t = _internal_target(target)
            if t and t != m and t != "tokendynamics":
                graph[m].add(t)
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycle = stack[stack.index(t) :] + [t]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_modules_import_only_public_names_of_other_modules():
    bad = []
    for m, path in MODULES.items():
        for target, names, line, _ in _imports(path):
            t = _internal_target(target)
            if t is None or t == m:
                continue
            bad += [f"{m} line {line}: {t}.{n}" for n in names if n.startswith("_") and n != "__version__"]
    assert not bad, "private names imported across modules (make them public where they live): " + "; ".join(bad)


def test_only_the_numba_accelerators_are_imported_inside_functions():
    bad = []
    for m, path in MODULES.items():
        for target, _, line, nested in _imports(path):
            if nested and _internal_target(target) and _internal_target(target) not in LAZY_ACCELERATORS:
                bad.append(f"{m} line {line}: {target}")
    assert not bad, "function-level imports of the package (move the shared piece down instead): " + "; ".join(bad)


def test_no_module_level_getattr_reexports():
    bad = [
        m
        for m, path in MODULES.items()
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.FunctionDef) and node.name in ("__getattr__", "__dir__")
    ]
    assert not bad, f"modules re-exporting through __getattr__: {bad}"


def test_every_name_in_all_is_defined_once_across_the_core():
    owners: dict[str, list[str]] = {}
    for m in CORE:
        tree = ast.parse(MODULES[m].read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                for elt in node.value.elts:
                    owners.setdefault(elt.value, []).append(m)
    owners = {k: v for k, v in owners.items() if len(v) > 1 and "tokendynamics" not in v}
    assert not owners, f"one name, two meanings (listed in __all__ of several modules): {owners}"


def test_importing_the_core_does_not_import_matplotlib():
    import subprocess
    import sys

    code = (
        "import sys, tokendynamics, tokendynamics.projective, tokendynamics.gradient_flow; "
        "print('matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


ODE_SOLVERS = {"solve_ivp", "odeint", "ode", "complex_ode", "RK23", "RK45", "DOP853", "Radau", "BDF", "LSODA"}


def test_only_odes_calls_scipys_ode_solvers():
    """Every adaptive ODE of the library goes through ``tokendynamics.odes`` (``solve_ode`` or ``adaptive_solve``),
    so that a failed step or a NaN is reported the same way everywhere (an error with the time reached)."""
    bad = [
        f"{m} line {line}: {target} ({', '.join(names) or 'the module'})"
        for m, path in MODULES.items()
        if m != "tokendynamics.odes"
        for target, names, line, _ in _imports(path)
        if (target == "scipy.integrate" and (not names or ODE_SOLVERS & set(names)))
        or (target == "scipy" and "integrate" in names)
    ]
    assert not bad, "scipy's ODE solvers imported outside tokendynamics.odes (call odes.solve_ode): " + "; ".join(bad)


def test_no_core_module_branches_on_the_name_of_an_attention_kind():
    """Modules ask the kind (``layer.kind.require(...)``, ``layer.kind.has(...)``); only ``tokendynamics.kinds``
    knows the kinds by name. Checked to fail on a ``kind == "softmax"`` written into a core module."""
    import re

    pattern = re.compile(r"\bkind\s*(==|!=|in\b|not in\b)")
    bad = [
        f"{m} line {k}: {line.strip()}"
        for m in CORE
        if m != "tokendynamics.kinds"
        for k, line in enumerate(MODULES[m].read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert not bad, "comparisons on a kind name (ask the kind for a capability instead): " + "; ".join(bad)


def test_no_public_function_takes_more_than_ten_parameters_without_saying_why():
    """A public function of the core takes at most 10 parameters, or its docstring has a line "Why N parameters"."""
    bad = []
    for m, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                continue
            a = node.args
            names = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs if p.arg not in ("self", "cls")]
            doc = ast.get_docstring(node) or ""
            if len(names) > 10 and f"Why {len(names)} parameters" not in doc:
                bad.append(f"{m}.{node.name} ({len(names)})")
    assert not bad, "public functions with more than 10 parameters and no reason given: " + "; ".join(bad)
