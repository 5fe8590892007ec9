#!/usr/bin/env python
"""How long one update of every chapter explorer takes, without a browser.

    make bench     (or: .venv/bin/python benchmarks/bench_explorers.py [--repeat 3] [--only 01 04] [--profile])

An update is what a reader waits for after moving a control: the library call, the drawing (the
explorer's artists updated in place) and the image the page shows (the PNG sent to an
``ipywidgets.Image``; see ``tokendynamics.book.widgets``). The script builds each explorer as its
chapter does: it runs the chapter's explorer cell (``scripts/explorer_cells.py``: the parameters cell
and the one call, e.g. ``variants_explorer(mode)``) in an IPython shell as in a live session, so the
widgets are built; then it moves the controls through a fixed list of settings a reader would try
(every variant or case, slider moves): a one-control move sets the widget's value (its observer runs
the update, as when the front end sends the new value), a move of several controls calls
``explorer.update(**changes)``.

Each pass (``--repeat``) starts from a new explorer, so its cache is empty; the first draw (when the
widgets are built: numba, imports) is the warm-up, reported apart. A move back to a state seen earlier
in the pass is served from the cache; it is counted as such, and the medians are given both over the
moves that computed ("fresh") and over all moves. Printed per explorer: median and worst whole
update in CPU time (the machine is shared: CPU time moves less with the load) and wall time, and the
median CPU split library / draw / image; with ``--profile`` the functions that take the most time.
The numbers also go into ``_build/bench/results.json`` (``{"results": {name: value}}``, merged with
the keys the other benchmarks write). A benchmark prints times; no test asserts them.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import cProfile  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "_build" / "bench" / "results.json"
sys.path.insert(0, str(ROOT / "scripts"))

import explorer_cells as ec  # noqa: E402


def _random_matrices(k: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    moves = []
    for _ in range(k):
        a, v = rng.uniform(-2, 2, (2, 2)).round(2), rng.uniform(-2, 2, (2, 2)).round(2)
        moves.append({f"a{i + 1}{j + 1}": float(a[i, j]) for i in range(2) for j in range(2)})
        moves[-1].update({f"v{i + 1}{j + 1}": float(v[i, j]) for i in range(2) for j in range(2)})
    return moves


# The moves of each explorer, in order, from the state its chapter builds (one dict = one update).
MOVES = {
    "01_well_posedness": [
        *({"variant": v} for v in ("multihead", "l2", "sinkhorn", "sigmoid", "linear", "unnormalized_softmax")),
        {"variant": "masked"},
        {"variant": "softmax"},  # back to the first state: from the cache
        {"beta": 0.5},
        {"beta": 3.0},
        {"a12": 1.0},
        {"v_angle": 1.0},
    ],
    "02_gaussian_preservation": [
        {"kind": "l2"},
        {"kind": "sinkhorn"},
        {"kind": "linear"},
        {"a22": 0.0},
        {"u": 0.5},
        {"w": 0.1},
        {"v11": 0.5},
        {"T": 10.0},
        {"u": 0.3},
        {"kind": "softmax"},
        {"a12": 0.0},
        {"T": 5.0},
    ],
    "03_gradient_flow": [
        *({"a2": a2} for a2 in (-1.2, -0.8, 0.0, 0.4, 0.8)),
        {"a2": -0.4},  # back to the first state: from the cache
        {"theta": 0.8},
        {"v2": 1.5},
        {"a1": 0.5},
    ],
    "04_kuramoto_reduction": [*_random_matrices(9), {"beta": 2.0}],
    "06_high_dimensional": [
        {"case": "case1"},
        {"case": "case2"},
        {"case": "case3"},
        {"case": "random"},
        {"case": "case4"},  # back to the first state: from the cache
        {"case": "case1", "spectrum": "mixed"},
        {"spectrum": "negative"},
        {"case": "case2", "top": -1.0},
        {"top": 3.0},
        {"case": "case4", "a": 1.5},
        {"beta": 2.0},
    ],
    "08_transformer": [
        *({"norm": v} for v in ("pre", "sphere", "none", "post")),  # the last: back to the start, from the cache
        {"L": 48},
        {"L": 6},
        {"strength": 1.0},
        {"activation": "tanh"},
        {"strength": 3.0},
        {"beta": 4.0},
        {"L": 24},
    ],
}


def _shell():
    from IPython.core.interactiveshell import InteractiveShell

    class Shell(InteractiveShell):
        def enable_gui(self, gui=None):  # no event loop to hook: the inline backend needs none
            pass

    shell = Shell.instance()
    shell.run_line_magic("matplotlib", "inline")
    return shell


def build(shell, chapter: str):
    """Run the chapter's explorer cells as a live session does; returns (explorer, seconds to build it)."""
    cells = ec.explorer_cells(ROOT / "chapters" / f"{chapter}.md")
    shell.reset(new_session=False)
    os.chdir(ROOT / "chapters")  # as in JupyterLab and the book build
    os.environ.pop("TOKENDYNAMICS_HEADLESS", None)  # live: the call builds the explorer
    clock = time.perf_counter()
    result = None
    for i in cells.needed:
        with contextlib.redirect_stdout(io.StringIO()):  # the explorer is displayed (its widgets built)
            result = shell.run_cell(cells.sources[i], store_history=False)
        if not result.success:
            raise RuntimeError(f"{chapter}: cell {i} failed: {result.error_in_exec or result.error_before_exec}")
    explorer = result.result
    if explorer is None or not hasattr(explorer, "widget"):
        raise RuntimeError(f"{chapter}: the explorer cell returned {explorer!r}, not an explorer")
    explorer.widget()  # built when it was displayed (widgets and the first draw): the same box
    return explorer, time.perf_counter() - clock


