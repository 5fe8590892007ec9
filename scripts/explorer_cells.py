"""Which cells of a chapter its live explorer needs (used by tests/test_lab.py and benchmarks).

Each chapter with a live explorer has one code cell that builds it: one call of an explorer of
``tokendynamics.book.explorers`` (``variants_explorer(mode)``, ``cone_explorer()``, ...). Running a
whole chapter takes 30 s to several minutes on two shared cores; the explorer needs only the cells
that define the names it uses (usually the ``parameters`` cell). :func:`explorer_cells` finds them
by reading the code (``ast``):

* walking back from the explorer cell, a cell is needed if it (re)defines a name still needed
  (assignment, ``def``, ``class``, ``import``) or mutates one in place (``p["x"] = ...``);
* a needed cell's own free names become needed; a name it binds is satisfied by it (the nearest
  definition above a use wins, as when the notebook runs top to bottom).

This is a static approximation: a cell that changes state only through a call
(``use_book_style()``, ``rng.shuffle(x)``) is not picked. A missed dependency fails loudly (a
``NameError`` in the explorer cell), it cannot make a test pass that should fail.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "chapters"
# a live explorer's call, not its twin's (``static_explorer("variants_explorer", mode)``, built in the book only)
EXPLORER_PATTERN = re.compile(r"^(?!static_explorer\()[a-z_]+_explorer\(", re.MULTILINE)
_BUILTINS = set(dir(builtins)) | {"display", "get_ipython"}


@dataclass
class ExplorerCells:
    chapter: str  # file stem, e.g. "01_well_posedness"
    n_cells: int  # all cells of the notebook (markdown included), as JupyterLab shows them
    n_code: int  # code cells of the chapter
    explorer: int  # index (among all cells) of the cell that builds the explorer
    needed: list[int]  # indices of the code cells to run, in order, the explorer cell last
    sources: dict[int, str]  # their sources


def _strip_magics(source: str) -> str:
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def bound_and_free(source: str) -> tuple[set[str], set[str], set[str]]:
    """(names the cell binds, names it reads before/without binding them, names it mutates in place)."""
    tree = ast.parse(_strip_magics(source))
    bound, read, mutated = set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, (ast.Store, ast.Del)) else read).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound.add((alias.asname or alias.name).split(".")[0])
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(node, ast.AugAssign) and isinstance(target, ast.Name):
                    read.add(target.id)
                    mutated.add(target.id)
                if not isinstance(target, (ast.Subscript, ast.Attribute)):
                    continue
                while isinstance(target, (ast.Subscript, ast.Attribute)):
                    target = target.value
                if isinstance(target, ast.Name):
                    mutated.add(target.id)
    free = ((read - bound) | (mutated & read)) - _BUILTINS
    return bound, free, mutated


def has_explorer(md: Path) -> bool:
    return bool(EXPLORER_PATTERN.search(md.read_text(encoding="utf-8")))


def explorer_cells(md: Path | str) -> ExplorerCells:
    """The code cells the explorer of chapter ``md`` needs, found statically (see the module doc)."""
    import jupytext

    md = Path(md)
    if not md.is_absolute() and not md.exists():
        md = CHAPTERS / md
    nb = jupytext.read(md)
    code = [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    targets = [i for i, src in code if EXPLORER_PATTERN.search(src)]
    if len(targets) != 1:
        raise ValueError(f"{md.name}: expected one explorer cell (a line calling an *_explorer(...)), found {targets}")
    target = targets[0]
    info = {i: bound_and_free(src) for i, src in code}
    need = set(info[target][1])
    needed = [target]
    for i, _src in reversed([c for c in code if c[0] < target]):
        bound, free, mutated = info[i]
        if bound & need or mutated & need:
            needed.append(i)
            need = (need - (bound - mutated)) | free
    needed.reverse()
    sources = dict(code)
    return ExplorerCells(md.stem, len(nb.cells), len(code), target, needed, {i: sources[i] for i in needed})


def explorer_chapters() -> list[Path]:
    """The chapters that build a live explorer."""
    return sorted(p for p in CHAPTERS.glob("*.md") if has_explorer(p))


if __name__ == "__main__":
    for path in explorer_chapters():
        cells = explorer_cells(path)
        print(
            f"{cells.chapter}: explorer cell {cells.explorer}; runs cells {cells.needed} "
            f"({len(cells.needed)} of {cells.n_code} code cells)"
        )
