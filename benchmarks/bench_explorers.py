#!/usr/bin/env python
"""How long one update of every chapter explorer takes, without a browser.

    make bench     (or: .venv/bin/python benchmarks/bench_explorers.py [--repeat 3] [--only 01 04] [--profile])

An explorer update is what a reader waits for after moving a control: the library call, the
drawing, and the PNG that Jupyter's inline backend renders and sends to the page. This script
measures exactly that, in an IPython shell with the inline backend (as in a kernel), by running
the chapter's own code:

1. the cells the explorer needs (``scripts/explorer_cells.py``; with ``TOKENDYNAMICS_HEADLESS=1``,
   so that the cells define the update functions without building widgets);
2. the update, called as the widgets call it: chapters 01, 03, 04 and 05 with the keyword arguments
   of their controls (``update(...)``); chapter 02 through the widgets that
   ``tokendynamics.gaussian_plots.cone_explorer`` builds (setting a control's value runs the update);
3. ``plt.show()`` inside the update renders the PNG through the inline backend (``print_figure``
   with ``bbox_inches="tight"``, as in Jupyter).

Every update is split into the *library call* (timed by wrapping the function the update calls:
``Variant.run``; ``gaussian_plots.explorer_trajectories``; ``curves_for``; ``regimes.explore``;
``highdim.explore``), the *PNG* (``FigureCanvasBase.print_figure``: the tight bounding box and
the Agg rendering and encoding) and the *drawing* (the rest: figure, axes and artists). The first
update of each explorer (warm-up: numba, caches) is reported apart and not counted.

Each explorer runs a fixed list of control settings that a reader would try (every variant or case,
slider moves), ``--repeat`` times; printed: median and worst whole-update times with the median
split, and with ``--profile`` the functions that take the most time (cProfile, cumulative).
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import explorer_cells as ec  # noqa: E402


class Clock:
    """Accumulates the time spent inside wrapped functions, per category: wall time and CPU time.

    CPU time (``time.process_time``; BLAS runs on one thread) hardly moves when other processes load
    the machine; wall time is what the reader waits for. Both are reported.
    """

    def __init__(self):
        self.reset()
        self.depth = {"library": 0, "png": 0}

    def wrap(self, category: str, fn):
        clock = self

        def timed(*args, **kwargs):
            clock.depth[category] += 1
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                clock.depth[category] -= 1
                if clock.depth[category] == 0:  # nested calls count once
                    clock.wall[category] += time.perf_counter() - wall
                    clock.cpu[category] += time.process_time() - cpu

        timed.__wrapped__ = fn
        return timed

    def reset(self):
        self.wall = {"library": 0.0, "png": 0.0}
        self.cpu = {"library": 0.0, "png": 0.0}


def _shell_class():
    global _SHELL
    if _SHELL is None:
        from IPython.core.interactiveshell import InteractiveShell

        class Shell(InteractiveShell):
            def enable_gui(self, gui=None):  # no event loop to hook: the inline backend needs none
                pass

        _SHELL = Shell
    return _SHELL


_SHELL = None


def make_shell(print_figure_kwargs: dict | None = None):
    """An IPython shell with the inline backend, like a kernel (its display output is discarded).

    ``print_figure_kwargs`` replaces the inline backend's (``{"bbox_inches": "tight"}``), as
    ``%config InlineBackend.print_figure_kwargs = {...}`` would in a notebook.
    """
    shell = _shell_class().instance()
    shell.reset(new_session=False)  # each explorer starts from an empty namespace
    shell.run_line_magic("matplotlib", "inline")
    if print_figure_kwargs is not None:
        shell.run_line_magic("config", f"InlineBackend.print_figure_kwargs = {print_figure_kwargs!r}")
        shell.run_line_magic("matplotlib", "inline")  # re-applies the formatters with the new kwargs
    return shell


def run_cells(shell, chapter: str) -> None:
    cells = ec.explorer_cells(ROOT / "chapters" / f"{chapter}.md")
    os.chdir(ROOT / "chapters")  # as in JupyterLab and the book build
    os.environ["TOKENDYNAMICS_HEADLESS"] = "1"
    try:
        for i in cells.needed:
            with contextlib.redirect_stdout(io.StringIO()):  # the cells' own prints and figures
                result = shell.run_cell(cells.sources[i], silent=True)
            if not result.success:
                raise RuntimeError(f"{chapter}: cell {i} failed: {result.error_in_exec or result.error_before_exec}")
    finally:
        os.environ.pop("TOKENDYNAMICS_HEADLESS", None)


# ---------------------------------------------------------------------------------------------------
# One entry per explorer: set up (run its cells, wrap its library call), then the updates to time.


def explorer_01(shell, clock):
    import matplotlib.pyplot as plt
    import numpy as np

    from tokendynamics import variants

    run_cells(shell, "01_well_posedness")
    variants.Variant.run = clock.wrap("library", variants.Variant.run)
    ns = shell.user_ns
    base = dict(ns["start_values"])
    settings = [{**base, "variant": name} for name in ns["VARIANT_NAMES"]]
    settings += [{**base, "beta": b} for b in (0.5, 3.0)] + [{**base, "a12": 1.0}, {**base, "v_angle": 1.0}]
    moves = [lambda s=s: ns["update"](**s) for s in settings]
    persistent = {}

    def reuse(k):  # the same update drawn on one persistent figure (axes cleared, no new figure)
        s = settings[k]
        if not persistent:
            persistent["fig"], persistent["ax"] = plt.subplots(figsize=(4, 4), dpi=80)
        fig, ax = persistent["fig"], persistent["ax"]
        ax.clear()
        A_w = np.array([[s["a11"], s["a12"]], [s["a21"], s["a22"]]])
        var = ns["paper1_variants"](
            A_w, s["v_scale"] * ns["rotation"](s["v_angle"]), beta=s["beta"], names=[s["variant"]]
        )[s["variant"]]
        try:
            traj, system = var.run(ns["Xw"], ns["pw"]["T"], dt=ns["pw"]["dt"])
            ns["plot_token_paths"](ax, system.tokens(traj.X), title=s["variant"], ticks=False)
        except ns["TokenDynamicsError"] as err:
            ax.text(0.5, 0.5, str(err)[:120], ha="center", va="center", wrap=True, fontsize="small")
        return fig

    def inplace(k):  # the artists of one figure updated in place (segments, offsets, limits, title)
        s = settings[k]
        A_w = np.array([[s["a11"], s["a12"]], [s["a21"], s["a22"]]])
        var = ns["paper1_variants"](
            A_w, s["v_scale"] * ns["rotation"](s["v_angle"]), beta=s["beta"], names=[s["variant"]]
        )[s["variant"]]
        try:
            traj, system = var.run(ns["Xw"], ns["pw"]["T"], dt=ns["pw"]["dt"])
        except ns["TokenDynamicsError"]:
            traj = None
        if traj is None:  # as the chapter: a message instead of the tokens (title only here)
            if "inplace" in persistent:
                persistent["inplace"][1].set_title("no convergence", fontsize="small")
                return persistent["inplace"][0]
            raise RuntimeError("the explorer's first state must run")
        X = system.tokens(traj.X)
        if "inplace" not in persistent:
            fig, ax = plt.subplots(figsize=(4, 4), dpi=80)
            ns["plot_token_paths"](ax, X, title=s["variant"], ticks=False)
            persistent["inplace"] = (fig, ax)
            return fig
        fig, ax = persistent["inplace"]
        lines, start, end = ax.collections[0], ax.collections[1], ax.collections[2]
        lines.set_segments(np.transpose(X, (1, 0, 2)))
        start.set_offsets(X[0])
        end.set_offsets(X[-1])
        lo, hi = np.minimum(X[0].min(0), X[-1].min(0)), np.maximum(X[0].max(0), X[-1].max(0))
        pad = 0.05 * max(hi - lo)
        ax.set_xlim(lo[0] - pad, hi[0] + pad)
        ax.set_ylim(lo[1] - pad, hi[1] + pad)
        ax.set_title(s["variant"], fontsize="small")
        return fig

    return moves, reuse, inplace


def explorer_02(shell, clock):
    import matplotlib.pyplot as plt
    import numpy as np

    from tokendynamics import gaussian_plots as gp

    run_cells(shell, "02_gaussian_preservation")  # defines nothing the update needs; as in JupyterLab
    gp.explorer_trajectories = clock.wrap("library", gp.explorer_trajectories)
    with contextlib.redirect_stdout(io.StringIO()):
        box = gp.cone_explorer()  # builds the widgets (and draws once)
    (kind, T), a, v, (u, w) = (
        box.children[0].children,
        box.children[1].children,
        box.children[2].children,
        box.children[3].children,
    )
    state = {"kind": "softmax", "a": [-1.0, 0.3, -0.3, 0.4], "v": [1.0, 0.0, 0.0, 1.0], "u": 0.3, "w": -0.2, "T": 5.0}
    steps = [("kind", None, k) for k in ("l2", "sinkhorn", "linear", "softmax")]
    steps += [
        ("a", 3, 0.0),
        ("a", 3, 0.4),
        ("u", None, 0.5),
        ("u", None, 0.3),
        ("v", 0, 0.5),
        ("v", 0, 1.0),
        ("T", None, 10.0),
        ("T", None, 5.0),
    ]
    widgets = {"kind": kind, "a": a, "v": v, "u": u, "w": w, "T": T}
    states = []
    for name, index, value in steps:  # the explorer's state after each move
        if index is None:
            state[name] = value
        else:
            state[name] = [*state[name][:index], value, *state[name][index + 1 :]]
        states.append({k: (list(x) if isinstance(x, list) else x) for k, x in state.items()})

    def setter(name, index, value):
        def move():
            target = widgets[name] if index is None else widgets[name][index]
            target.value = value  # the widget's observer runs the update

        return move

    moves = [setter(*step) for step in steps]
    persistent = {}

    def reuse(k):
        s = states[k]
        if not persistent:
            fig = plt.figure(figsize=(8, 3.6))
            persistent.update(fig=fig, ax3=fig.add_subplot(1, 2, 1, projection="3d"), ax2=fig.add_subplot(1, 2, 2))
        fig, ax3, ax2 = persistent["fig"], persistent["ax3"], persistent["ax2"]
        ax3.cla()
        ax2.cla()
        A, V = np.array(s["a"]).reshape(2, 2), np.array(s["v"]).reshape(2, 2)
        traj, covs = gp.explorer_trajectories(s["kind"], A, V, s["u"], s["w"], T=s["T"])
        grey = [(0.6, 0.6, 0.6, 1.0)] * len(covs)
        if covs:
            gp.plot_cone_trajectories(ax3, covs, colors=grey, alpha=0.3, lw=0.6)
            gp.plot_disc_trajectories(ax2, covs, colors=grey, alpha=0.3, lw=0.6)
        gp.plot_cone_trajectories(ax3, [traj.cov], colors=["C3"], lw=2, alpha=1)
        gp.plot_disc_trajectories(ax2, [traj.cov], colors=["C3"], lw=2, alpha=1)
        return fig

    return moves, reuse, None


def explorer_03(shell, clock):
    import matplotlib.pyplot as plt

    run_cells(shell, "03_gradient_flow")
    ns = shell.user_ns
    ns["curves_for"] = clock.wrap("library", ns["curves_for"])
    settings = [{"a2": a2} for a2 in (-1.2, -0.8, -0.4, 0.0, 0.4, 0.8)] + [{"theta": 0.8}, {"v2": 1.5}, {"a1": 0.5}]
    moves = [lambda s=s: ns["update"](**s) for s in settings]
    persistent = {}

    def reuse(k):
        s = {"a1": -1.0, "a2": -0.4, "theta": 0.0, "v1": 1.0, "v2": 0.4, **settings[k]}
        if not persistent:
            persistent["fig"], persistent["ax"] = plt.subplots(1, 2, figsize=(9, 3.4))
            first = True
        else:
            first = False
        ns["draw_curves"](persistent["ax"], ns["curves_for"](**s))  # draw_curves clears its axes
        if first:
            persistent["fig"].tight_layout()  # once: the margins then stay
        return persistent["fig"]

    return moves, reuse, None


def explorer_04(shell, clock):
    import numpy as np

    run_cells(shell, "04_kuramoto_reduction")
    ns = shell.user_ns
    ns["explore"] = clock.wrap("library", ns["explore"])
    rng = np.random.default_rng(0)
    defaults = dict(a11=1.0, a12=0.0, a21=0.0, a22=1.0, v11=0.8, v12=1.0, v21=-1.0, v22=-0.2)
    settings = [dict(defaults)]  # the default state, then random matrices (as the chapter's timing cell)
    for _ in range(9):
        a, v = rng.uniform(-2, 2, (2, 2)), rng.uniform(-2, 2, (2, 2))
        settings.append(
            dict(a11=a[0, 0], a12=a[0, 1], a21=a[1, 0], a22=a[1, 1], v11=v[0, 0], v12=v[0, 1], v21=v[1, 0], v22=v[1, 1])
        )
    moves = [lambda s=s: ns["update"](**s) for s in settings]
    persistent = {}

    def reuse(k):
        s = settings[k]
        if not persistent:
            persistent["fig"], persistent["axes"] = ns["explorer_figure"]()
        A = np.array([[s["a11"], s["a12"]], [s["a21"], s["a22"]]])
        V = np.array([[s["v11"], s["v12"]], [s["v21"], s["v22"]]])
        p = ns["p"]
        portrait, phases = ns["explore"](
            A, V, 1.0, ns["theta0_explore"], z0=ns["z0_explore"], T=p["T"], n_grid=p["n_grid"]
        )
        ns["draw_explorer"](persistent["axes"], portrait, phases)  # clears its axes
        return persistent["fig"]

    return moves, reuse, None


def explorer_05(shell, clock):
    import matplotlib.pyplot as plt

    from tokendynamics import highdim

    run_cells(shell, "05_high_dimensional")
    highdim.explore = clock.wrap("library", highdim.explore)
    ns = shell.user_ns
    settings = [{"case": c} for c in highdim.CASES]
    settings += [{"case": "case1", "spectrum": s} for s in ("mixed", "negative")]
    settings += [{"case": "case2", "top": t} for t in (-1.0, 3.0)] + [{"case": "case4", "a": 1.5}, {"beta": 2.0}]
    moves = [lambda s=s: ns["update"](**s) for s in settings]
    persistent = {}

    def reuse(k):
        s = {"case": "case4", "spectrum": "positive", "top": 2.0, "a": 0.5, "b": 1.0, "beta": 1.0, **settings[k]}
        pw = ns["pw"]
        if not persistent:
            fig, axes = plt.subplots(1, 2, figsize=(8, 3.0), dpi=80)
            fig.subplots_adjust(left=0.09, right=0.98, bottom=0.17, top=0.86, wspace=0.3)
            persistent.update(fig=fig, axes=axes)
        fig, axes = persistent["fig"], persistent["axes"]
        result = highdim.explore(
            s["case"],
            spectrum=s["spectrum"],
            top=s["top"],
            a=s["a"],
            b=s["b"],
            beta=s["beta"],
            d=pw["d"],
            n=pw["n"],
            T=pw["T"],
            seed=pw["seed"],
        )
        for ax in axes:
            ax.clear()
        highdim.plot_runs(axes, result, d=pw["d"])
        fig.suptitle(
            f"{result['case'].label}: 2D prediction {result['prediction'].regime.replace('_', ' ')}", fontsize="small"
        )
        return fig

    def inplace(k):  # the four run lines updated in place (set_data), fixed axes, new title text
        s = {"case": "case4", "spectrum": "positive", "top": 2.0, "a": 0.5, "b": 1.0, "beta": 1.0, **settings[k]}
        pw = ns["pw"]
        result = highdim.explore(
            s["case"],
            spectrum=s["spectrum"],
            top=s["top"],
            a=s["a"],
            b=s["b"],
            beta=s["beta"],
            d=pw["d"],
            n=pw["n"],
            T=pw["T"],
            seed=pw["seed"],
        )
        title = f"{result['case'].label}: 2D prediction {result['prediction'].regime.replace('_', ' ')}"
        if "inplace" not in persistent:
            fig, axes = plt.subplots(1, 2, figsize=(8, 3.0), dpi=80)
            fig.subplots_adjust(left=0.09, right=0.98, bottom=0.17, top=0.86, wspace=0.3)
            highdim.plot_runs(axes, result, d=pw["d"])
            persistent["inplace"] = (fig, axes, fig.suptitle(title, fontsize="small"))
            return fig
        fig, (ax2, ax1), sup = persistent["inplace"]
        for kind, line2, line1 in zip(("linear", "unnormalized_softmax"), ax2.get_lines(), ax1.get_lines()):
            line2.set_data(result[kind].t, result[kind].R2)
            line1.set_data(result[kind].t, result[kind].R1)
        sup.set_text(title)
        return fig

    return moves, reuse, inplace


# Explorers whose moves are widget changes: a move repeated at once changes nothing, so the moves run
# in order, and the widget's own first draw (when it is built) is the warm-up.
STATEFUL = {"02_gaussian_preservation"}

EXPLORERS = {
    "01_well_posedness": ("variants (update, Variant.run)", explorer_01),
    "02_gaussian_preservation": ("cone explorer (gaussian_plots.cone_explorer)", explorer_02),
    "03_gradient_flow": ("energy curves (update, curves_for)", explorer_03),
    "04_kuramoto_reduction": ("OA portrait (update, regimes.explore)", explorer_04),
    "05_high_dimensional": ("d = 16 runs (update, highdim.explore)", explorer_05),
}


def measure(
    chapter: str,
    repeat: int,
    profile: bool,
    args_sort: str = "cumulative",
    print_figure_kwargs: dict | None = None,
    mathtext: bool = True,
):
    import matplotlib as mpl
    import matplotlib.backend_bases as bb
    import matplotlib.pyplot as plt

    shell = make_shell(print_figure_kwargs)
    mpl.rcParams["text.parse_math"] = mathtext
    clock = Clock()
    original = bb.FigureCanvasBase.print_figure
    bb.FigureCanvasBase.print_figure = clock.wrap("png", original)
    try:
        setup = time.perf_counter()
        moves, _reuse, _inplace = EXPLORERS[chapter][1](shell, clock)
        setup = time.perf_counter() - setup
        rows = []
        profiler = cProfile.Profile() if profile else None
        with contextlib.redirect_stdout(io.StringIO()):
            first = time.perf_counter()
            if chapter not in STATEFUL:
                moves[0]()
            first = time.perf_counter() - first if chapter not in STATEFUL else float("nan")
            for _ in range(repeat):
                for move in moves:
                    clock.reset()
                    if profiler:
                        profiler.enable()
                    wall, cpu = time.perf_counter(), time.process_time()
                    move()
                    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                    if profiler:
                        profiler.disable()
                    rows.append(
                        {
                            "total": wall,
                            "library": clock.wall["library"],
                            "png": clock.wall["png"],
                            "draw": wall - clock.wall["library"] - clock.wall["png"],
                            "cpu": cpu,
                            "cpu_library": clock.cpu["library"],
                            "cpu_png": clock.cpu["png"],
                            "cpu_draw": cpu - clock.cpu["library"] - clock.cpu["png"],
                        }
                    )
        plt.close("all")
    finally:
        bb.FigureCanvasBase.print_figure = original
    stats = None
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(args_sort).print_stats(18)
        stats = out.getvalue()
    return {"setup": setup, "first": first, "rows": rows, "profile": stats}


def _timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def experiments(chapter: str, repeat: int) -> dict:
    """Paired experiments on every update of one explorer (same move, same load, one after the other):

    * ``now``: the update as it is (library + drawing), then the inline PNG (tight bounding box);
    * the PNG of the same figure without the tight bounding box, with zlib level 1 instead of
      Pillow's default 6 (``pil_kwargs={"compress_level": 1}``), at 80 dpi, and a bare Agg redraw;
    * ``no mathtext``: the same update with ``text.parse_math = False`` (chapter 02: not run, its
      moves are widget changes that cannot be repeated);
    * ``reuse``: the same state drawn on one persistent figure (axes cleared and redrawn, margins
      fixed once), PNG without the tight bounding box: about what ipympl or a display handle would
      cost per update, before any artist is updated in place;
    * ``in place`` (chapters 01 and 05): the persistent figure's artists updated in place
      (``set_data``, ``set_segments``, ``set_offsets``; fixed limits), PNG without the tight box.
    """
    import matplotlib as mpl
    import matplotlib.pyplot as plt
    from IPython.core.pylabtools import print_figure
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    shell = make_shell()
    clock = Clock()
    moves, reuse, inplace = EXPLORERS[chapter][1](shell, clock)
    shown = []
    original_show = plt.show
    plt.show = lambda *a, **k: shown.extend(plt.figure(n) for n in plt.get_fignums())
    rows = []
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            if chapter not in STATEFUL:
                moves[0]()  # warm-up
            reuse(0)
            if inplace:
                inplace(0)
            plt.close("all")
            for _ in range(repeat):
                for k, move in enumerate(moves):
                    row = {}
                    shown.clear()
                    clock.reset()
                    _, row["update_wall"], row["update_cpu"] = _timed(move)
                    row["library_cpu"], row["library_wall"] = clock.cpu["library"], clock.wall["library"]
                    fig = shown[-1]
                    _, row["png_tight_wall"], row["png_tight_cpu"] = _timed(lambda: print_figure(fig, "png"))
                    _, row["png_plain_wall"], row["png_plain_cpu"] = _timed(
                        lambda: print_figure(fig, "png", bbox_inches=None)
                    )
                    _, row["png_fast_wall"], row["png_fast_cpu"] = _timed(
                        lambda: print_figure(fig, "png", pil_kwargs={"compress_level": 1})
                    )
                    _, row["png_80dpi_wall"], row["png_80dpi_cpu"] = _timed(
                        lambda: print_figure(fig, "png", dpi=min(80, fig.dpi))
                    )
                    # a bare Agg redraw of the same figure (an explicit Agg canvas: a closed figure has none)
                    _, row["agg_wall"], row["agg_cpu"] = _timed(lambda: FigureCanvasAgg(fig).draw())
                    for f in shown:
                        plt.close(f)
                    if chapter != "02_gaussian_preservation":
                        shown.clear()
                        mpl.rcParams["text.parse_math"] = False
                        try:
                            _, w, c = _timed(move)
                            fig = shown[-1]
                            _, w2, c2 = _timed(lambda: print_figure(fig, "png"))
                        finally:
                            mpl.rcParams["text.parse_math"] = True
                        row["nomath_wall"], row["nomath_cpu"] = w + w2, c + c2
                        for f in shown:
                            plt.close(f)
                    fig, w, c = _timed(lambda: reuse(k))
                    _, w2, c2 = _timed(lambda: print_figure(fig, "png", bbox_inches=None))
                    row["reuse_wall"], row["reuse_cpu"] = w + w2, c + c2
                    if inplace:
                        fig, w, c = _timed(lambda: inplace(k))
                        _, w2, c2 = _timed(lambda: print_figure(fig, "png", bbox_inches=None))
                        row["inplace_wall"], row["inplace_cpu"] = w + w2, c + c2
                    rows.append(row)
    finally:
        plt.show = original_show
        plt.close("all")
    return {key: statistics.median(r[key] for r in rows if key in r) for key in rows[0]} | {"n": len(rows)}


def summarise(rows):
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    worst = max(rows, key=lambda r: r["total"])
    return med, worst


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="passes over each explorer's list of settings")
    parser.add_argument("--only", nargs="*", help="chapter prefixes, e.g. 01 04")
    parser.add_argument("--profile", action="store_true", help="print the top functions (cProfile) per explorer")
    parser.add_argument("--sort", default="cumulative", help="cProfile order with --profile (cumulative, tottime)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--experiments",
        action="store_true",
        help="paired experiments per update: PNG with/without tight bbox, no mathtext, reused figure",
    )
    parser.add_argument(
        "--no-tight",
        action="store_true",
        help="experiment: PNG without the tight bounding box (InlineBackend.print_figure_kwargs)",
    )
    parser.add_argument("--png-dpi", type=float, help="experiment: render the PNG at this dpi")
    parser.add_argument(
        "--no-mathtext",
        action="store_true",
        help="experiment: text.parse_math = False ($...$ labels drawn as plain text)",
    )
    args = parser.parse_args(argv)
    chapters = [c for c in EXPLORERS if not args.only or any(c.startswith(o) for o in args.only)]
    kwargs = None
    if args.no_tight or args.png_dpi:
        kwargs = {"bbox_inches": None if args.no_tight else "tight"}
        if args.png_dpi:
            kwargs["dpi"] = args.png_dpi
    experiment = ", ".join(
        x for x in (f"print_figure_kwargs={kwargs}" if kwargs else "", "no mathtext" if args.no_mathtext else "") if x
    )
    found = [p.stem for p in ec.explorer_chapters()]
    missing = sorted(set(found) - set(EXPLORERS))
    if missing:
        print(f"warning: explorers not benchmarked here: {missing}")
    if args.experiments:
        print(f"paired experiments, medians in ms, CPU time (wall time in brackets); load {os.getloadavg()[0]:.1f}")
        print(f"{'':<30}{'update':>7}{'':>9}{'inline':>8}{'PNG of the same figure':>35}{'whole update':>27}")
        print(
            f"{'explorer':<26}{'n':>4}{'now':>7}{'library':>9}{'PNG':>8}{'no tight':>10}{'zlib 1':>8}{'80 dpi':>8}"
            f"{'Agg':>7}{'now':>9}{'no math':>9}{'reuse':>8}{'in place':>10}   wall: now / no math / reuse / in place"
        )
        for chapter in chapters:
            m = experiments(chapter, args.repeat)
            total_cpu = m["update_cpu"] + m["png_tight_cpu"]
            total_wall = m["update_wall"] + m["png_tight_wall"]
            f = lambda x: f"{1e3 * x:.0f}"  # noqa: E731
            nomath = f(m["nomath_cpu"]) if "nomath_cpu" in m else "-"
            nomath_w = f(m["nomath_wall"]) if "nomath_wall" in m else "-"
            print(
                f"{chapter:<26}{m['n']:>4}{f(m['update_cpu']):>7}{f(m['library_cpu']):>9}{f(m['png_tight_cpu']):>8}"
                f"{f(m['png_plain_cpu']):>10}{f(m['png_fast_cpu']):>8}{f(m['png_80dpi_cpu']):>8}{f(m['agg_cpu']):>7}"
                f"{f(total_cpu):>9}{nomath:>9}{f(m['reuse_cpu']):>8}"
                f"{f(m['inplace_cpu']) if 'inplace_cpu' in m else '-':>10}"
                f"   {f(total_wall)} / {nomath_w} / {f(m['reuse_wall'])} / "
                f"{f(m['inplace_wall']) if 'inplace_wall' in m else '-'}",
                flush=True,
            )
        return
    print(
        f"explorer updates (library call + drawing + inline PNG), {platform.python_version()}, "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; {args.repeat} passes"
        + (f"; EXPERIMENT: {experiment}" if experiment else "")
    )
    print(f"{'':<28}{'':>4}{'wall time':>18}  {'CPU time':>9}")
    print(
        f"{'explorer':<28}{'n':>4}{'median':>9}{'worst':>9}  {'median':>9}  {'median CPU split: library / draw / png':<40}"
        f"{'first':>8}"
    )
    results = {}
    for chapter in chapters:
        result = measure(chapter, args.repeat, args.profile, args.sort, kwargs, not args.no_mathtext)
        med, worst = summarise(result["rows"])
        results[chapter] = {
            "median": med,
            "worst": worst,
            "first": result["first"],
            "setup": result["setup"],
            "n": len(result["rows"]),
        }
        ms = lambda x: f"{1e3 * x:.0f}"  # noqa: E731
        split = f"{ms(med['cpu_library'])} / {ms(med['cpu_draw'])} / {ms(med['cpu_png'])} ms"
        print(
            f"{chapter:<28}{len(result['rows']):>4}{ms(med['total']):>7}ms{ms(worst['total']):>7}ms  "
            f"{ms(med['cpu']):>7}ms  {split:<40}"
            + (f"{ms(result['first']):>6}ms" if result["first"] == result["first"] else f"{'(built)':>8}"),
            flush=True,
        )
        if result["profile"]:
            print(result["profile"])
    print("slowest update, wall time split (library / draw / png, ms):")
    for chapter, r in results.items():
        w = r["worst"]
        print(
            f"  {chapter}: {1e3 * w['total']:.0f} = {1e3 * w['library']:.0f} / {1e3 * w['draw']:.0f} / "
            f"{1e3 * w['png']:.0f}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