def move(explorer, changes: dict) -> None:
    controls = explorer._ui["controls"]
    if len(changes) == 1 and next(iter(changes)) in controls:
        name, value = next(iter(changes.items()))
        controls[name].value = value  # the widget's observer runs the update
    else:
        explorer.update(**changes)


def measure(shell, chapter: str, repeat: int, profiler=None) -> dict:
    rows, builds = [], []
    for _ in range(repeat):
        explorer, seconds = build(shell, chapter)
        builds.append(seconds)
        for changes in MOVES[chapter]:
            if profiler:
                profiler.enable()
            wall, cpu = time.perf_counter(), time.process_time()
            move(explorer, changes)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            if profiler:
                profiler.disable()
            t = explorer.timings
            if any(explorer.state[k] != v for k, v in changes.items()) or "total" not in t:
                raise RuntimeError(f"{chapter}: the move {changes} did not update the explorer")
            rows.append(
                {
                    "wall": wall,
                    "cpu": cpu,
                    "cached": bool(t.get("cached")),
                    "error": explorer.error is not None,
                    **{k: t[k] for k in ("library", "draw", "image", "cpu_library", "cpu_draw", "cpu_image")},
                }
            )
        explorer.fig.clear()
    return {"rows": rows, "build": statistics.median(builds)}


def summarise(rows: list[dict]) -> dict:
    fresh = [r for r in rows if not r["cached"]] or rows
    med = lambda key, rs: 1e3 * statistics.median(r[key] for r in rs)  # noqa: E731
    return {
        "median_cpu_ms": med("cpu", fresh),
        "worst_cpu_ms": 1e3 * max(r["cpu"] for r in fresh),
        "median_wall_ms": med("wall", fresh),
        "worst_wall_ms": 1e3 * max(r["wall"] for r in fresh),
        "median_cpu_all_moves_ms": med("cpu", rows),
        "median_wall_all_moves_ms": med("wall", rows),
        "library_cpu_ms": med("cpu_library", fresh),
        "draw_cpu_ms": med("cpu_draw", fresh),
        "image_cpu_ms": med("cpu_image", fresh),
        "library_wall_ms": med("library", fresh),
        "draw_wall_ms": med("draw", fresh),
        "image_wall_ms": med("image", fresh),
        "moves": len(rows),
        "cached_moves": sum(r["cached"] for r in rows),
        "error_moves": sum(r["error"] for r in rows),
    }


