"""The chapters' explorers (tokendynamics.book.explorers) and their framework (tokendynamics.book.widgets).

Every explorer updates for every option of every control (choices: each option; sliders: both ends and
one step from the start), including its error states, without raising; the library call is cached per
state of the controls it uses; the figure and its artists are made once and updated in place. No
timing here: `make bench` (benchmarks/bench_explorers.py) measures the updates.
"""

from __future__ import annotations

import base64
import io
import re

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from tests.helpers import linear_reference  # noqa: E402
from tokendynamics import circle_tokens, metrics  # noqa: E402
from tokendynamics.book import explorers as E  # noqa: E402
from tokendynamics.book import highdim_plots  # noqa: E402
from tokendynamics.book.explorers import highdim_update  # noqa: E402
from tokendynamics.book.plotting import animation_html  # noqa: E402
from tokendynamics.book.studies import highdim as hd  # noqa: E402
from tokendynamics.book.studies.gradient_flow import EnergyCurves  # noqa: E402
from tokendynamics.book.studies.highdim import RunSummary  # noqa: E402
from tokendynamics.book.studies.kuramoto import Portrait  # noqa: E402
from tokendynamics.book.widgets import Explorer, slider, sticky_limits  # noqa: E402
from tokendynamics.errors import ConvergenceError  # noqa: E402
from tokendynamics.gaussian import GaussianTrajectory  # noqa: E402
from tokendynamics.kuramoto import (
    PhaseSolution,  # noqa: E402
    linear_layers,  # noqa: E402
    order_parameter,  # noqa: E402
)
from tokendynamics.ott_antonsen import sample_ott_antonsen  # noqa: E402
from tokendynamics.particles import Trajectory, rotation_matrix  # noqa: E402
from tokendynamics.regimes import REGIMES  # noqa: E402

EXPLORERS = [
    E.VariantsExplorer,
    E.ConeExplorer,
    E.EnergyExplorer,
    E.RegimesExplorer,
    E.HighdimExplorer,
    E.TransformerExplorer,
]
PNG = b"\x89PNG\r\n\x1a\n"


def _png_size(png: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(png)) as im:
        return im.size


def _moves(cls) -> list[dict]:
    """Every option of every control, each from the explorer's start: choices all, sliders both ends and one step."""
    moves = []
    for c in cls.controls:
        if c.options is not None:
            moves += [{c.name: v} for v in c.options if v != c.value]
        else:
            step = c.value + c.step if c.value + c.step <= c.max else c.value - c.step
            moves += [{c.name: c.min}, {c.name: c.max}, {c.name: round(step, 10)}]
    return moves


def _artists(ex: Explorer) -> list[int]:
    return [id(a) for a in ex._dynamic] + [id(ax) for ax in ex.fig.axes]


@pytest.fixture(params=EXPLORERS, ids=lambda cls: cls.__name__)
def explorer(request):
    ex = request.param()
    assert ex.update() == ex.status and ex.error is None, ex.status
    return ex


def test_every_control_option_updates_in_place_without_raising(explorer):
    fig, artists = explorer.fig, _artists(explorer)
    children = [len(ax.get_children()) for ax in fig.axes]
    start = dict(explorer.state)
    for move in _moves(type(explorer)):
        status = explorer.update(**{**start, **move})
        assert isinstance(status, str) and status, (move, status)
        assert explorer.png.startswith(PNG), move
        assert explorer.fig is fig and _artists(explorer) == artists, f"{move}: the figure was rebuilt"
        if explorer.error is None:  # the picture, not an error message: artists updated, none added
            assert [len(ax.get_children()) for ax in fig.axes] == children, move
            assert all(ax.get_visible() for ax in fig.axes), move
    assert _png_size(explorer.png) == tuple(int(x * explorer.dpi) for x in explorer.figsize)


def test_a_state_seen_before_is_drawn_from_the_cache(explorer):
    control = next(c for c in explorer.controls if c.options is None and c.name in explorer.uses(explorer.state))
    other = control.min if explorer.state[control.name] != control.min else control.max
    first = explorer.status
    calls = explorer.calls
    explorer.update(**{control.name: other})
    assert explorer.calls == calls + 1 and explorer.timings["cached"] == 0.0
    back = explorer.update(**{control.name: type(explorer)().state[control.name]})
    assert explorer.calls == calls + 1 and explorer.timings["cached"] == 1.0, "the first state was recomputed"
    assert back == first
    assert set(explorer.timings) >= {"library", "draw", "image", "total", "cpu_library", "cpu_total"}


