"""Chapter parameters are checked before a chapter runs, and a failed run never destroys the last good one.

The schema of each chapter comes from its own ``parameters`` cell (names, defaults, comments) and
the ranges of ``tokendynamics.book.experiments.PARAMETER_RULES``; a new chapter (e.g. a sixth,
``07_phase_diagrams.md``) is covered as soon as it exists.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tokendynamics.book.experiments import MODES, PARAMETER_RULES, check_parameters, parameter_schema, parameters_cell

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(
    p
    for p in (ROOT / "chapters").glob("*.md")
    if p.read_text()[:2000].startswith("---") and "kernelspec:" in p.read_text()[:2000]
)


def _load_build_script():
    spec = importlib.util.spec_from_file_location("build_book", ROOT / "scripts" / "build_book.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _schema(md: Path):
    return parameter_schema(parameters_cell(md.read_text(encoding="utf-8")) or "")


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_has_a_derivable_schema_read_like_jupytext_reads_it(md):
    jupytext = pytest.importorskip("jupytext")
    cells = [c.source for c in jupytext.read(md).cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"{md.stem}: one cell tagged parameters"
    assert parameters_cell(md.read_text(encoding="utf-8")) == cells[0]
    schema = _schema(md)  # raises if a default breaks its rule or a None default has no type
    assert schema["mode"].default == "fast" and schema["mode"].rule["choices"] == MODES
    for p in schema.values():
        assert p.comment, f"{md.stem}: parameter {p.name} has no comment describing it"
        assert p.check(p.default) == p.default
        with pytest.raises(ValueError, match=f"parameter {p.name} must be"):
            p.check(object())
    with pytest.raises(ValueError, match="unknown parameter 'foo'"):
        check_parameters(schema, {"foo": 1}, md.stem)


@pytest.mark.parametrize(
    "given, message",
    [
        ({"foo": 1}, r"unknown parameter 'foo' of chapter index; its parameters are: mode, n, beta, T, seed"),
        ({"n": -5}, r"parameter n must be an integer >= 1 and <= 20000 or None, got -5"),
        ({"n": 2.5}, r"parameter n must be an integer >= 1 and <= 20000 or None, got 2.5"),
        ({"n": True}, r"parameter n must be an integer"),
        ({"seed": "abc"}, r"parameter seed must be an integer >= 0 and <= 4294967295 or None, got 'abc'"),
        ({"seed": -1}, r"parameter seed must be an integer >= 0"),
        ({"beta": 0}, r"parameter beta must be a number > 0 and <= 1000 or None, got 0"),
        ({"T": float("inf")}, r"parameter T must be a number > 0"),
        ({"mode": "medium"}, r"parameter mode must be one of 'fast', 'full', got 'medium'"),
        ({"mode": None}, r"parameter mode must be one of"),
        ({"n": 10**12}, r"parameter n must be an integer >= 1 and <= 20000 or None, got 1000000000000"),
        ({"T": 1e6}, r"parameter T must be a number > 0 and <= 1000 or None, got 1000000.0"),
        ({"beta": 10**400}, r"parameter beta must be a number > 0 and <= 1000"),  # too large for a float
        ({"seed": 2**40}, r"parameter seed must be an integer >= 0 and <= 4294967295"),
        ({"beta": np.nan}, r"parameter beta must be a number"),
    ],
)
def test_wrong_parameters_of_the_intro_are_one_line_errors_naming_them(given, message):
    with pytest.raises(ValueError, match=message) as info:
        check_parameters(_schema(ROOT / "chapters" / "index.md"), given, "index")
    assert "\n" not in str(info.value)


def test_good_parameters_pass_and_numbers_become_floats_where_floats_are_expected():
    schema = _schema(ROOT / "chapters" / "index.md")
    assert check_parameters(schema, {"n": 64, "beta": 2, "T": 5, "seed": None, "mode": "full"}) == {
        "n": 64,
        "beta": 2.0,
        "T": 5.0,
        "seed": None,
        "mode": "full",
    }
    kuramoto = _schema(ROOT / "chapters" / "04_kuramoto_reduction.md")
    assert check_parameters(kuramoto, {"seed": 3}) == {"seed": 3}
    # its default is 0, not None
    with pytest.raises(ValueError, match="seed must be an integer >= 0 and <= 4294967295, got None"):
        check_parameters(kuramoto, {"seed": None})


def test_a_new_chapter_with_new_parameters_is_covered_without_touching_the_build(tmp_path):
    md = tmp_path / "07_phase_diagrams.md"
    md.write_text(
        "---\njupytext:\n  text_representation:\n    format_name: myst\nkernelspec:\n  name: python3\n---\n\n"
        "# Phase diagrams\n\n```{code-cell} ipython3\n---\ntags: [parameters]\n---\n"
        'mode = "fast"       # "fast" or "full"\n'
        "grid = 21           # points per axis of the diagram\n"
        "tol = 1e-3          # classification tolerance\n"
        "n_jobs = 1          # joblib workers\n"
        "label = 'beta'      # the swept parameter\n"
        "show = True         # draw the diagram\n"
        "```\n\n```{code-cell} ipython3\nprint(grid)\n```\n"
    )
    schema = _schema(md)
    assert [p.type for p in schema.values()] == [str, int, float, int, str, bool]
    assert check_parameters(schema, {"grid": 41, "tol": 1, "show": False}) == {"grid": 41, "tol": 1.0, "show": False}
    for given, message in [
        ({"grid": 2.5}, "parameter grid must be an integer, got 2.5 (points per axis of the diagram)"),
        ({"tol": "x"}, "parameter tol must be a number"),
        ({"show": 1}, "parameter show must be True or False"),
        ({"label": 3}, "parameter label must be a string"),
        ({"seed": 3}, "unknown parameter 'seed' of chapter 07_phase_diagrams; its parameters are: mode, grid, tol"),
    ]:
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            check_parameters(schema, given, "07_phase_diagrams")
    # a parameter defaulting to None needs a type in PARAMETER_RULES, and the error says so
    with pytest.raises(ValueError, match="PARAMETER_RULES"):
        parameter_schema("mode = 'fast'  # setting\nresolution = None  # cells per axis")
    # a default outside its own rule is a mistake of the chapter
    with pytest.raises(ValueError, match="default of parameter n"):
        parameter_schema("n = 0  # tokens")
    assert "n" in PARAMETER_RULES and "seed" in PARAMETER_RULES


@pytest.mark.parametrize(
    "args, words",
    [
        (["-p", "foo", "1"], "unknown parameter 'foo'"),
        (["-p", "n", "-5"], "parameter n must be an integer >= 1 and <= 20000 or None, got -5"),
        (["-p", "n", "2.5"], "parameter n must be an integer >= 1 and <= 20000 or None, got 2.5"),
        (["-p", "seed", "abc"], "parameter seed must be an integer >= 0 and <= 4294967295 or None, got 'abc'"),
    ],
)
def test_make_chapter_stops_before_executing_with_one_line_naming_the_parameter(args, words):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_book.py"), "chapter", "index", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], proc.stderr
    assert "running index" not in proc.stdout


# ---------------------------------------------------------------------------------------------
# a failed run keeps the last good output
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def build(tmp_path, monkeypatch):
    bb = _load_build_script()
    for name, sub in (
        ("BUILD", ""),
        ("RUNS", "run"),
        ("FAILED", "failed"),
        ("EXECUTED", "executed"),
        ("FIGURES", "figures"),
    ):
        monkeypatch.setattr(bb, name, tmp_path / "_build" / sub)
    return bb


def _fake_run(fail=False, text="good"):
    def run(md, out, parameters, figdir, cwd, timeout):
        figdir.mkdir(parents=True, exist_ok=True)
        (figdir / "figure.png").write_text(text)
        out.write_text(text)
        if fail:
            raise RuntimeError("a cell failed\nZeroDivisionError: division by zero")
        return 1.0

    return run


def test_a_failed_make_chapter_keeps_the_previous_run_and_its_figures(build):
    build.chapter("index", [["n", "8"]], None, run=_fake_run(text="first"))
    target = build.RUNS / "index"
    assert (target / "index.ipynb").read_text() == "first" and (
        target / "figures" / "figure.png"
    ).read_text() == "first"
    with pytest.raises(SystemExit, match="chapter index FAILED: RuntimeError: ZeroDivisionError") as info:
        build.chapter("index", [], None, run=_fake_run(fail=True, text="broken"))
    assert "untouched" in str(info.value)
    assert (target / "index.ipynb").read_text() == "first" and (
        target / "figures" / "figure.png"
    ).read_text() == "first"
    assert (build.FAILED / "index" / "index.ipynb").read_text() == "broken"  # kept for inspection
    build.chapter("index", [], None, run=_fake_run(text="second"))
    assert (target / "index.ipynb").read_text() == "second" and (
        target / "figures" / "figure.png"
    ).read_text() == "second"
    assert sorted(p.name for p in target.iterdir()) == ["figures", "index.ipynb"]  # no temporary folder left


def test_a_failed_book_execution_keeps_the_executed_notebook_and_figures(build):
    md = ROOT / "chapters" / "index.md"
    notebook, figures = build.EXECUTED / "index.ipynb", build.FIGURES / "index"
    build.run_atomically(md, {}, notebook, figures, timeout=10, run=_fake_run(text="good"))
    with pytest.raises(RuntimeError):
        build.run_atomically(md, {}, notebook, figures, timeout=10, run=_fake_run(fail=True, text="bad"))
    assert notebook.read_text() == "good" and (figures / "figure.png").read_text() == "good"
    assert sorted(p.name for p in build.EXECUTED.iterdir()) == ["index.ipynb"]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid  # finished and reaped: no process has it (until the system reuses it)


def test_make_chapter_removes_the_temporary_folders_a_killed_run_left_and_keeps_a_live_runs(build):
    """A run killed with SIGKILL cannot clean up: the next run of that chapter removes its temporary
    folders (the execution's and the swap's), but not those of a run still going (this process)."""
    target = build.RUNS / "index"
    build.chapter("index", [], None, run=_fake_run(text="first"))
    dead = _dead_pid()
    stale = [target / f".index.{dead}.abc.tmp", target / f".figures.old-{dead}", build.FAILED / f".index.old-{dead}"]
    live = target / f".index.{os.getpid()}.xyz.tmp"
    for folder in (*stale, live):
        (folder / "figures").mkdir(parents=True)
    build.chapter("index", [], None, run=_fake_run(text="second"))
    assert not any(p.exists() for p in stale) and live.is_dir()
    assert (target / "index.ipynb").read_text() == "second"


def test_the_build_starts_the_longest_chapters_first_and_every_chapter_has_a_budget():
    """Two chapters run at once: the longest first (last measured time of that setting, else the
    budget), so that no worker idles behind a long chapter at the end; every chapter has a fast and
    a full budget, and the full ones add up to less than 9 minutes on two workers."""
    build = _load_build_script()
    assert {md.stem for md in CHAPTERS} <= set(build.BUDGETS)
    assert sum(full for _, full in build.BUDGETS.values()) / 2 <= 9 * 60
    stems = ["index", "06_high_dimensional", "03_gradient_flow", "claims"]
    assert build.longest_first(stems, {}, "fast")[0] == "06_high_dimensional"  # by budget
    measured = {"index": 500.0, "03_gradient_flow:full": 900.0}
    assert build.longest_first(stems, measured, "fast")[0] == "index"  # by the fast time
    assert build.longest_first(stems, measured, "full")[0] == "03_gradient_flow"  # by the full time
    assert build.timing_key("index", "full") == "index:full" and build.timing_key("index", "fast") == "index"


def test_the_transformer_chapter_takes_beta_and_a_number_of_clouds_checked_before_it_runs():
    schema = _schema(ROOT / "chapters" / "08_transformer.md")
    assert check_parameters(schema, {"beta": 4, "clouds": 16}) == {"beta": 4.0, "clouds": 16}
    for given, message in (
        ({"clouds": 0}, "clouds must be an integer >= 1"),
        ({"beta": -1.0}, "beta must be a number > 0"),
    ):
        with pytest.raises(ValueError, match=message):
            check_parameters(schema, given, "08_transformer")


def test_numpy_numbers_are_numbers_for_the_chapter_parameters():
    """A numpy float or integer is accepted (as the Python number it equals), not refused as "not a number"."""
    checked = check_parameters(_schema(ROOT / "chapters" / "index.md"), {"beta": np.float32(2.0), "n": np.int64(8)})
    assert checked == {"beta": 2.0, "n": 8} and type(checked["beta"]) is float and type(checked["n"]) is int