def record(results: dict, path: Path = RESULTS) -> None:
    """Merge ``results`` (name -> number) into ``path`` (``{"results": {...}, "machine": {...}}``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(path.read_text()) if path.exists() else {}
    data.setdefault("results", {}).update({k: float(v) for k, v in results.items()})
    data.setdefault("machine", {}).update(
        {
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
            "load_average_1min": round(os.getloadavg()[0], 2),
        }
    )
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="passes over each explorer's moves (a new explorer each)")
    parser.add_argument("--only", nargs="*", help="chapter prefixes, e.g. 01 04")
    parser.add_argument("--profile", action="store_true", help="print the top functions (cProfile) per explorer")
    parser.add_argument("--sort", default="cumulative", help="cProfile order with --profile (cumulative, tottime)")
    parser.add_argument("--json", type=Path, help="also write every update's numbers here")
    parser.add_argument("--no-record", action="store_true", help=f"do not write {RESULTS.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    found = [p.stem for p in ec.explorer_chapters()]
    missing = sorted(set(found) - set(MOVES))
    if missing:
        print(f"warning: explorers without moves here (not benchmarked): {missing}")
    chapters = [c for c in MOVES if c in found and (not args.only or any(c.startswith(o) for o in args.only))]
    print(
        f"explorer updates (library call + drawing in place + PNG for the page), Python {platform.python_version()}, "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; {args.repeat} passes, each from a new explorer"
    )
    print(f"{'':<26}{'':>9}{'CPU time, ms':>17}{'wall time, ms':>17}   {'median CPU split, ms':<26}{'build':>8}")
    print(
        f"{'explorer':<26}{'moves':>9}{'median':>9}{'worst':>8}{'median':>9}{'worst':>8}   "
        f"{'library / draw / image':<26}{'s':>8}"
    )
    shell = _shell()
    results, details = {}, {}
    for chapter in chapters:
        profiler = cProfile.Profile() if args.profile else None
        out = measure(shell, chapter, args.repeat, profiler)
        s = summarise(out["rows"])
        details[chapter] = {"summary": s, "rows": out["rows"], "build_s": out["build"]}
        split = f"{s['library_cpu_ms']:.0f} / {s['draw_cpu_ms']:.0f} / {s['image_cpu_ms']:.0f}"
        moves = f"{s['moves'] - s['cached_moves']}+{s['cached_moves']}c"
        print(
            f"{chapter:<26}{moves:>9}{s['median_cpu_ms']:>9.0f}{s['worst_cpu_ms']:>8.0f}"
            f"{s['median_wall_ms']:>9.0f}{s['worst_wall_ms']:>8.0f}   {split:<26}{out['build']:>8.1f}",
            flush=True,
        )
        if profiler:
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats(args.sort).print_stats(18)
            print(text.getvalue())
        for key in ("median_cpu_ms", "worst_cpu_ms", "median_wall_ms", "worst_wall_ms", "median_cpu_all_moves_ms"):
            results[f"explorers.{chapter}.{key}"] = s[key]
        for part in ("library", "draw", "image"):
            results[f"explorers.{chapter}.{part}_cpu_ms"] = s[f"{part}_cpu_ms"]
            results[f"explorers.{chapter}.{part}_wall_ms"] = s[f"{part}_wall_ms"]
    print(
        "moves: computed + from the cache (c); medians and worst over the computed moves; "
        "the build (first draw included) is not counted"
    )
    if not args.no_record:
        record(results)
        print(f"written to {RESULTS.relative_to(ROOT)}")
    if args.json:
        args.json.write_text(json.dumps(details, indent=2))


if __name__ == "__main__":
    main()
