r"""Chapter 06's explorer: linear and unnormalised softmax attention on one matrix case, at a small size.

Controls: the matrix case and its knobs (only those the case uses are shown: moving a hidden one
recomputes nothing) and :math:`\beta`. One update is :func:`highdim_update`: LA (through its
projective flow, exact for linear attention) and USA (the particle system) from the same tokens,
:math:`\hat R_2(t)` and :math:`\hat R_1(t)` drawn in place, and the 2D prediction in the headline.
"""

from __future__ import annotations

from typing import Any

from ...docstrings import fill_doc
from ...particles import sample_sphere
from ..experiments import settings
from ..highdim_plots import VARIANT_COLORS, VARIANT_LABELS, run_axes
from ..studies.highdim import CASES, case_parameters, make_case, predict_for_case, run_variant
from ..widgets import EXPLORER_DOC, Explorer, choice, live_explorer, slider

__all__ = ["highdim_update", "HighdimExplorer", "highdim_explorer"]

KINDS = ("linear", "unnormalized_softmax")
# the recipes' labels are mathtext (for figures); the status line is plain text
_PLAIN = (
    (r"\mathrm{sym}", "sym "),
    (r"\succ", " ≻ "),
    (r"\prec", " ≺ "),
    (r"\lambda_1", "λ₁"),
    (r"\sigma", "σ"),
    ("$", ""),
)


def plain_label(label: str) -> str:
    """A matrix case's label without mathtext.

    Labels are plain text now; older mathtext labels such as ``$\\lambda_1=2$`` become ``λ₁=2``.

    Parameters
    ----------
    label : str
        A label.

    Returns
    -------
    str
    """
    for tex, text in _PLAIN:
        label = label.replace(tex, text)
    return label


@fill_doc(EXPLORER_DOC)
def highdim_update(
    case: str = "case4",
    *,
    d: int = 16,
    n: int = 64,
    T: float = 30.0,
    beta: float = 1.0,
    seed: int = 0,
    matrix_seed: int = 42,
    kinds=KINDS,
    n_eval: int = 61,
    rtol: float = 1e-4,
    atol: float = 1e-6,
    **knobs,
) -> dict[str, Any]:
    r"""One update of chapter 06's explorer: the chosen case at a small size, every variant in ``kinds``.

    Why 11 parameters: one per control of the explorer (its widgets call it with their values).

    ``knobs`` are the flat controls (``spectrum, top, a, b, skew_scale, sigma``); the ones the case
    uses are picked by :func:`~tokendynamics.book.studies.highdim.case_parameters`. Runs every variant from the
    same tokens with loose tolerances (:func:`~tokendynamics.book.studies.highdim.run_variant`; LA by its
    projective flow, exact for linear attention, USA and SA by the particle system). Returns
    ``{"case": MatrixCase, "prediction": CasePrediction, kind: RunSummary, ...}``.

    Parameters
    ----------
    case : str
        One of :data:`~tokendynamics.book.studies.highdim.CASES`.
    d, n : int
        Dimension and number of tokens.
    T : float
        Horizon.
    %(beta)s
    seed, matrix_seed : int
        Seeds of the tokens and of the matrices.
    kinds : sequence of str
        Variants to run.
    n_eval : int
        Stored times.
    rtol, atol : float
        Tolerances.
    **knobs
        The flat controls.

    Returns
    -------
    dict

    References
    ----------
    Paper 2 (Li et al., 2026), its high-dimensional experiments; book: ``chapters/06_high_dimensional.md``.
    """
    mc = make_case(case, d, matrix_seed, **case_parameters(case, **knobs))
    X0 = sample_sphere(n, d, seed)
    out: dict[str, Any] = {"case": mc, "prediction": predict_for_case(mc)}
    for k in kinds:
        engine = "projective" if k == "linear" else "particles"
        out[k] = run_variant(mc, k, X0, T, beta=beta, n_eval=n_eval, rtol=rtol, atol=atol, engine=engine)
    return out


@fill_doc(EXPLORER_DOC)
class HighdimExplorer(Explorer):
    """:math:`\\hat R_2(t)` (left, log scale) and :math:`\\hat R_1(t)` (right) for LA and USA.

    Parameters
    ----------
    %(mode)s
    d, n : int, optional
        Dimension and number of tokens.
    T : float, optional
        Horizon.
    %(values)s

    References
    ----------
    Paper 2 (Li et al., 2026), its high-dimensional experiments; book:
    ``chapters/06_high_dimensional.md``, where the explorer runs :func:`highdim_update`.
    """

    controls = (
        choice("case", CASES, "case4"),
        choice("spectrum", ("positive", "mixed", "negative")),
        slider("skew_scale", 0.5, 0.0, 2.0, label="skew scale"),
        slider("top", 2.0, -2.0, 4.0, 0.1),
        slider("a", 0.5, -2.0, 2.0),
        slider("b", 1.0, -2.0, 2.0),
        slider("sigma", 1.0, 0.1, 2.0),
        slider("beta", 1.0, 0.2, 4.0, 0.1),
    )
    rows = (("case", "beta"), ("spectrum", "skew_scale", "top", "a", "b", "sigma"))
    figsize = (8.0, 3.2)

    def __init__(
        self, mode: str = "fast", *, d: int | None = None, n: int | None = None, T: float | None = None, **values
    ):
        super().__init__(**values)
        p = settings("highdim_widget", mode)
        self.d, self.n = int(d or p["d"]), int(n or p["n"])
        self.T, self.seed = float(T or p["T"]), int(p["seed"])

    def uses(self, state):
        knobs = {c.name: state[c.name] for c in self.controls if c.name not in ("case", "beta")}
        return ["case", "beta", *case_parameters(state["case"], **knobs)]

    def compute(self, state):
        knobs = {k: state[k] for k in self.uses(state) if k not in ("case", "beta")}
        return highdim_update(state["case"], d=self.d, n=self.n, T=self.T, beta=state["beta"], seed=self.seed, **knobs)

    def setup(self, fig):
        axes = (fig.add_axes((0.085, 0.16, 0.38, 0.68)), fig.add_axes((0.6, 0.16, 0.38, 0.68)))
        run_axes(axes, self.T, self.d)
        self.lines = {}
        for kind in KINDS:
            r2 = axes[0].plot([], [], color=VARIANT_COLORS[kind], lw=1.8, label=VARIANT_LABELS[kind])[0]
            r1 = axes[1].plot([], [], color=VARIANT_COLORS[kind], lw=1.5)[0]
            self.lines[kind] = self.dynamic(r2, r1)
        axes[0].legend(loc="lower right")

    def draw(self, result, state):
        for kind, (r2, r1) in self.lines.items():
            run = result.get(kind)
            r2.set_data(([], []) if run is None else (run.t, run.R2))
            r1.set_data(([], []) if run is None else (run.t, run.R1))

    def describe(self, result, state):
        label = plain_label(result["case"].label)
        return f"{label}, d = {self.d}: the 2D theory predicts {result['prediction'].regime.replace('_', ' ')}"


highdim_explorer = live_explorer(HighdimExplorer, "highdim_explorer", "Chapter 06")