def test_unknown_control_is_a_status_not_an_exception():
    ex = E.EnergyExplorer()
    assert ex.update(no_such_control=1.0).startswith("unexpected error (TypeError)")
    with pytest.raises(TypeError, match="no control"):
        E.EnergyExplorer(no_such_control=1.0)


# --------------------------------------------------------------------------------------------------
# error states: a status line and a message on the figure, never an exception


def test_sinkhorn_non_convergence_is_reported_cached_and_the_explorer_recovers(monkeypatch):
    from tokendynamics import kinds

    plain = kinds.sinkhorn_potentials

    def capped(*args, **kw):  # (accelerated Sinkhorn converges at these scores): three plain iterations
        return plain(*args, **{**kw, "max_iter": 3, "memory": 0})

    monkeypatch.setattr(kinds, "sinkhorn_potentials", capped)
    ex = E.VariantsExplorer()
    ex.X0 = ex.X0[:12]
    assert ex.update().startswith("softmax")
    fig = ex.fig
    status = ex.update(variant="sinkhorn", a11=2.0, a12=2.0, a21=2.0, a22=2.0)
    assert isinstance(ex.error, ConvergenceError)
    assert status.startswith("no convergence: Sinkhorn attention did not reach")
    assert ex._message.get_visible() and status in ex._message.get_text()
    assert not any(ax.get_visible() for ax in fig.axes)
    calls = ex.calls
    assert ex.update(variant="sinkhorn") == status and ex.calls == calls  # the failure is cached
    assert ex.update(variant="softmax").startswith("softmax") and ex.error is None
    assert all(ax.get_visible() for ax in fig.axes) and not ex._message.get_visible() and ex.fig is fig


@pytest.mark.parametrize(
    "cls, state",
    [
        (E.VariantsExplorer, {"variant": "linear", "v_scale": -2.0}),
        (E.ConeExplorer, {}),  # softmax with the default A blows up near t = 3.7
        (E.EnergyExplorer, {"a2": 0.8, "v2": 1.5}),
    ],
)
def test_a_blow_up_is_drawn_up_to_its_time_and_reported(cls, state):
    ex = cls()
    status = ex.update(**state)
    assert ex.error is None and re.search(r"blow-up at t = \d", status), status
    assert ex.png.startswith(PNG)


def test_cone_explorer_refuses_a_sigma0_outside_the_disc_and_recovers():
    ex = E.ConeExplorer()
    ex.update(kind="l2")
    assert ex.update(u=0.9, w=0.9) == "not allowed: the disc point (u, w) must lie inside the unit disc"
    assert ex.update(u=0.3, w=-0.2).startswith("l2") and ex.error is None


class _Broken(Explorer):
    controls = (slider("x", 0.0, 0.0, 1.0),)

    def compute(self, state):
        if state["x"] > 0.5:
            raise RuntimeError("the library had a bad day")
        return state["x"]

    def setup(self, fig):
        self.line = self.dynamic(fig.add_subplot().plot([0, 1], [0, 0])[0])

    def draw(self, result, state):
        if result == 0.25:
            raise KeyError("drawing")
        self.line.set_ydata([0, result])

    def describe(self, result, state):
        return f"x = {result}"


def test_unexpected_errors_in_the_library_or_the_drawing_never_escape_a_callback():
    ex = _Broken()
    assert ex.update() == "x = 0.0"
    assert ex.update(x=1.0) == "unexpected error (RuntimeError): the library had a bad day"
    assert ex.update(x=0.25).startswith("could not draw this state (KeyError")
    assert ex.update(x=0.0) == "x = 0.0" and ex.png.startswith(PNG)


# --------------------------------------------------------------------------------------------------
# what each explorer computes: the pure update functions and the controls each state uses


