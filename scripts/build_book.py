#!/usr/bin/env python
"""Build pipeline of the book: stage, execute with papermill, build with Jupyter Book.

    python scripts/build_book.py all                 # execute every chapter (fast) + strict HTML build
    python scripts/build_book.py execute [--force]   # only execute chapters (skips unchanged ones)
    python scripts/build_book.py html                # only the strict Sphinx build of executed chapters
    python scripts/build_book.py chapter NAME [-p key value ...] [--mode full]

Chapters are MyST-markdown notebooks (jupytext) in ``chapters/``. Each is converted to ``.ipynb``,
executed by papermill (its ``parameters`` cell receives the parameters), its parameter cells are
tagged ``remove-cell``, and the executed notebook is stored in ``_build/executed/``. A chapter is
re-executed only when its source, the library, or its parameters changed (``--force`` to override).
The book is then assembled in ``_stage/`` (config, toc, markdown pages, bibliography and executed
notebooks) and built with ``jupyter-book build -W -n --keep-going`` into ``_build/html``.

Figures: each chapter runs with ``TOKENDYNAMICS_FIGDIR=_build/figures/<chapter>`` so that every
figure it shows is also written there as a PNG.

Parameters given with ``-p name value`` are checked before anything runs, against the chapter's
own ``parameters`` cell (names, defaults, the comment on each line) and the ranges of
``tokendynamics.book.experiments.PARAMETER_RULES``: an unknown name or a wrong value stops with one
line naming the parameter. A run never destroys the previous good output: each chapter executes
into a temporary folder, which replaces ``_build/run/<chapter>`` (``make chapter``) or
``_build/executed/<chapter>.ipynb`` and ``_build/figures/<chapter>`` (the book) only on success;
a failed run is kept in ``_build/failed/<chapter>/`` for inspection.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tokendynamics.book.experiments import check_parameters, parameter_schema, parameters_cell

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "chapters"
BUILD = ROOT / "_build"
EXECUTED = BUILD / "executed"
FIGURES = BUILD / "figures"
FAILED = BUILD / "failed"
RUNS = BUILD / "run"
STAGE = ROOT / "_stage"
LIB = ROOT / "lib" / "tokendynamics"
KERNEL = "python3"
BOOK_CELL_TIMEOUT = 300  # seconds per cell in the fast book build (no fast cell takes a minute)
CHAPTER_CELL_TIMEOUT = 3600  # seconds per cell for `make chapter` (full settings can be long)
REMOVE_TAGS = ("parameters", "injected-parameters")


def is_notebook(path: Path) -> bool:
    """A MyST notebook has a jupytext/kernelspec front matter."""
    head = path.read_text(encoding="utf-8")[:2000]
    return head.startswith("---") and "kernelspec:" in head


def notebook_sources() -> list[Path]:
    return sorted(p for p in CHAPTERS.glob("*.md") if is_notebook(p))


def source_hash(path: Path, parameters: dict) -> str:
    h = hashlib.sha256()
    h.update(path.read_bytes())
    for f in sorted(LIB.rglob("*.py")):
        h.update(f.relative_to(ROOT).as_posix().encode())
        h.update(f.read_bytes())
    h.update(json.dumps(parameters, sort_keys=True).encode())
    return h.hexdigest()


def to_ipynb(md: Path):
    import jupytext

    nb = jupytext.read(md)
    nb.metadata.setdefault("kernelspec", {"name": KERNEL, "display_name": "Python 3", "language": "python"})
    nb.metadata.pop("jupytext", None)
    return nb


def tag_parameter_cells(nb) -> None:
    """Hide papermill's parameter cells (the chapter's own and the injected one) in the book."""
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if any(t in tags for t in REMOVE_TAGS) and "remove-cell" not in tags:
            cell.metadata["tags"] = [*tags, "remove-cell"]


def execute_one(
    md: Path, out: Path, parameters: dict, figdir: Path, cwd: Path, timeout: int = BOOK_CELL_TIMEOUT
) -> float:
    """Execute one chapter with papermill; returns the wall time. Raises on a failing cell."""
    import nbformat
    import papermill as pm

    os.environ.pop("MPLBACKEND", None)  # Agg here would silently drop inline figures
    os.environ["TOKENDYNAMICS_FIGDIR"] = str(figdir)
    os.environ["TOKENDYNAMICS_HEADLESS"] = "1"  # chapters skip building live widgets (plotting.live_widgets)
    # Chapters run side by side (BOOK_JOBS): one BLAS thread each, or the BLAS pools of two kernels
    # fight over the cores (measured: d = 100 runs up to 20 x slower). A reader's setting wins.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    out.parent.mkdir(parents=True, exist_ok=True)
    if figdir.exists():
        shutil.rmtree(figdir)
    figdir.mkdir(parents=True)  # callers pass a fresh temporary folder (see run_atomically)
    raw = out.with_suffix(".input.ipynb")
    nbformat.write(to_ipynb(md), raw)
    start = time.perf_counter()
    try:
        pm.execute_notebook(
            str(raw),
            str(out),
            parameters=parameters,
            kernel_name=KERNEL,
            cwd=str(cwd),
            progress_bar=False,
            execution_timeout=timeout,
            log_output=False,
        )
    finally:
        raw.unlink(missing_ok=True)
    seconds = time.perf_counter() - start
    nb = nbformat.read(out, as_version=4)
    tag_parameter_cells(nb)
    nb.metadata["tokendynamics"] = {
        "parameters": parameters,
        "seconds": round(seconds, 2),
        "source": md.relative_to(ROOT).as_posix(),
    }
    nbformat.write(nb, out)
    return seconds


def _replace_dir(new: Path, old: Path) -> None:
    """Put the folder ``new`` at ``old`` (same file system), removing what was there only once ``new`` is in place."""
    old.parent.mkdir(parents=True, exist_ok=True)
    trash = None
    if old.exists():
        trash = old.with_name(f".{old.name}.old-{os.getpid()}")
        if trash.exists():
            shutil.rmtree(trash)
        os.replace(old, trash)
    os.replace(new, old)
    if trash is not None:
        shutil.rmtree(trash, ignore_errors=True)


def run_atomically(md: Path, parameters: dict, notebook: Path, figures: Path, *, timeout: int, run=None) -> float:
    """Execute a chapter into a temporary folder; on success move its notebook to ``notebook`` and its
    figures to ``figures``. On failure nothing there is touched: the failed run is moved to
    ``_build/failed/<chapter>/`` and the exception is raised again. Returns the wall time."""
    run = execute_one if run is None else run
    notebook.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{md.stem}.", suffix=".tmp", dir=notebook.parent))
    try:
        seconds = run(md, tmp / notebook.name, parameters, tmp / "figures", CHAPTERS, timeout=timeout)
    except BaseException:
        _replace_dir(tmp, FAILED / md.stem)
        raise
    os.replace(tmp / notebook.name, notebook)
    _replace_dir(tmp / "figures", figures)
    shutil.rmtree(tmp, ignore_errors=True)
    return seconds


def _execute_job(args):
    md, parameters, force = args
    md = Path(md)
    out = EXECUTED / f"{md.stem}.ipynb"
    key = source_hash(md, parameters)
    stamp = out.with_suffix(".hash")
    if not force and out.exists() and stamp.exists() and stamp.read_text() == key:
        return md.stem, None, "unchanged"
    stamp.unlink(missing_ok=True)
    for attempt in (1, 2):
        try:
            seconds = run_atomically(md, parameters, out, FIGURES / md.stem, timeout=BOOK_CELL_TIMEOUT)
            break
        except Exception as exc:  # report every failing chapter, then fail
            # A kernel that stops answering (a cell over the timeout, or a dead kernel) is retried
            # once: we have seen the notebook client wait on an idle kernel after a widget cell.
            # An error raised by the chapter's own code is never retried.
            stalled = type(exc).__name__ in ("CellTimeoutError", "DeadKernelError", "TimeoutError")
            if stalled and attempt == 1:
                print(f"  {md.stem}: {type(exc).__name__} ({exc}); retrying once", flush=True)
                continue
            return md.stem, None, f"FAILED: {type(exc).__name__}: {exc}"
    stamp.write_text(key)
    return md.stem, seconds, "executed"


def execute(force: bool = False, jobs: int = 2, only: list[str] | None = None) -> None:
    sources = notebook_sources()
    if only:
        sources = [s for s in sources if s.stem in only]
    EXECUTED.mkdir(parents=True, exist_ok=True)
    todo = [(str(s), {}, force) for s in sources]
    print(f"executing {len(todo)} chapter(s) with papermill ({jobs} in parallel)", flush=True)
    failures = []
    times = {}
    timing_file = BUILD / "execution-times.json"
    if timing_file.exists():
        times = json.loads(timing_file.read_text())
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        for stem, seconds, status in pool.map(_execute_job, todo):
            if seconds is not None:
                times[stem] = round(seconds, 2)
                print(f"  {stem}: executed in {seconds:.1f} s", flush=True)
            else:
                print(f"  {stem}: {status}", flush=True)
            if status.startswith("FAILED"):
                failures.append((stem, status))
    timing_file.write_text(json.dumps(times, indent=2, sort_keys=True))
    if failures:
        for stem, status in failures:
            print(
                f"\nchapter {stem} {status}\n  (executed notebook with the error: {FAILED / stem / (stem + '.ipynb')};"
                " the previous good output is untouched)",
                file=sys.stderr,
            )
        raise SystemExit(1)


def stage() -> None:
    """Assemble the book sources: config, toc, plain pages, bibliography, executed notebooks."""
    if STAGE.exists():
        shutil.rmtree(STAGE)
    (STAGE / "chapters").mkdir(parents=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy2(ROOT / name, STAGE / name)
    for path in sorted(CHAPTERS.iterdir()):
        if path.name.startswith(".") or path.suffix == ".ipynb":
            continue
        if path.suffix == ".md" and is_notebook(path):
            executed = EXECUTED / f"{path.stem}.ipynb"
            if not executed.exists():
                raise SystemExit(f"chapter {path.stem} has not been executed (run the execute step)")
            shutil.copy2(executed, STAGE / "chapters" / executed.name)
        elif path.is_dir():
            shutil.copytree(path, STAGE / "chapters" / path.name)
        else:
            shutil.copy2(path, STAGE / "chapters" / path.name)


def html() -> None:
    stage()
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [
        str(jb),
        "build",
        str(STAGE),
        "--path-output",
        str(ROOT),
        "--builder",
        "html",
        "--all",
        "-W",
        "-n",
        "--keep-going",
    ]  # --all: a fresh build, so no warning is hidden
    print("building:", " ".join(cmd[1:]), flush=True)
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    result = subprocess.run(cmd, cwd=ROOT, env=env)
    if result.returncode != 0:
        raise SystemExit(f"jupyter-book build failed (exit code {result.returncode}); warnings are errors")
    print(f"book built: {BUILD / 'html' / 'index.html'}")


def parse_value(text: str):
    """Interpret a command-line parameter value like papermill: number, bool, list, else string."""
    for candidate in (text, text.capitalize()):
        try:
            return ast.literal_eval(candidate)
        except (ValueError, SyntaxError):
            continue
    return text


def chapter_parameters(md: Path, params: list[list[str]], mode: str | None = None) -> dict:
    """The parameters of ``-p name value`` (and ``--mode``), checked against the chapter's parameters cell.

    Raises SystemExit with one line naming the first wrong parameter (an unknown name, a wrong type,
    a value out of range) before anything is executed.
    """
    parameters = {k: parse_value(v) for k, v in params}
    if mode:
        parameters["mode"] = mode
    source = parameters_cell(md.read_text(encoding="utf-8"))
    try:
        return check_parameters(parameter_schema(source or ""), parameters, chapter=md.stem)
    except ValueError as exc:
        raise SystemExit(f"make chapter {md.stem}: {exc}") from None


def chapter(name: str, params: list[list[str]], mode: str | None, *, run=None) -> None:
    md = CHAPTERS / f"{name}.md"
    if not md.exists() or not is_notebook(md):
        known = ", ".join(p.stem for p in notebook_sources())
        raise SystemExit(f"no chapter notebook named {name!r}; known: {known}")
    parameters = chapter_parameters(md, params, mode)
    target = RUNS / name
    print(f"running {name} with parameters {parameters}", flush=True)
    try:  # into a temporary folder: the previous good _build/run/<name> is replaced only on success
        seconds = run_atomically(
            md, parameters, target / f"{name}.ipynb", target / "figures", timeout=CHAPTER_CELL_TIMEOUT, run=run
        )
    except Exception as exc:
        last = str(exc).strip().splitlines()[-1] if str(exc).strip() else ""
        raise SystemExit(
            f"chapter {name} FAILED: {type(exc).__name__}: {last}\n"
            f"  the failed run is in {FAILED / name}; the previous output in {target} is untouched"
        ) from None
    print(f"done in {seconds:.1f} s\n  notebook: {target / (name + '.ipynb')}\n  figures:  {target / 'figures'}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_all = sub.add_parser("all", help="execute chapters and build the HTML")
    p_exec = sub.add_parser("execute", help="execute chapters with papermill")
    for p in (p_all, p_exec):
        p.add_argument("--force", action="store_true", help="re-execute unchanged chapters too")
        p.add_argument("--jobs", type=int, default=int(os.environ.get("BOOK_JOBS", "2")))
        p.add_argument("--only", nargs="*", help="chapter stems to execute")
    sub.add_parser("html", help="strict HTML build of the executed chapters")
    p_ch = sub.add_parser("chapter", help="re-run one chapter with the reader's parameters")
    p_ch.add_argument("name")
    p_ch.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"))
    p_ch.add_argument("--mode", choices=["fast", "full"])
    args = parser.parse_args(argv)
    if args.command in ("all", "execute"):
        execute(force=args.force, jobs=args.jobs, only=args.only)
    if args.command in ("all", "html"):
        html()
    if args.command == "chapter":
        chapter(args.name, args.parameter, args.mode)


if __name__ == "__main__":
    main()
