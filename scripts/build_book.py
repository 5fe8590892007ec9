#!/usr/bin/env python
"""Build pipeline of the book: stage, execute with papermill, build with Jupyter Book.

    python scripts/build_book.py all                 # execute every chapter (fast) + strict HTML build
    python scripts/build_book.py all --mode full     # the same in the paper-scale setting (make book MODE=full)
    python scripts/build_book.py execute [--force]   # only execute chapters (skips unchanged ones)
    python scripts/build_book.py html                # only the strict Sphinx build of executed chapters
    python scripts/build_book.py chapter NAME [-p key value ...] [--mode full]
    python scripts/build_book.py all --repo owner/name   # the same, with a repository link and launch buttons
    python scripts/build_book.py notebooks --repo owner/name --out DIR   # executed notebooks for Colab/Binder

Chapters are MyST-markdown notebooks (jupytext) in ``chapters/``. Each is converted to ``.ipynb``,
executed by papermill (its ``parameters`` cell receives the parameters), its parameter cells are
tagged ``remove-cell``, and the executed notebook is stored in ``_build/executed/``. A chapter is
re-executed only when its source, the library, or its parameters changed (``--force`` to override).
The book is then assembled in ``_stage/`` (config, toc, static files, markdown pages, bibliography and
executed notebooks) and built with ``jupyter-book build -W -n --keep-going`` into ``_build/html``.

Figures: each chapter runs with ``TOKENDYNAMICS_FIGDIR=_build/figures/<chapter>`` so that every
figure it shows is also written there as a PNG.

Figure text: the kernels run with ``IPYTHONDIR=_build/ipython``, whose start-up file
(``scripts/figure_text_startup.py``) records in every PNG a figure is printed to the smallest font
size of its texts and its dpi (PNG text chunk ``tokendynamics:text``; read by tests/test_browser.py).

Offline reading: MathJax 3 is shipped in ``_build/html/_static/mathjax`` (``scripts/vendor_assets.py``,
staged as ``_stage/_vendor``, which ``_config.yml`` lists in ``html_static_path``). The animations'
font-awesome CDN link is removed from the staged notebooks: the theme's stylesheet draws their
button icons from its font-awesome web font (``_ext/book_pages.py`` drops the theme's 1.5 MB icon
script, moves the animations' frames to files and makes images lazy after the HTML is written).

Launch buttons: ``--repo owner/name`` (``make book REPO=owner/name``; the Pages workflow passes its
``github.repository``) writes the GitHub repository into the staged ``_config.yml``: the pages get a
repository link and, on every chapter, Binder and Colab buttons. Both open the executed notebook
``chapters/<chapter>.ipynb`` on the branch ``notebooks``, which the Pages workflow pushes after each
build of ``main`` (the source tree of that commit plus the executed notebooks, written by the
``notebooks`` step below; Colab can only open an ``.ipynb`` that is on GitHub). Binder builds the
environment from ``binder/`` and opens the notebook in JupyterLab. Without ``--repo`` the staged
config is the repository's own: no repository link, no launch button.

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
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tokendynamics.book.experiments import check_parameters, parameter_schema, parameters_cell

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import vendor_assets  # noqa: E402  (scripts/vendor_assets.py)

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
BOOK_CELL_TIMEOUT_FULL = 900  # the full setting: a loaded machine can triple a 3-minute cell

#: Execution budget of each chapter, in seconds of wall time on the reference machine (2 cores, two
#: chapters side by side, BOOK_JOBS=2): (fast, full). A chapter over its budget is reported by every
#: build and by ``make bench`` (benchmarks/bench_chapters.py); the whole full book must fit in 9 minutes.
BUDGETS = {
    "index": (30, 60),
    "01_well_posedness": (60, 150),
    "02_gaussian_preservation": (80, 150),
    "03_gradient_flow": (45, 60),
    "04_kuramoto_reduction": (60, 120),
    "05_kuramoto_regimes": (45, 60),
    "06_high_dimensional": (100, 170),
    "07_phase_diagrams": (45, 190),
    "08_transformer": (30, 90),
    "claims": (30, 30),
}  # full: 1080 s in all, under 9 minutes on two cores
MODES = ("fast", "full")
CHAPTER_CELL_TIMEOUT = 3600  # seconds per cell for `make chapter` (full settings can be long)
REMOVE_TAGS = ("parameters", "injected-parameters")
FIGURE_TEXT_STARTUP = ROOT / "scripts" / "figure_text_startup.py"
IPYTHONDIR = BUILD / "ipython"
VENDOR_DIR = "_vendor"  # staged folder of offline assets; `html_static_path` in _config.yml
# matplotlib's to_jshtml links font-awesome 4.4 from a CDN for its button icons (<i class="fa ...">)
FONT_AWESOME_LINK = re.compile(
    r'<link\s+rel="stylesheet"\s+href="https://maxcdn\.bootstrapcdn\.com/font-awesome/[^"]*"\s*/?>'
)
NOTEBOOKS_BRANCH = "notebooks"  # where the Pages workflow publishes the executed notebooks
BINDERHUB_URL = "https://mybinder.org"
COLAB_URL = "https://colab.research.google.com"
COLAB_TAG = "colab-setup"
REPO_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$"


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
    h.update(FIGURE_TEXT_STARTUP.read_bytes())
    return h.hexdigest()


def install_ipython_startup() -> Path:
    """The IPYTHONDIR of the chapter kernels: a profile whose start-up file records figure text sizes."""
    startup = IPYTHONDIR / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    target = startup / "50-figure-text.py"
    if not target.exists() or target.read_bytes() != FIGURE_TEXT_STARTUP.read_bytes():
        shutil.copyfile(FIGURE_TEXT_STARTUP, target)
    return IPYTHONDIR


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
    os.environ["IPYTHONDIR"] = str(install_ipython_startup())  # PNGs record their smallest text size
    os.environ["TOKENDYNAMICS_ROOT"] = str(ROOT)  # ... and the legends on data (tests.helpers.legend_overlaps)
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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_leftovers(folder: Path, stem: str) -> list[Path]:
    """Remove the temporary folders that a killed run of chapter ``stem`` left in ``folder``: those of
    :func:`run_atomically` (``.<stem>.<pid>.*.tmp``) and of :func:`_replace_dir` (``.<name>.old-<pid>``)
    whose process is gone. A live run's folders are kept. Returns what was removed."""
    removed = []
    patterns = (rf"\.{re.escape(stem)}\.(\d+)\..*\.tmp", r"\..+\.old-(\d+)")
    for path in folder.glob(".*") if folder.is_dir() else ():
        match = next((m for m in (re.fullmatch(p, path.name) for p in patterns) if m), None)
        if match and path.is_dir() and not _alive(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def run_atomically(md: Path, parameters: dict, notebook: Path, figures: Path, *, timeout: int, run=None) -> float:
    """Execute a chapter into a temporary folder; on success move its notebook to ``notebook`` and its
    figures to ``figures``. On failure nothing there is touched: the failed run is moved to
    ``_build/failed/<chapter>/`` and the exception is raised again. Leftovers of a killed earlier run
    (:func:`remove_leftovers`) are removed first. Returns the wall time."""
    run = execute_one if run is None else run
    notebook.parent.mkdir(parents=True, exist_ok=True)
    for folder in (notebook.parent, figures.parent, FAILED):
        remove_leftovers(folder, md.stem)
    tmp = Path(tempfile.mkdtemp(prefix=f".{md.stem}.{os.getpid()}.", suffix=".tmp", dir=notebook.parent))
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
            timeout = BOOK_CELL_TIMEOUT_FULL if parameters.get("mode") == "full" else BOOK_CELL_TIMEOUT
            seconds = run_atomically(md, parameters, out, FIGURES / md.stem, timeout=timeout)
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


def timing_key(stem: str, mode: str) -> str:
    """The key of a chapter's last execution time in ``_build/execution-times.json``."""
    return stem if mode == "fast" else f"{stem}:{mode}"


def longest_first(stems: list[str], times: dict, mode: str) -> list[str]:
    """Chapters ordered by their last measured time, longest first; a chapter never timed on this
    machine counts with its budget (a chapter with neither comes first of all).

    With two workers, starting the longest chapters first is the classic longest-processing-time
    rule: the short ones fill in at the end instead of leaving one worker idle behind a long one.
    """
    column = MODES.index(mode)

    def expected(stem: str) -> float:
        budget = BUDGETS.get(stem, (float("inf"), float("inf")))[column]
        return times.get(timing_key(stem, mode), budget)

    return sorted(stems, key=lambda stem: -expected(stem))


def execute(force: bool = False, jobs: int = 2, only: list[str] | None = None, mode: str = "fast") -> None:
    if mode not in MODES:
        raise SystemExit(f"--mode must be one of {MODES}, got {mode!r}")
    sources = {s.stem: s for s in notebook_sources()}
    if only:
        sources = {stem: s for stem, s in sources.items() if stem in only}
    EXECUTED.mkdir(parents=True, exist_ok=True)
    times = {}
    timing_file = BUILD / "execution-times.json"
    if timing_file.exists():
        times = json.loads(timing_file.read_text())
    order = longest_first(list(sources), times, mode)
    parameters = {} if mode == "fast" else {"mode": mode}
    todo = [(str(sources[stem]), parameters, force) for stem in order]
    print(f"executing {len(todo)} chapter(s) with papermill ({jobs} in parallel, {mode} setting)", flush=True)
    failures = []
    start = time.perf_counter()
    budget_index = MODES.index(mode)
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        for stem, seconds, status in pool.map(_execute_job, todo):
            if seconds is not None:
                times[timing_key(stem, mode)] = round(seconds, 2)
                budget = BUDGETS.get(stem, (None, None))[budget_index]
                over = f" OVER its budget of {budget} s" if budget is not None and seconds > budget else ""
                shown = f" (budget {budget} s{over})" if budget is not None else ""
                print(f"  {stem}: executed in {seconds:.1f} s{shown}", flush=True)
            else:
                print(f"  {stem}: {status}", flush=True)
            if status.startswith("FAILED"):
                failures.append((stem, status))
    print(f"execution: {time.perf_counter() - start:.0f} s wall for {len(todo)} chapter(s)", flush=True)
    timing_file.write_text(json.dumps(times, indent=2, sort_keys=True))
    if failures:
        for stem, status in failures:
            print(
                f"\nchapter {stem} {status}\n  (executed notebook with the error: {FAILED / stem / (stem + '.ipynb')};"
                " the previous good output is untouched)",
                file=sys.stderr,
            )
        raise SystemExit(1)


def drop_font_awesome_link(nb) -> int:
    """Remove the animations' font-awesome CDN link from a notebook's HTML outputs; returns the count.

    Offline the link only fails: pydata-sphinx-theme's stylesheet (local, in _static) draws the
    buttons' ``<i class="fa fa-play">`` from its font-awesome 6 web font, which the browser checks
    verify (tests/test_browser.py, button icons)."""
    count = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            html_out = data.get("text/html")
            if html_out is None:
                continue
            text = "".join(html_out) if isinstance(html_out, list) else html_out
            text, n = FONT_AWESOME_LINK.subn("<!-- font-awesome: icons drawn by the theme's web font -->", text)
            if n:
                count += n
                data["text/html"] = text
    return count


def stage_notebook(executed: Path, target: Path) -> None:
    """Copy an executed notebook into the stage, without links to other hosts in its outputs."""
    import nbformat

    nb = nbformat.read(executed, as_version=4)
    if drop_font_awesome_link(nb):
        nbformat.write(nb, target)
    else:
        shutil.copy2(executed, target)


def check_repo(repo: str) -> str:
    """``owner/name`` of a GitHub repository (a non-GitHub repository URL aborts the Jupyter Book build)."""
    import re

    repo = repo.strip().removeprefix("https://github.com/").strip("/")
    if not re.match(REPO_PATTERN, repo):
        raise SystemExit(f"--repo must be a GitHub repository as owner/name, got {repo!r}")
    return repo


def book_config(repo: str | None = None) -> str:
    """The staged ``_config.yml``: the repository's own, plus repository link and launch buttons for ``repo``."""
    text = (ROOT / "_config.yml").read_text(encoding="utf-8")
    if not repo:
        return text
    import yaml

    repo = check_repo(repo)
    config = yaml.safe_load(text)
    config["repository"] = {"url": f"https://github.com/{repo}", "branch": NOTEBOOKS_BRANCH, "path_to_book": ""}
    config.setdefault("html", {})["use_repository_button"] = True
    config["launch_buttons"] = {
        "notebook_interface": "jupyterlab",
        "binderhub_url": BINDERHUB_URL,
        "colab_url": COLAB_URL,
    }
    header = (
        f"# Staged by scripts/build_book.py for the repository {repo}: repository link and Binder/Colab\n"
        f"# buttons opening chapters/<chapter>.ipynb on the branch {NOTEBOOKS_BRANCH!r}.\n"
    )
    return header + yaml.safe_dump(config, sort_keys=False, allow_unicode=True, width=100)


def stage(repo: str | None = None, dest: Path = STAGE, only: list[str] | None = None) -> None:
    """Assemble the book sources: config, toc, plain pages, bibliography, executed notebooks, offline MathJax.

    ``repo`` (``owner/name``) adds the repository link and launch buttons; ``only`` (page stems)
    stages a smaller book with just these pages, the first one the root (for quick tests).
    """
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "chapters").mkdir(parents=True)
    (dest / "_config.yml").write_text(book_config(repo), encoding="utf-8")
    if only:
        toc = {"format": "jb-article", "root": f"chapters/{only[0]}"}
        if only[1:]:
            toc["sections"] = [{"file": f"chapters/{stem}"} for stem in only[1:]]
        import yaml

        (dest / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False), encoding="utf-8")
    else:
        shutil.copy2(ROOT / "_toc.yml", dest / "_toc.yml")
    vendor_assets.vendor(dest / VENDOR_DIR)
    if (ROOT / "_ext").is_dir():  # the book's own Sphinx extensions (sphinx.local_extensions in _config.yml)
        shutil.copytree(ROOT / "_ext", dest / "_ext", ignore=shutil.ignore_patterns("__pycache__"))
    # The book's own CSS and script (listed in html_css_files, html_js_files) and its icon
    # (html.favicon) go with the offline assets (html_static_path).
    # Not as _stage/_static: when that folder exists, Jupyter Book adds every .css and .js file of
    # every html_static_path folder to every page (here: the whole MathJax distribution).
    assets = sorted((ROOT / "_static").glob("*.css")) + sorted((ROOT / "_static").glob("*.js"))
    for asset in [*assets, ROOT / "_static" / "favicon.svg"]:
        shutil.copy2(asset, dest / VENDOR_DIR / asset.name)
    for path in sorted(CHAPTERS.iterdir()):
        if path.name.startswith(".") or path.suffix == ".ipynb":
            continue
        if only and path.suffix == ".md" and path.stem not in only:
            continue
        if path.suffix == ".md" and is_notebook(path):
            executed = EXECUTED / f"{path.stem}.ipynb"
            if not executed.exists():
                raise SystemExit(f"chapter {path.stem} has not been executed (run the execute step)")
            stage_notebook(executed, dest / "chapters" / executed.name)
        elif path.is_dir():
            shutil.copytree(path, dest / "chapters" / path.name)
        else:
            shutil.copy2(path, dest / "chapters" / path.name)