def test_the_pure_update_functions_return_the_library_results():
    X0 = np.random.default_rng(0).uniform(-1, 1, (20, 2))
    traj, paths = E.variants_update("masked", np.eye(2), rotation_matrix(0.3), 1.0, X0, 0.4, 0.1)
    assert isinstance(traj, Trajectory) and paths.shape == (5, 20, 2)  # the sink row dropped
    traj, grid = E.cone_update("softmax", -np.eye(2), np.eye(2), 0.3, -0.2, T=1.0, grid=3)
    assert isinstance(traj, GaussianTrajectory) and len(grid) == 5  # the 3 x 3 grid's points inside the disc
    mean0, cov0 = [0.3, -0.2], [[0.5, 0.1], [0.1, 0.3]]
    curves = E.energy_update(-1.0, -0.4, 0.3, 1.0, 0.4, mean0=mean0, cov0=cov0, T=1.0, n_times=11)
    assert isinstance(curves, EnergyCurves) and curves.t.shape == (11,) and curves.sign == -1
    V = np.array([[0.8, 1.0], [-1.0, -0.2]])
    portrait, phases = E.regimes_update(linear_layers(np.eye(2), V), np.linspace(0, 3, 10), n_grid=5)
    assert isinstance(portrait, Portrait) and isinstance(phases, PhaseSolution) and portrait.grid.shape == (5, 5)
    out = E.highdim_update("case2", d=6, n=12, T=2.0, top=3.0, a=99.0)  # a is not a knob of case 2
    assert isinstance(out["linear"], RunSummary) and out["linear"].engine == "projective"
    assert out["unnormalized_softmax"].engine == "particles" and out["case"].label.startswith("Case 2")


def test_the_high_dimensional_explorer_shows_and_recomputes_only_the_knobs_of_the_case():
    ex = E.HighdimExplorer()
    ex.update()
    assert sorted(ex.uses(ex.state)) == ["a", "b", "beta", "case"]  # case 4
    calls = ex.calls
    for knob, value in (("top", 3.0), ("sigma", 0.5), ("spectrum", "mixed"), ("skew_scale", 1.5)):
        ex.update(**{knob: value})
        assert ex.calls == calls, f"moving {knob} (not a knob of case 4) recomputed"
    ex.update(case="case2")
    assert sorted(ex.uses(ex.state)) == ["beta", "case", "top"] and ex.calls == calls + 1
    assert "λ₁ = 3" in ex.status and "$" not in ex.status  # plain text in the status line


def test_every_explorer_is_built_only_in_a_live_session(monkeypatch):
    calls = {
        E.variants_explorer: (),
        E.cone_explorer: (),
        E.energy_explorer: (),
        E.regimes_explorer: ("fast", 0),
        E.highdim_explorer: (),
        E.transformer_explorer: (),
    }
    monkeypatch.setenv("TOKENDYNAMICS_HEADLESS", "1")
    assert all(make(*args) is None for make, args in calls.items())
    monkeypatch.delenv("TOKENDYNAMICS_HEADLESS")
    assert [type(make(*args)) for make, args in calls.items()] == EXPLORERS


def test_every_explorer_function_takes_and_documents_the_arguments_of_its_class():
    import inspect

    for make, cls in zip(
        (
            E.variants_explorer,
            E.cone_explorer,
            E.energy_explorer,
            E.regimes_explorer,
            E.highdim_explorer,
            E.transformer_explorer,
        ),
        EXPLORERS,
    ):
        assert make.__module__ == cls.__module__ and make.__name__.endswith("_explorer")
        assert list(inspect.signature(make).parameters) == list(inspect.signature(cls).parameters)
        doc = inspect.cleandoc(make.__doc__)
        assert doc.startswith("Chapter 0") and f"Returns\n-------\n{cls.__name__} or None" in doc
        assert "**values\n    Initial values of the controls." in doc
        # the references name the paper, the chapter the explorer runs in and its library call
        refs = doc.split("References\n----------\n")[1]
        assert refs.startswith("Paper ") and "``chapters/0" in refs and "_update`" in refs


