"""The code a reader can see runs by itself: no visible cell uses a name that only a hidden cell defines.

A chapter's visible code is every code cell not tagged ``remove-cell`` or ``remove-input`` (cells tagged
``hide-input`` show their code behind a toggle, so they count), plus the ``parameters`` cell (papermill
hides it in the built page, but the chapter prints the settings it reads). Copying the visible cells in
order into a notebook must give code that runs: each name a visible cell reads must be defined by an
earlier visible cell (an assignment, a definition or an import), or be a builtin. Hidden cells may
compute what only hidden cells use (glued numbers, drawing).

Two checks. The name check reads the cells' symbol tables (``symtable``): it needs no kernel, costs
nothing and covers every chapter. The execution check (marker ``book``) runs exactly the visible cells
of a chapter, in the fast setting, in a fresh kernel: about 40 s a chapter, so by default only the
introduction; ``TOKENDYNAMICS_VISIBLE_CODE=all`` runs every chapter (several minutes).
"""

from __future__ import annotations

import builtins
import os
import symtable
import sys
from pathlib import Path

import pytest

from tests.helpers import toc_files

jupytext = pytest.importorskip("jupytext")

ROOT = Path(__file__).resolve().parents[2]
HIDDEN = {"remove-cell", "remove-input"}
CHAPTERS = [stem for stem in toc_files() if (ROOT / f"{stem}.md").exists() and "/api" not in stem]
#: chapters whose visible code does not run by itself yet, with what they need
PENDING: dict[str, str] = {}


def _pending(stem: str):
    if stem in PENDING:
        return pytest.param(stem, marks=pytest.mark.xfail(reason=PENDING[stem], strict=True))
    return stem


def _code_cells(stem: str):
    """(cell, visible) for every code cell of a chapter, in order."""
    nb = jupytext.read(ROOT / f"{stem}.md")
    for cell in nb.cells:
        if cell.cell_type == "code":
            tags = set(cell.metadata.get("tags", []))
            yield cell, ("parameters" in tags) or not (tags & HIDDEN)


def _cells(stem: str):
    for cell, visible in _code_cells(stem):
        source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        yield source, visible


def _names(source: str) -> tuple[set[str], set[str]]:
    """(names the cell reads from the notebook's namespace, names it defines there)."""
    table = symtable.symtable(source, "<cell>", "exec")
    defined = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    read = {s.get_name() for s in table.get_symbols() if s.is_referenced()}
    stack = list(table.get_children())
    while stack:  # functions and comprehensions read module-level names as implicit globals
        child = stack.pop()
        stack += child.get_children()
        read |= {s.get_name() for s in child.get_symbols() if s.is_referenced() and s.is_global()}
    return read - defined, defined


def _missing_names(stem: str) -> list[str]:
    known = set(dir(builtins)) | {"display", "get_ipython", "__file__"}
    missing = []
    for k, (source, visible) in enumerate(_cells(stem)):
        if not visible:
            continue
        read, defined = _names(source)
        missing += [f"cell {k}: {name}" for name in sorted(read - known)]
        known |= defined
    return missing


@pytest.mark.parametrize("stem", [_pending(stem) for stem in CHAPTERS])
def test_visible_code_uses_only_names_defined_by_visible_code(stem):
    missing = _missing_names(stem)
    assert not missing, (
        f"{stem}: visible code uses names that only hidden cells define (show the model, hide the formatting): "
        + "; ".join(missing)
    )


def test_the_check_fails_on_a_name_defined_in_a_hidden_cell():
    read, defined = _names("y = f(x) + 1\n[z * k for z in range(3)]")
    assert read == {"f", "x", "k", "range"} and "y" in defined
    read, _ = _names("def g(t):\n    return t * scale\n")
    assert read == {"scale"}


def test_the_check_reads_the_cells_a_reader_sees_in_order(tmp_path, monkeypatch):
    """A name defined by a ``remove-cell`` cell and read by a ``hide-input`` cell is reported; the same
    name defined by a visible cell, or read only by hidden cells, is not."""
    page = tmp_path / "chapters" / "page.md"
    page.parent.mkdir()
    cell = "```{{code-cell}} ipython3\n{tags}\n{source}\n```\n\n"
    hidden = cell.format(tags=":tags: [remove-cell]\n", source="secret = 1")
    shown = cell.format(tags=":tags: [hide-input]\n", source="print(secret)")
    used_hidden = cell.format(tags=":tags: [remove-input]\n", source="print(secret)")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    page.write_text(hidden + shown)
    assert _missing_names("chapters/page") == ["cell 1: secret"]
    page.write_text(hidden + used_hidden)
    assert _missing_names("chapters/page") == []
    page.write_text(cell.format(tags="", source="secret = 1") + shown)
    assert _missing_names("chapters/page") == []


def _executed_chapters() -> list[str]:
    if os.environ.get("TOKENDYNAMICS_VISIBLE_CODE") == "all":
        return CHAPTERS
    return ["chapters/index"]


@pytest.mark.book
@pytest.mark.parametrize("stem", [_pending(stem) for stem in _executed_chapters()])
def test_visible_cells_alone_execute_in_a_fresh_kernel(stem, tmp_path, monkeypatch):
    """Exactly the cells a reader sees (the parameters cell first, fast setting) run in a fresh kernel, in the
    chapter's folder, with figures written to a temporary folder."""
    nbclient = pytest.importorskip("nbclient")
    nb = jupytext.read(ROOT / f"{stem}.md")
    nb.cells = [cell for cell, visible in _code_cells(stem) if visible]
    monkeypatch.setenv("TOKENDYNAMICS_FIGDIR", str(tmp_path))
    monkeypatch.setenv("TOKENDYNAMICS_HEADLESS", "1")
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str((ROOT / stem).parent)}}
    )
    client.execute()  # raises CellExecutionError naming the cell and the error