def colab_setup_cell(repo: str, branch: str = NOTEBOOKS_BRANCH):
    """A first code cell for the published notebooks: on Colab it clones the repository and installs the
    library (Colab opens a single notebook, without the repository); anywhere else it does nothing."""
    import nbformat

    source = f"""\
# Colab only: fetch the book's repository and install its library (elsewhere this cell does nothing).
import sys

if "google.colab" in sys.modules:
    import os
    import subprocess

    book = "/content/tokendynamics-book"
    if not os.path.isdir(book):
        subprocess.run(["git", "clone", "--depth", "1", "--branch", "{branch}",
                        "https://github.com/{repo}", book], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "-e", book + "[fast,widgets]",
                    "myst-nb>=1.1"], check=True)
    sys.path.insert(0, book + "/lib")  # the editable install is importable only after a restart
    os.chdir(book + "/chapters")
    from google.colab import output

    output.enable_custom_widget_manager()  # ipywidgets explorers
"""
    return nbformat.v4.new_code_cell(source, metadata={"tags": [COLAB_TAG]})


def export_notebooks(repo: str, out: Path) -> list[Path]:
    """Write the executed notebooks to ``out/chapters/<chapter>.ipynb`` with the Colab set-up cell first
    (the Pages workflow commits them to the ``notebooks`` branch)."""
    import nbformat

    repo = check_repo(repo)
    written = []
    (out / "chapters").mkdir(parents=True, exist_ok=True)
    for md in notebook_sources():
        executed = EXECUTED / f"{md.stem}.ipynb"
        if not executed.exists():
            raise SystemExit(f"chapter {md.stem} has not been executed (run the execute step)")
        nb = nbformat.read(executed, as_version=4)
        nb.cells = [c for c in nb.cells if COLAB_TAG not in c.get("metadata", {}).get("tags", [])]
        nb.cells.insert(0, colab_setup_cell(repo))
        target = out / "chapters" / f"{md.stem}.ipynb"
        nbformat.write(nb, target)
        written.append(target)
    return written