def test_the_widgets_show_the_controls_a_status_line_and_the_image(monkeypatch):
    pytest.importorskip("ipywidgets")
    ex = E.HighdimExplorer()
    box = ex.widget()
    assert ex.widget() is box  # built once
    controls, status, image = ex._ui["controls"], ex._ui["status"], ex._ui["image"]
    assert [w.description for w in controls.values()] == [c.description for c in ex.controls]
    hidden = {name for name, w in controls.items() if w.layout.display == "none"}
    assert hidden == {"spectrum", "skew_scale", "top", "sigma"}  # case 4 uses a, b (and beta)
    assert image.value == ex.png and image.format == "png" and "the 2D theory predicts" in status.value
    controls["case"].value = "case2"  # what the front end does: the observer runs the update
    assert ex.state["case"] == "case2" and image.value == ex.png
    assert {name for name, w in controls.items() if w.layout.display == "none"} == {
        "spectrum", "skew_scale", "a", "b", "sigma"
    }  # fmt: skip
    ex2 = E.ConeExplorer()
    ex2.widget()
    ex2._ui["controls"]["u"].value = 0.95
    ex2._ui["controls"]["w"].value = 0.95
    assert "#b23a48" in ex2._ui["status"].value and "unit disc" in ex2._ui["status"].value  # an error, in red


# --------------------------------------------------------------------------------------------------
# the static stand-ins and the framework's helpers


def test_an_explorer_animates_precomputed_frames_at_the_column_width():
    ex = E.EnergyExplorer(n_times=21)
    states = [{"a2": a2} for a2 in (-0.8, 0.0, 0.8)]
    frames = [(s, ex.compute({**ex.state, **s})) for s in states]
    html = animation_html(ex.animate(frames, interval=100))
    pngs = [re.sub(r"[^A-Za-z0-9+/=]", "", p) for p in re.findall(r"data:image/png;base64,([A-Za-z0-9+/=\\\n]+)", html)]
    assert len(pngs) == 3
    assert {_png_size(base64.b64decode(p))[0] for p in pngs} == {770}
    assert ex.headline.get_visible() and ex.headline.get_text().startswith("a₂ = 0.80")  # the last frame
    ex.update(a2=-0.4)  # back to the live explorer: no headline (the status line says it)
    assert not ex.headline.get_visible()


def test_animation_frames_are_palette_pngs_that_keep_the_picture_and_its_text_record():
    """The frames of a static stand-in are 256-colour PNGs: same size, same picture to a few
    levels of each channel, the legibility record kept, and lighter than matplotlib's."""
    from PIL import Image

    from tokendynamics.book.plotting import palette_png

    ex = E.EnergyExplorer(n_times=21)
    ex.update(a2=0.4)
    buf = io.BytesIO()
    meta = {"tokendynamics:text": '{"dpi": 96, "min_pt": 9}'}
    ex.fig.savefig(buf, format="png", dpi=96, metadata=meta)
    original = buf.getvalue()
    light = palette_png(original)
    a, b = Image.open(io.BytesIO(original)), Image.open(io.BytesIO(light))
    assert b.mode == "P" and b.size == a.size
    assert b.text["tokendynamics:text"] == meta["tokendynamics:text"]
    diff = np.abs(np.asarray(a.convert("RGB"), float) - np.asarray(b.convert("RGB"), float))
    assert diff.mean() < 2.0 and np.percentile(diff, 99.9) <= 48  # channel levels out of 255
    assert len(light) < 0.6 * len(original)


def test_animation_html_refuses_text_smaller_than_nine_pixels():
    ex = E.EnergyExplorer(n_times=11)
    anim = ex.animate([({}, ex.compute(ex.state))])
    ex.headline.set_fontsize(5)
    with pytest.raises(ValueError, match="px at 770 px wide"):
        animation_html(anim)


def test_sticky_limits_keep_the_axes_while_the_data_fit_and_fill_them():
    assert sticky_limits(None, 0.0, 1.0, pad=0.1) == pytest.approx((-0.1, 1.1))
    assert sticky_limits((-0.1, 1.1), 0.2, 0.9) == (-0.1, 1.1)  # fits, fills more than 40 %
    assert sticky_limits((-0.1, 1.1), 0.2, 0.3, pad=0.0) == (0.2, 0.3)  # too small a part: zoom in
    assert sticky_limits((-0.1, 1.1), 0.0, 2.0, pad=0.0) == (0.0, 2.0)  # does not fit
    assert sticky_limits((0.0, 1.0), np.nan, 1.0) == (0.0, 1.0)