def html(repo: str | None = None) -> None:
    stage(repo)
    # Sphinx never deletes files of earlier builds from its output (old images, old _static files):
    # start from an empty _build/html so that the site holds exactly what this build produced.
    shutil.rmtree(BUILD / "html", ignore_errors=True)
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
        p.add_argument(
            "--mode",
            choices=MODES,
            default=os.environ.get("BOOK_MODE", "fast"),
            help="fast (default, CI) or full (the paper-scale setting of every chapter)",
        )
    p_html = sub.add_parser("html", help="strict HTML build of the executed chapters")
    for p in (p_all, p_html):
        p.add_argument(
            "--repo",
            default=os.environ.get("BOOK_REPO") or None,
            help="GitHub owner/name: repository link and Binder/Colab buttons (default $BOOK_REPO)",
        )
    p_nb = sub.add_parser("notebooks", help="executed notebooks with a Colab set-up cell, for the notebooks branch")
    p_nb.add_argument("--repo", required=True, help="GitHub owner/name the notebooks are published in")
    p_nb.add_argument("--out", type=Path, default=ROOT, help="writes OUT/chapters/<chapter>.ipynb (default: here)")
    p_ch = sub.add_parser("chapter", help="re-run one chapter with the reader's parameters")
    p_ch.add_argument("name")
    p_ch.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"))
    p_ch.add_argument("--mode", choices=["fast", "full"])
    args = parser.parse_args(argv)
    if args.command in ("all", "execute"):
        execute(force=args.force, jobs=args.jobs, only=args.only, mode=args.mode)
    if args.command in ("all", "html"):
        html(args.repo)
    if args.command == "notebooks":
        for path in export_notebooks(args.repo, args.out):
            print(f"wrote {path}")
    if args.command == "chapter":
        chapter(args.name, args.parameter, args.mode)


if __name__ == "__main__":
    main()