def test_regimes_update_loose_particles_draw_the_tight_runs_order_parameter():
    """Chapter 4's explorer: regimes_update (OA portrait, orbit, regime, particle run) drawn by
    kuramoto_plots.draw_explorer; the loosely integrated particles (O(n) angle equations, rtol 1e-6)
    draw the R2 path of the core's tight run to 1e-4."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tokendynamics.book.explorers import regimes_update
    from tokendynamics.book.kuramoto_plots import draw_explorer

    rng = np.random.default_rng(23)
    z0 = 0.3 * np.exp(0.6j)
    theta0 = sample_ott_antonsen(z0, 80, 7)
    for _ in range(7):
        A, V = rng.uniform(-2, 2, (2, 2)), rng.uniform(-2, 2, (2, 2))
        portrait, phases = regimes_update(linear_layers(A, V), theta0, z0=z0, T=20.0)
        fig, axes = plt.subplots(1, 2, figsize=(9, 4.2), dpi=80)  # as in the chapter's widget
        draw_explorer(axes, portrait, phases)
        fig.savefig(io.BytesIO(), format="png", dpi=80, bbox_inches="tight")  # what Jupyter's inline backend does
        plt.close(fig)
        assert portrait.regime in REGIMES and portrait.field.shape == portrait.grid.shape
    ref = linear_reference(circle_tokens(theta0), A, V, 20.0, phases.t, rtol=1e-10, atol=1e-12)
    assert np.max(np.abs(phases.order_parameter() - order_parameter(ref.angles(), 2))) < 1e-4


def test_highdim_update_runs_every_case_and_its_loose_tolerance_is_invisible():
    for case in hd.CASES:
        out = highdim_update(case, a=0.5, b=1.0)
        assert set(out) >= {"case", "prediction", "linear", "unnormalized_softmax"}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2)
    highdim_plots.plot_runs(axes, out, d=16)  # the widget's drawing: one R2 and one R1 curve per variant
    assert [len(ax.get_lines()) for ax in axes] == [3, 2]  # + the dotted 1/d line
    assert axes[0].get_yscale() == "log" and axes[0].get_legend() is not None
    plt.close(fig)
    tight = highdim_update("case4", a=0.5, b=1.0, rtol=1e-8, atol=1e-10)
    for kind in ("linear", "unnormalized_softmax"):
        loose = highdim_update("case4", a=0.5, b=1.0)[kind]
        assert np.max(np.abs(loose.R2 - tight[kind].R2)) < 1e-3


def test_transformer_update_is_the_network_against_the_ode_and_the_explorer_keeps_the_ode_per_beta():
    """Chapter 08's explorer: transformer_update runs the network of the chosen normalisation and MLP
    against the sphere ODE; the ODE depends on beta only, so moving L, the norm or the MLP reuses it,
    and the activation is a control only while the MLP is on."""
    from tokendynamics.book import transformer_figures as tf
    from tokendynamics.transformer import forward

    kw = dict(n=12, d=4, T=6.0, seed=3, width=8, ode_dt=0.1)
    out = E.transformer_update(6, "sphere", 0.0, 2.0, **kw)
    U0 = tf.centred_sphere(12, 4, 3)
    Y = forward(U0, tf.identity_layer(4, 2.0), 6.0, 6, norm="sphere")
    ode = tf.sphere_ode(U0, tf.identity_layer(4, 2.0), 6.0, 0.1)
    np.testing.assert_allclose(out["R1"], metrics.order_parameters(Y)[0], atol=1e-12)
    assert out["distance"] == pytest.approx(float(np.max(np.linalg.norm(Y[-1] - ode.final, axis=1))))
    post = E.transformer_update(6, "post", 0.0, 2.0, **kw, ode=ode)
    np.testing.assert_allclose(post["R1"], out["R1"], atol=1e-4)  # post-LN is the sphere model
    ex = E.TransformerExplorer()
    ex.update()
    assert "activation" not in ex.uses(ex.state)
    ode_runs = len(ex._memo["ode"].data)
    for move in ({"L": 24}, {"norm": "pre"}, {"strength": 1.0}, {"activation": "tanh"}):
        ex.update(**move)
        assert ex.error is None and len(ex._memo["ode"].data) == ode_runs, move
    assert "activation" in ex.uses(ex.state) and "tanh MLP 1" in ex.status
    ex.update(beta=2.0)
    assert len(ex._memo["ode"].data) == ode_runs + 1
