r"""High-dimensional experiments of paper 2: do the two-dimensional regimes persist at d = 100?

Tokens :math:`x_1,\dots,x_n\in\mathbb S^{d-1}` move by linear attention (LA), unnormalised softmax
attention (USA) or softmax attention (SA) (paper 2, Li et al. 2026; book: ``chapters/06_high_dimensional.md``,
equation (eq-hd-model)):

.. math::
   \dot x_k = P^\perp_{x_k}\Big(\frac1{Z_k}\sum_j h(\beta\langle x_k, Ax_j\rangle)\,Vx_j\Big),

with :math:`h(s)=s,\ Z_k=n` (LA), :math:`h=\exp,\ Z_k=n` (USA), :math:`h=\exp,\ Z_k=\sum_l
e^{\beta\langle x_k,Ax_l\rangle}` (SA). Runs go through the shared core
(:class:`~tokendynamics.attention.Attention`, :func:`~tokendynamics.particles.simulate` with
``sphere=True``); LA uses the second-moment form of the field, without an n x n matrix.

This module provides

* the **matrix recipes** of the authors' high-dimensional app [R] (:func:`case1` … :func:`case4`,
  :func:`random_case`), each a :class:`MatrixCase` with a seed and the spectrum it promises;
* runs through the order parameters of :mod:`tokendynamics.metrics` and, for LA, the exact
  projective reduction of :mod:`tokendynamics.projective`;
* the **2D prediction** of the planar theory (book: ``chapters/05_kuramoto_regimes.md``) from a case's
  parameters, :func:`predict_2d_regime`, :func:`predict_for_case`, and the regime observed in a run,
  :func:`observed_regime`;
* runs and sweeps: :func:`run_variant`, :func:`clustering_time` (for
  :func:`tokendynamics.sweeps.sweep`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import ortho_group

from .attention import Attention
from .docstrings import fill_doc
from .kuramoto import complex_parts
from .metrics import (
    ClusterReport,
    axis_speed,
    coordinate_means,
    detect_clusters,
    first_passage_times,
    order_parameters,
    plane_order_parameters,
    top_direction,
)
from .particles import Trajectory, normalize_rows, sample_sphere, simulate
from .projective import projective_flow
from .regimes import case1_region, predict_regime
from .validation import (
    PARAMETER_DOCS,
    validate_choice,
    validate_count,
    validate_dimension,
    validate_finite,
    validate_finite_array,
    validate_instance,
    validate_matrix2,
    validate_positive,
)

__all__ = [
    "CASES",
    "VARIANTS",
    "CASE_REGIMES",
    "MatrixCase",
    "case1",
    "case2",
    "case3",
    "case4",
    "random_case",
    "near_plane_tokens",
    "matrix_case",
    "make_case",
    "CasePrediction",
    "FAMILIES",
    "predict_2d_regime",
    "predict_for_case",
    "observed_regime",
    "agreement",
    "RunSummary",
    "summarize",
    "run_variant",
    "clustering_time",
    "run_many",
    "case_parameters",
]

#: Names of the matrix recipes of the authors' app (:func:`matrix_case`).
CASES = ("case1", "case2", "case3", "case4", "random")
#: The attention variants compared (``Attention`` kinds): LA, USA, SA.
VARIANTS = ("linear", "unnormalized_softmax", "softmax")
#: Regime names shared with the d = 2 theory (``tokendynamics.kuramoto``), plus ``bistable``
#: (Case 1 with tr A < 0 < det A, outcome depends on the data) and ``undetermined`` (no closed form).
CASE_REGIMES = ("static_clusters", "rotating_clusters", "oscillation", "partial", "bistable", "undetermined")

_REFS_APP = """\
Paper 2 (Li et al., 2026), its high-dimensional experiments, and the authors' code
(https://github.com/TMaranzatto/attention_dynamics, provenance [R]); book:
``chapters/06_high_dimensional.md``."""

_PARAM_D = "d : int\n    Dimension."

_REFS_CASES = """\
Paper 2 (Li et al., 2026), the cases and regimes in d = 2; book: ``chapters/05_kuramoto_regimes.md``
and ``chapters/06_high_dimensional.md``."""

#: Numpydoc paragraphs shared by the docstrings of this module (:func:`~tokendynamics.docstrings.fill_doc`).
_DOC = {
    **PARAMETER_DOCS,
    "refs_app": _REFS_APP,
    # the Returns and References sections of every matrix recipe
    "recipe_sections": "Returns\n-------\nMatrixCase\n\nReferences\n----------\n" + _REFS_APP,
    "d": _PARAM_D,
    "block_params": _PARAM_D + "\na, b : float\n    Block entries.",
    "refs_cases": _REFS_CASES,
    # the Returns and References sections of the predictions
    "prediction_sections": "Returns\n-------\nCasePrediction\n\nReferences\n----------\n" + _REFS_CASES,
    "refs_model": """
        Paper 2 (Li et al., 2026), its high-dimensional experiments; book: ``chapters/06_high_dimensional.md``,
        equation (eq-hd-model).
    """,
}


# ---------------------------------------------------------------------------------------------
# matrix recipes (after the authors' high-dimensional app [R])
# ---------------------------------------------------------------------------------------------


def _readonly(M) -> np.ndarray:
    M = np.array(M, dtype=complex if np.iscomplexobj(M) else float, copy=True)
    M.flags.writeable = False
    return M


@fill_doc(_DOC)
@dataclass(frozen=True, eq=False)
class MatrixCase:
    r"""A pair :math:`(A, V)` of d x d matrices made by one of the recipes of the authors' app [R].

    Attributes
    ----------
    name : str
        ``"case1"`` (V = I), ``"case2"`` (A = I, V symmetric), ``"case3"`` (A = I, V block
        rotations), ``"case4"`` (A = I, V block "near-skew") or ``"random"``.
    A, V : array (d, d)
        Score matrix (the score is :math:`\langle x, Ay\rangle`) and value matrix, read-only.
    params : dict
        The recipe's parameters (plain numbers and strings), including ``d`` and ``seed``.
    spectrum : array
        What the recipe promises: the eigenvalues of :math:`\mathrm{sym}(A)` (Case 1), of
        :math:`V` (Case 2), or the 2 x 2 block (Cases 3, 4: its eigenvalues, complex); empty for
        ``random``.
    label : str
        A short reader-facing name for tables, legends and panel titles (plain text, no TeX), e.g.
        ``"Case 2, λ₁ = 2"``.
    description : str
        What the recipe draws, in words (plain text), e.g. ``"A = I, V symmetric with top
        eigenvalue 2"``.

    References
    ----------
    %(refs_app)s
    """

    name: str
    A: np.ndarray
    V: np.ndarray
    params: dict
    spectrum: np.ndarray
    label: str
    description: str = ""

    @property
    def d(self) -> int:
        """The dimension of the tokens."""
        return self.A.shape[0]

    @fill_doc(_DOC)
    def layer(self, kind: str, beta: float = 1.0) -> Attention:
        """The attention layer of this case: ``Attention(kind, A=A, V=V, beta=beta)``.

        Parameters
        ----------
        kind : str
            The attention variant, one of :data:`VARIANTS` (linear, unnormalised softmax, softmax).
        %(beta)s

        Returns
        -------
        Attention
            A new layer with this case's :math:`A` and :math:`V` (``kind`` and ``beta`` are checked there).
        """
        return Attention(kind, A=self.A, V=self.V, beta=beta)


def _orthogonal(d: int, rng: np.random.Generator) -> np.ndarray:
    """A Haar-random orthogonal matrix (``scipy.stats.ortho_group``) drawn from ``rng``."""
    return ortho_group.rvs(d, random_state=rng)


@fill_doc(_DOC)
def case1(d: int, spectrum="positive", *, skew_scale: float = 0.5, seed: int = 42) -> MatrixCase:
    r"""Case 1 (after the authors' app [R]): :math:`V=I`,
    :math:`A=Q\,\mathrm{diag}(\lambda)\,Q^\top+0.2\,s\,(P-P^\top)`.

    :math:`Q` is Haar-orthogonal, :math:`P_{ij}\sim N(0,1)`, :math:`s` = ``skew_scale``. The skew
    part does not change the symmetric part, so :math:`\mathrm{sym}(A)` has exactly the eigenvalues
    :math:`\lambda` (stored in ``spectrum``, decreasing). ``spectrum`` is

    * ``"positive"``: :math:`\lambda_i\sim U(0.5,2)`, :math:`\mathrm{sym}(A)\succ0` (tr A > 0);
    * ``"mixed"``: one :math:`p\sim U(0.3,0.8)` and :math:`d-1` values
      :math:`-U(p/(d-1.5),\,1.5p/(d-1.5))`, so tr A :math:`\le 0` (the app's "tr ≤ 0, det ≤ 0" regime);
    * ``"negative"``: :math:`\lambda_i\sim -U(0.5,2)`, :math:`\mathrm{sym}(A)\prec0`;
    * an array of d numbers: those eigenvalues.

    Parameters
    ----------
    %(d)s
    spectrum : str or array (d,)
        As above.
    skew_scale : float
        :math:`s`.
    seed : int
        Seed of :math:`Q` and :math:`P`.

    %(recipe_sections)s
    """
    d = validate_dimension(d)
    s = validate_finite(skew_scale, "skew_scale")
    rng = np.random.default_rng(validate_count(seed, "seed", minimum=0))
    Q = _orthogonal(d, rng)
    shape = spectrum if isinstance(spectrum, str) else "given"
    if isinstance(spectrum, str):
        if spectrum == "positive":
            lam = rng.uniform(0.5, 2.0, size=d)
        elif spectrum == "negative":
            lam = -rng.uniform(0.5, 2.0, size=d)
        elif spectrum == "mixed":
            if d < 3:
                raise ValueError("the 'mixed' spectrum needs d >= 3")
            p = rng.uniform(0.3, 0.8)
            lo = p / (d - 1.5)
            lam = np.concatenate([[p], -rng.uniform(lo, 1.5 * lo, size=d - 1)])
        else:
            raise ValueError(f"spectrum must be 'positive', 'mixed', 'negative' or an array, got {spectrum!r}")
    else:
        lam = validate_finite_array(spectrum, "spectrum")
        if lam.shape != (d,):
            raise ValueError(f"spectrum must be {d} finite numbers, got shape {lam.shape}")
    P = rng.standard_normal((d, d))
    A = (Q * lam) @ Q.T + 0.2 * s * (P - P.T)
    label, words = {
        "positive": ("Case 1, sym(A) ≻ 0", "positive definite"),
        "mixed": ("Case 1, sym(A) indefinite", "indefinite with one positive eigenvalue and tr A < 0"),
        "negative": ("Case 1, sym(A) ≺ 0", "negative definite"),
    }.get(shape, ("Case 1, given spectrum", "with the given eigenvalues"))
    return MatrixCase(
        "case1",
        _readonly(A),
        _readonly(np.eye(d)),
        {"d": d, "spectrum": shape, "skew_scale": s, "seed": seed},
        _readonly(np.sort(lam)[::-1]),
        label,
        f"V = I, A with symmetric part {words} plus a random skew part",
    )


@fill_doc(_DOC)
def case2(d: int, top: float = 2.0, *, spread: float = 0.5, seed: int = 42) -> MatrixCase:
    r"""Case 2 (after the authors' app [R]): :math:`A=I`, :math:`V=Q\,\mathrm{diag}(\lambda)\,Q^\top` symmetric
    with top eigenvalue exactly :math:`\lambda_1` = ``top``.

    The other eigenvalues are :math:`N(0,\mathrm{spread}^2)` clipped to
    :math:`[-0.9\lambda_1, 0.9\lambda_1]` if :math:`\lambda_1>0`; if :math:`\lambda_1\le0` they are
    :math:`\lambda_1-g-|N(0,\mathrm{spread}^2)|` with gap :math:`g=0.1\max(|\lambda_1|,0.1)`, so
    :math:`V` is negative definite (semi-definite if :math:`\lambda_1=0`) and :math:`\lambda_1` stays
    on top.

    Parameters
    ----------
    %(d)s
    top : float
        :math:`\lambda_1`.
    spread : float
        Standard deviation of the other eigenvalues.
    seed : int
        Seed of :math:`Q` and the eigenvalues.

    %(recipe_sections)s
    """
    d = validate_dimension(d)
    top = validate_finite(top, "top")
    spread = validate_positive(spread, "spread", allow_zero=True)
    rng = np.random.default_rng(validate_count(seed, "seed", minimum=0))
    Q = _orthogonal(d, rng)
    others = rng.normal(0.0, spread, size=d - 1)
    if top > 0:
        others = np.clip(others, -0.9 * top, 0.9 * top)
    else:
        others = top - 0.1 * max(abs(top), 0.1) - np.abs(others)
    lam = np.concatenate([[top], others])
    V = (Q * lam) @ Q.T
    V = 0.5 * (V + V.T)
    return MatrixCase(
        "case2",
        _readonly(np.eye(d)),
        _readonly(V),
        {"d": d, "top": top, "spread": spread, "seed": seed},
        _readonly(np.sort(lam)[::-1]),
        f"Case 2, λ₁ = {top:g}",
        f"A = I, V symmetric with top eigenvalue {top:g}",
    )


def _block_diag(d: int, block: np.ndarray, last: float, seed, first: np.ndarray | None = None) -> np.ndarray:
    """d x d block-diagonal matrix of 2 x 2 copies of ``block`` (``first`` in the top-left slot if given), ``last``
    in the corner if d is odd, conjugated by a Haar-orthogonal matrix drawn with ``seed`` unless it is None."""
    V = np.zeros((d, d))
    for i in range(0, d - 1, 2):
        V[i : i + 2, i : i + 2] = block
    if first is not None:
        V[:2, :2] = first
    if d % 2:
        V[-1, -1] = last
    if seed is not None:
        Q = _orthogonal(d, np.random.default_rng(validate_count(seed, "seed", minimum=0)))
        V = Q @ V @ Q.T
    return V


def _block_args(d, a, b) -> tuple[int, float, float]:
    """The checked dimension and block entries of Cases 3 and 4."""
    return validate_dimension(d), validate_finite(a, "a"), validate_finite(b, "b")


@fill_doc(_DOC)
def case3(d: int, a: float = 1.0, b: float = 0.5, *, seed: int | None = None) -> MatrixCase:
    r"""Case 3 (after the authors' app [R]): :math:`A=I`, :math:`V` block-diagonal with blocks
    :math:`\begin{pmatrix}a&b\\-b&a\end{pmatrix}` (:math:`a` in the last slot if d is odd).

    In d = 2 this is the conformal case of the planar theory (``chapters/05_kuramoto_regimes.md``):
    :math:`a>0` gives clusters, rotating if :math:`b\ne0`. With a ``seed`` the blocks are conjugated by a
    Haar-orthogonal matrix (same spectrum, generic orientation); without one (default) V is
    block-diagonal as in the app.

    Parameters
    ----------
    %(block_params)s
    seed : int, optional
        Seed of the orthogonal conjugation.

    %(recipe_sections)s
    """
    d, a, b = _block_args(d, a, b)
    block = np.array([[a, b], [-b, a]])
    V = _block_diag(d, block, a, seed)
    return MatrixCase(
        "case3",
        _readonly(np.eye(d)),
        _readonly(V),
        {"d": d, "a": a, "b": b, "seed": seed},
        _readonly(np.linalg.eigvals(block)),
        f"Case 3, a = {a:g}, b = {b:g}",
        f"A = I, V with {d // 2} rotation blocks [[a, b], [-b, a]], a = {a:g}, b = {b:g}",
    )


@fill_doc(_DOC)
def case4(d: int, a: float = 1.0, b: float = 0.5, *, seed: int | None = None, dominant: float = 1.0) -> MatrixCase:
    r"""Case 4 (after the authors' app [R]): :math:`A=I`, :math:`V` block-diagonal with traceless blocks
    :math:`\begin{pmatrix}a&b\\-b&-a\end{pmatrix}` (0 in the last slot if d is odd).

    In d = 2 this is the hidden-Hamiltonian family of the planar theory (``chapters/05_kuramoto_regimes.md``,
    equation (eq-hamiltonian); :math:`v_{11}=a`, :math:`v_{12}=b`): oscillation for :math:`|a|<|b|`,
    clusters for :math:`|a|\ge|b|`.

    Parameters
    ----------
    %(block_params)s
    seed : int, optional
        As in :func:`case3`.
    dominant : float
        Multiplies the first block (coordinates 0 and 1): a value above 1 makes one rotation plane
        dominant (oscillations at d = 100); the spectrum stored is that of the other blocks.

    %(recipe_sections)s
    """
    d, a, b = _block_args(d, a, b)
    dominant = validate_finite(dominant, "dominant")
    block = np.array([[a, b], [-b, -a]])
    V = _block_diag(d, block, 0.0, seed, first=dominant * block)
    params = {"d": d, "a": a, "b": b, "seed": seed}
    label = f"Case 4, a = {a:g}, b = {b:g}"
    words = f"A = I, V with {d // 2} traceless blocks [[a, b], [-b, -a]], a = {a:g}, b = {b:g}"
    if dominant != 1.0:
        params["dominant"] = dominant
        label += f", first plane ×{dominant:g}"
        words += f", the first block multiplied by {dominant:g}"
    return MatrixCase(
        "case4",
        _readonly(np.eye(d)),
        _readonly(V),
        params,
        _readonly(np.linalg.eigvals(block.astype(complex))),
        label,
        words,
    )


def near_plane_tokens(n: int, d: int, spread: float = 0.05, rng=None) -> np.ndarray:
    r"""n unit tokens close to the plane of the first two coordinates.

    :math:`x_k=y_k/|y_k|` with :math:`y_k=(\cos\theta_k,\sin\theta_k,\ \text{spread}\cdot\xi_k)`,
    :math:`\theta_k` uniform and :math:`\xi_k\sim N(0,I_{d-2})`: the planar data of chapter 4
    embedded in :math:`\mathbb R^d`, thickened by ``spread`` (a fraction of about
    :math:`(d-2)\,\text{spread}^2` of each token's squared length lies off the plane).

    Parameters
    ----------
    n, d : int
        Number of tokens, dimension (d >= 2).
    spread : float
        Standard deviation of the off-plane coordinates before normalisation.
    rng : seed or Generator
        Random source.

    Returns
    -------
    array (n, d)

    References
    ----------
    Book: ``chapters/06_high_dimensional.md`` (oscillations at d = 100: data near a plane).
    """
    d = validate_dimension(d)
    if d < 2 or int(n) != n or n < 1:
        raise ValueError(f"need n >= 1 tokens in d >= 2 dimensions, got n = {n!r}, d = {d}")
    spread = validate_positive(spread, "spread", allow_zero=True)
    rng = np.random.default_rng(rng)
    theta = rng.uniform(0.0, 2 * np.pi, int(n))
    Y = np.concatenate([np.c_[np.cos(theta), np.sin(theta)], spread * rng.standard_normal((int(n), d - 2))], axis=1)
    return normalize_rows(Y)


@fill_doc(_DOC)
def random_case(d: int, sigma: float = 1.0, *, seed: int = 42) -> MatrixCase:
    r"""Random case (after the authors' app [R]): :math:`A_{ij}, V_{ij}\sim N(0,\sigma^2/d)` i.i.d.

    Parameters
    ----------
    %(d)s
    sigma : float
        :math:`\sigma > 0`.
    seed : int
        Seed.

    %(recipe_sections)s
    """
    d = validate_dimension(d)
    sigma = validate_positive(sigma, "sigma")
    rng = np.random.default_rng(validate_count(seed, "seed", minimum=0))
    A = rng.normal(0.0, sigma / math.sqrt(d), (d, d))
    V = rng.normal(0.0, sigma / math.sqrt(d), (d, d))
    return MatrixCase(
        "random",
        _readonly(A),
        _readonly(V),
        {"d": d, "sigma": sigma, "seed": seed},
        _readonly(np.zeros(0)),
        f"Random, σ = {sigma:g}",
        f"A and V with independent N(0, {sigma:g}²/d) entries",
    )


_RECIPES: dict[str, Callable[..., MatrixCase]] = {
    "case1": case1,
    "case2": case2,
    "case3": case3,
    "case4": case4,
    "random": random_case,
}


@fill_doc(_DOC)
def matrix_case(name: str, d: int, **params) -> MatrixCase:
    """The recipe called ``name`` (one of :data:`CASES`) in dimension d with its parameters.

    Parameters
    ----------
    name : str
        One of :data:`CASES`.
    %(d)s
    **params
        Passed to the recipe (:func:`case1`, ..., :func:`random_case`).

    %(recipe_sections)s

    Examples
    --------
    >>> matrix_case("case4", 4, a=0.5, b=1.0).V[0]
    array([0.5, 1. , 0. , 0. ])
    """
    if not isinstance(name, str) or name not in _RECIPES:
        raise ValueError(f"unknown matrix case {name!r}: name must be one of {CASES}")
    return _RECIPES[name](d, **params)


# ---------------------------------------------------------------------------------------------
# the 2D classification (chapter 5) and its prediction for a high-dimensional case
# ---------------------------------------------------------------------------------------------


#: The planar families whose closed forms give a prediction, as the book names them.
FAMILIES = {
    "case1": "Case 1 (V = I)",
    "case2": "Case 2 (A = I, V symmetric)",
    "case3": "Case 3 (A = I, V a rotation-dilation)",
    "case4": "Case 4 (A = I, V traceless: the hidden Hamiltonian)",
    "identity_A": "A = I, V with diagonal (c + a, c − a) and off-diagonal (b, −b)",
    "random": "generic (A, V): no closed form",
}


@fill_doc(_DOC)
@dataclass(frozen=True)
class CasePrediction:
    """A regime predicted by the d = 2 theory.

    Attributes
    ----------
    regime : str
        One of :data:`CASE_REGIMES`.
    family : str
        The planar family whose closed form was used, as the book names it (:data:`FAMILIES`, plain
        text), e.g. ``"Case 2 (A = I, V symmetric)"``.
    criterion : str
        The criterion and the numbers it was applied to, in words.
    chapter : str
        The book chapter that derives the closed form (a document name, for ``{doc}`` links).

    References
    ----------
    %(refs_cases)s
    """

    regime: str
    family: str
    criterion: str
    chapter: str = "05_kuramoto_regimes"

    def __str__(self) -> str:
        return self.regime


_CASE1_WORDS = {
    "det<=0": ("static_clusters", "det A <= 0: Type 1"),
    "tr>0": ("static_clusters", "tr A > 0: Type 1"),
    "sym_negative_definite": ("partial", "sym(A) negative definite: Type P, |R2| -> |a_-|/|a_+| = {level:.3g}"),
    "bistable": ("bistable", "tr A < 0 < det A, sym(A) indefinite: interior point or boundary, depending on the data"),
    "centre": ("oscillation", "tr A = 0 < det A: centre, Type 3 for data close enough to the interior equilibrium"),
}


def _predict_case1(A):
    """Case 1 without a datum: the region of ``regimes.case1_region``."""

    A = validate_matrix2(A, "A")
    if A.shape != (2, 2):
        raise ValueError(f"Case 1 needs one 2 x 2 matrix A, got shape {A.shape}")
    ap, am = complex_parts(A, "A")
    regime, words = _CASE1_WORDS[case1_region(A)]
    facts = f"tr A = {np.trace(A):.3g}, det A = {np.linalg.det(A):.3g}"
    return CasePrediction(
        regime, FAMILIES["case1"], words.format(level=abs(am) / abs(ap) if ap else np.inf) + f" ({facts})"
    )


def _predict_identity_A(c, a, b, family):
    r"""A = I, V = [[c + a, b], [-b, c - a]] via ``regimes.predict_regime``.

    Cases 3, 4 and the saddle-node family; Case 2 at b = 0.
    """

    if a == 0 and b == 0 and c == 0:
        raise ValueError("V = 0: nothing moves, there is no regime to predict")
    p = predict_regime(Attention("linear", A=np.eye(2), V=np.array([[c + a, b], [-b, c - a]])))
    if p is None:
        return CasePrediction("undetermined", family, "at a bifurcation (degenerate parameters)")
    return CasePrediction(p.regime, family, p.detail)


@fill_doc(_DOC)
def predict_2d_regime(
    case: str,
    *,
    A=None,
    lambda_max: float | None = None,
    a: float | None = None,
    b: float | None = None,
    c: float = 0.0,
    tol: float = 1e-12,
) -> CasePrediction:
    r"""The regime that the d = 2 theory predicts for linear attention, in closed form.

    Regimes: ``static_clusters`` (Type 1), ``rotating_clusters`` (Type 2), ``oscillation``
    (Type 3), ``partial`` (Type P), ``bistable`` (depends on the data), ``undetermined``.

    * ``case="case1"`` (:math:`V=I`), ``A`` a 2 x 2 matrix: :math:`\mathrm{sym}(A)\prec0`
      → partial; else :math:`\operatorname{tr}A>0` or :math:`\det A\le0` → static clusters;
      :math:`\operatorname{tr}A<0<\det A` → bistable; :math:`\operatorname{tr}A=0<\det A` → oscillation
      (a centre).
    * ``case="case2"`` (:math:`A=I`, V symmetric), ``lambda_max``:
      :math:`\lambda_{\max}(V)\ge0` → static clusters, else partial.
    * ``case="case3"``, ``a, b`` (:math:`V=aI+bJ^\top`): :math:`a>0` → rotating clusters if
      :math:`b\ne0` (static if b = 0); :math:`a<0` → partial; :math:`a=0` → oscillation.
    * ``case="case4"``, ``a, b`` (traceless V): :math:`|a|<|b|` → oscillation;
      :math:`|a|\ge|b|` → static clusters.
    * ``case="identity_A"``, ``c, a, b`` (:math:`A=I`, :math:`V=\begin{pmatrix}c+a&b\\-b&c-a\end{pmatrix}`,
      which contains Cases 3 and 4, the saddle-node family): for :math:`|a|<|b|` the sign of c decides rotating
      clusters / oscillation / partial; for :math:`|a|\ge|b|` clusters sit on an eigenvector of V
      when the largest eigenvalue :math:`c+\sqrt{a^2-b^2}` of V is :math:`\ge0`, else partial.
      (This last criterion is our derivation: transverse exponent
      :math:`-\beta(c+\sqrt{a^2-b^2})` at the boundary equilibrium,
      :func:`~tokendynamics.kuramoto.transverse_exponent`; it reduces to Case 2 at b = 0 and is
      tested against 2D particle runs.)
    * ``case="random"`` → undetermined (the planar theory gives only a necessary condition for rotation).

    This is a thin, data-independent layer over the planar theory of
    :mod:`tokendynamics.regimes` (:func:`~tokendynamics.regimes.case1_region` and
    :func:`~tokendynamics.regimes.predict_regime`), so the two chapters share one implementation.

    Parameters
    ----------
    case : str
        ``"case1"``, ``"case2"``, ``"case3"``, ``"case4"``, ``"identity_A"`` or ``"random"``.
    A : array (2, 2), optional
        Case 1's score matrix.
    lambda_max : float, optional
        Case 2's top eigenvalue of V.
    a, b, c : float
        Block parameters (Cases 3, 4 and ``identity_A``).
    tol : float
        Values of ``lambda_max`` within ``tol`` of 0 count as 0.

    %(prediction_sections)s

    Examples
    --------
    >>> predict_2d_regime("case4", a=0.2, b=1.0).regime
    'oscillation'
    """
    if case == "case1":
        if A is None:
            raise ValueError("case1 needs the 2 x 2 matrix A")
        return _predict_case1(A)
    if case == "case2":
        if lambda_max is None:
            raise ValueError("case2 needs lambda_max, the top eigenvalue of the symmetric V")
        lam = validate_finite(lambda_max, "lambda_max")
        lam = 0.0 if abs(lam) <= tol else lam
        # the Case 2 criterion depends on lambda_max only: any symmetric V with that top eigenvalue
        return _predict_identity_A(lam - 0.5, 0.5, 0.0, FAMILIES["case2"])
    if case in ("case3", "case4", "identity_A"):
        if a is None or b is None:
            raise ValueError(f"{case} needs the block parameters a and b")
        a, b = validate_finite(a, "a"), validate_finite(b, "b")
        if case == "case3":
            return _predict_identity_A(a, 0.0, b, FAMILIES["case3"])
        if case == "case4":
            return _predict_identity_A(0.0, a, b, FAMILIES["case4"])
        return _predict_identity_A(validate_finite(c, "c"), a, b, FAMILIES["identity_A"])
    if case == "random":
        return CasePrediction("undetermined", FAMILIES["random"], "no closed-form criterion for generic (A, V)")
    raise ValueError(f"unknown case {case!r}: case must be one of {CASES + ('identity_A',)}")


@fill_doc(_DOC)
def predict_for_case(mc: MatrixCase) -> CasePrediction:
    r"""The 2D prediction for a high-dimensional recipe: the planar criterion applied to its planar analogue.

    * Cases 3 and 4: the 2 x 2 block of V (exact: each block is the 2D model's V).
    * Case 2: the top eigenvalue of V (the Case 2 criterion does not depend on d).
    * Case 1: the compression :math:`A_2=U^\top AU` of A to the plane spanned by the top and bottom
      eigenvectors of :math:`\mathrm{sym}(A)` (so :math:`\mathrm{sym}(A_2)` has the extreme
      eigenvalues of :math:`\mathrm{sym}(A)` and the definiteness tests agree). This choice of plane
      is ours [I]: the authors' recipes name their 2D regime by the same definiteness tests.
    * random: undetermined.

    Parameters
    ----------
    mc : MatrixCase
        A recipe.

    %(prediction_sections)s
    """
    if mc.name == "case1":
        w, U = np.linalg.eigh(0.5 * (mc.A + mc.A.T))
        P = U[:, [-1, 0]]
        return predict_2d_regime("case1", A=P.T @ mc.A @ P)
    if mc.name == "case2":
        return predict_2d_regime("case2", lambda_max=float(np.linalg.eigvalsh(mc.V)[-1]))
    if mc.name in ("case3", "case4"):
        return predict_2d_regime(mc.name, a=mc.params["a"], b=mc.params["b"])
    return predict_2d_regime("random")


# ---------------------------------------------------------------------------------------------
# runs and their summaries
# ---------------------------------------------------------------------------------------------


@fill_doc(_DOC)
@dataclass(frozen=True, eq=False)
class RunSummary:
    r"""What a chapter keeps from one run (the full trajectory is not stored).

    Attributes
    ----------
    case : str
        The recipe's label.
    kind : str
        Attention variant.
    %(beta)s
    t : array (m,)
        Stored times.
    R1, R2 : arrays (m,)
        :math:`\hat R_1(t)`, :math:`\hat R_2(t)` (pair averages of the authors' app [R]).
    lam1 : array (m,)
        Top eigenvalue of :math:`\Sigma(t)`.
    axis : array (m, d)
        Top eigenvector of :math:`\Sigma(t)` (the cluster axis once clustered).
    X0, XT : arrays (n, d)
        Tokens at the first and the last stored time.
    means : array (m, d)
        Per-coordinate mean token value :math:`m_l(t)` (:func:`~tokendynamics.metrics.coordinate_means`).
    planes : complex array (m, d // 2)
        Order parameter of each coordinate plane :math:`(2p, 2p+1)`
        (:func:`~tokendynamics.metrics.plane_order_parameters`): the rotation planes of the block recipes.
    nfev : int
        Evaluations of the field.
    seconds : float
        Wall time of the integration.
    engine : str
        ``"particles"`` (the shared core) or ``"projective"``
        (:func:`~tokendynamics.projective.projective_flow`).

    References
    ----------
    %(refs_model)s
    """

    case: str
    kind: str
    beta: float
    t: np.ndarray
    R1: np.ndarray
    R2: np.ndarray
    lam1: np.ndarray
    axis: np.ndarray
    X0: np.ndarray
    XT: np.ndarray
    means: np.ndarray
    planes: np.ndarray
    nfev: int
    seconds: float
    engine: str

    @property
    def T(self) -> float:
        """The last stored time."""
        return float(self.t[-1])

    def passage(self, levels=(0.1, 0.5, 0.99)) -> np.ndarray:
        """First-passage times of :math:`\\hat R_2` (:func:`~tokendynamics.metrics.first_passage_times`).

        Parameters
        ----------
        levels : sequence of float
            Levels.

        Returns
        -------
        array
        """
        return first_passage_times(self.t, self.R2, levels)

    def clusters(self, threshold: float = 0.999) -> ClusterReport:
        """:func:`~tokendynamics.metrics.detect_clusters` at the final time.

        Parameters
        ----------
        threshold : float
            Link threshold.

        Returns
        -------
        ClusterReport
        """
        return detect_clusters(self.XT, threshold)

    def regime(self, **kw) -> str:
        """:func:`observed_regime` of this run.

        Parameters
        ----------
        **kw
            Passed to :func:`observed_regime`.

        Returns
        -------
        str
        """
        return observed_regime(self.t, self.R2, self.axis, **kw)


def summarize(traj: Trajectory, case: str = "", seconds: float = math.nan, engine: str = "particles") -> RunSummary:
    """Metrics of a trajectory along time: :math:`\\hat R_1,\\hat R_2`, top eigenpair of :math:`\\Sigma`.

    Parameters
    ----------
    traj : Trajectory
        A run of :func:`~tokendynamics.particles.simulate` (or of the projective flow).
    case : str
        The recipe's label.
    seconds : float
        Wall time of the run.
    engine : str
        ``"particles"`` or ``"projective"``.

    Returns
    -------
    RunSummary
        The order parameters, top eigenpair, means and plane order parameters at every stored time,
        and the first and last tokens.

    References
    ----------
    Book: ``chapters/06_high_dimensional.md``, equation (eq-hd-R).
    """
    validate_instance(traj, Trajectory, "traj", "a Trajectory (the result of simulate)")
    R1, R2 = order_parameters(traj.X)
    lam1, axis = top_direction(traj.X)
    lay = traj.layer if isinstance(traj.layer, Attention) else traj.layer(float(traj.t[0]))
    return RunSummary(
        case=case,
        kind=lay.kind,
        beta=lay.beta,
        t=np.asarray(traj.t),
        R1=R1,
        R2=R2,
        lam1=lam1,
        axis=axis,
        X0=traj.X[0].copy(),
        XT=traj.X[-1].copy(),
        means=coordinate_means(traj.X),
        planes=plane_order_parameters(traj.X) if traj.X.shape[-1] >= 2 else np.zeros((len(traj.t), 0), complex),
        nfev=int(traj.info.get("nfev", -1)),
        seconds=float(seconds),
        engine=engine,
    )


@fill_doc(_DOC)
def run_variant(
    mc: MatrixCase,
    kind: str,
    X0,
    T: float,
    *,
    beta: float = 1.0,
    n_eval: int = 201,
    engine: str = "particles",
    solver: str = "RK45",
    rtol: float = 1e-6,
    atol: float = 1e-8,
) -> RunSummary:
    r"""Run one attention variant on one matrix case from tokens X0 up to time T and summarise it.

    ``engine="particles"`` integrates the particle system with the shared core
    (``simulate(X0, mc.layer(kind, beta), T, method="adaptive", sphere=True, ...)``; LA through
    :math:`\Sigma`, USA/SA through the n x n score matrix). ``engine="projective"`` (LA only) uses
    :func:`~tokendynamics.projective.projective_flow`. Default tolerances are those of the authors'
    app (RK45, rtol 1e-6, atol 1e-8).

    Parameters
    ----------
    mc : MatrixCase
        The matrices.
    kind : str
        One of :data:`VARIANTS`.
    X0 : array (n, d)
        Initial unit tokens.
    T : float
        Horizon.
    %(beta)s
    n_eval : int
        Equispaced output times.
    engine : {"particles", "projective"}
        How to integrate.
    solver : str
        ``scipy.integrate`` solver.
    rtol, atol : float
        Tolerances.

    Returns
    -------
    RunSummary
        The run summarised by :func:`summarize`, with its wall time in ``seconds``.

    References
    ----------
    %(refs_model)s
    """
    validate_instance(mc, MatrixCase, "mc", "a MatrixCase (e.g. matrix_case('case2', d))")
    validate_choice(kind, "kind", VARIANTS)
    validate_choice(engine, "engine", ("particles", "projective"))
    layer = mc.layer(kind, beta)
    if engine == "projective":
        layer.kind.require("second_moment", "the projective engine (exact for linear attention only)")
    T = validate_positive(T, "T")
    t_eval = np.linspace(0.0, T, validate_count(n_eval, "n_eval", minimum=2))
    start = time.perf_counter()
    if engine == "projective":
        traj = projective_flow(X0, layer, float(T), t_eval=t_eval, solver=solver, rtol=rtol, atol=atol)
    else:
        traj = simulate(
            X0, layer, float(T), method="adaptive", sphere=True, solver=solver, rtol=rtol, atol=atol, t_eval=t_eval
        )
    seconds = time.perf_counter() - start
    return summarize(traj, mc.label, seconds, engine)


@fill_doc(_DOC)
def observed_regime(
    t,
    R2,
    axis,
    *,
    level: float = 0.99,
    window: float = 0.5,
    rotation_tol: float = 1e-2,
    settle_tol: float = 0.05,
    wiggle: float = 0.02,
) -> str:
    r"""The regime a run shows, named as in the 2D theory, for the comparison table.

    * :math:`\hat R_2(T)>` ``level`` (clusters): the cluster axis is the top eigenvector of
      :math:`\Sigma`; over the stored times after :math:`\hat R_2` first exceeded ``level`` in the
      last ``window`` fraction of the run, ``rotating_clusters`` if it turns faster than
      ``rotation_tol`` radians per unit time on average, ``static_clusters`` otherwise
      (``not_settled`` if fewer than three such times are stored).
    * otherwise, over the last ``window`` fraction: ``oscillation`` if :math:`\hat R_2` changes
      direction at least twice, counting only excursions larger than ``wiggle`` times its mean;
      ``partial`` if its range is below ``settle_tol`` times both its mean and its mean distance to 1
      (it has settled below the clustered value); ``not_settled`` if it is still drifting (run
      longer), e.g. several clusters still merging slowly.

    In d = 100 an "oscillation" is usually damped: this names what the run shows, the 2D prediction
    is in :func:`predict_for_case`.

    Parameters
    ----------
    t : array (m,)
        Stored times.
    R2 : array (m,)
        :math:`\hat R_2(t)`.
    axis : array (m, d)
        Top eigenvector of :math:`\Sigma(t)`.
    level, window, rotation_tol, settle_tol, wiggle : float
        Thresholds of the rules above.

    Returns
    -------
    str
        One of ``static_clusters``, ``rotating_clusters``, ``oscillation``, ``partial``, ``not_settled``.

    References
    ----------
    %(refs_model)s
    """
    t = validate_finite_array(t, "t")
    R2 = validate_finite_array(R2, "R2")
    axis = validate_finite_array(axis, "axis", min_ndim=1)
    level, window = validate_finite(level, "level"), validate_positive(window, "window")
    rotation_tol, settle_tol = (
        validate_positive(rotation_tol, "rotation_tol"),
        validate_positive(settle_tol, "settle_tol"),
    )
    wiggle = validate_positive(wiggle, "wiggle", allow_zero=True)
    if t.ndim != 1 or R2.shape != t.shape or axis.shape[0] != t.size:
        raise ValueError("t, R2 and axis must have the same number of stored times")
    late = t >= t[-1] - window * (t[-1] - t[0])
    if late.sum() < 5:
        raise ValueError("too few stored times in the late window: store more output times")
    if R2[-1] > level:
        sel = late & (np.maximum.accumulate(R2) > level)
        if sel.sum() < 3:
            return "not_settled"
        ts = t[sel]
        speed = float(np.average(axis_speed(ts, axis[sel]), weights=np.diff(ts)))
        return "rotating_clusters" if speed > rotation_tol else "static_clusters"
    r = R2[late]
    scale = max(float(np.mean(r)), 1e-300)
    # turning points of the excursions larger than wiggle * scale (a hysteresis filter)
    turns, direction, anchor = 0, 0, r[0]
    for value in r[1:]:
        step = value - anchor
        if direction >= 0 and step < -wiggle * scale:
            turns += direction > 0
            direction, anchor = -1, value
        elif direction <= 0 and step > wiggle * scale:
            turns += direction < 0
            direction, anchor = 1, value
        elif (direction > 0 and value > anchor) or (direction < 0 and value < anchor):
            anchor = value
    if turns >= 2:
        return "oscillation"
    # settled: the range is small compared with R2 and with its distance 1 - R2 to full clustering
    gap = max(float(np.mean(1.0 - r)), 1e-300)
    if float(r.max() - r.min()) <= settle_tol * min(scale, gap):
        return "partial"
    return "not_settled"


def agreement(predicted: str, observed: str) -> str:
    """Compare a 2D prediction with what a run showed.

    Parameters
    ----------
    predicted : str
        One of :data:`CASE_REGIMES`.
    observed : str
        One of :data:`CASE_REGIMES` or ``"not_settled"``.

    Returns
    -------
    str
        ``"agrees"``, ``"differs"``, ``"undecided"`` (the run has not settled) or ``"no prediction"``
        (undetermined or bistable).

    References
    ----------
    Book: ``chapters/06_high_dimensional.md``.

    Examples
    --------
    >>> agreement("oscillation", "partial")
    'differs'
    """
    for name, value in (("predicted", predicted), ("observed", observed)):
        if value not in CASE_REGIMES + ("not_settled",):
            raise ValueError(f"{name} regime {value!r} is not one of {CASE_REGIMES + ('not_settled',)}")
    if predicted in ("undetermined", "bistable"):
        return "no prediction"
    if observed == "not_settled":
        return "undecided"
    return "agrees" if predicted == observed else "differs"


# ---------------------------------------------------------------------------------------------
# sweeps and the widget
# ---------------------------------------------------------------------------------------------


@fill_doc(_DOC)
def make_case(case: str, d: int, matrix_seed: int = 42, **params) -> MatrixCase:
    """:func:`matrix_case` with one seed for every recipe: Cases 3 and 4 are deterministic
    (block-diagonal, ``matrix_seed`` is not used), the other recipes draw with ``matrix_seed``.

    Parameters
    ----------
    case : str
        One of :data:`CASES`.
    %(d)s
    matrix_seed : int
        Seed of the random recipes.
    **params
        The recipe's parameters.

    Returns
    -------
    MatrixCase

    References
    ----------
    Book: ``chapters/06_high_dimensional.md``.

    Examples
    --------

    >>> make_case("case2", 10, top=1.5).spectrum[0]
    np.float64(1.5)
    """
    if case in ("case3", "case4"):
        return matrix_case(case, d, **params)
    return matrix_case(case, d, seed=matrix_seed, **params)


@fill_doc(_DOC)
def clustering_time(
    case: str = "case2",
    kind: str = "linear",
    *,
    d: int = 100,
    n: int = 200,
    beta: float = 1.0,
    T: float = 200.0,
    level: float = 0.99,
    seed: int = 0,
    matrix_seed: int = 42,
    n_eval: int = 801,
    engine: str = "auto",
    **case_params,
) -> dict[str, Any]:
    r"""First time :math:`t_x` at which :math:`\hat R_2` exceeds ``level``, for one point of a sweep.

    Builds ``make_case(case, d, matrix_seed, **case_params)``, draws n uniform tokens with ``seed``,
    and runs ``kind`` up to T, **stopped by the solver when** :math:`\hat R_2` **reaches the level**
    (a terminal event: :math:`t_x` is located to the solver's accuracy, and no step is spent on the
    clustered state, which is mildly stiff for explicit solvers). ``engine="auto"``: linear
    attention through :func:`~tokendynamics.projective.projective_flow` when :math:`d\le n` (the
    exact d x d reduction), otherwise, and for the other variants, the particle system
    (:func:`~tokendynamics.particles.simulate` with ``stop_when``; RK45, rtol 1e-6 for the softmax
    variants as in the authors' app). A module-level function of plain arguments, so
    :func:`tokendynamics.sweeps.sweep` can ship it to other processes.

    Parameters
    ----------
    case : str
        One of :data:`CASES`.
    kind : str
        One of :data:`VARIANTS`.
    d, n : int
        Dimension and number of tokens.
    %(beta)s
    T : float
        Horizon.
    level : float
        The level of :math:`\hat R_2`.
    seed : int
        Seed of the tokens.
    matrix_seed : int
        Seed of the random recipes.
    n_eval : int
        Kept for compatibility (the event needs no stored times).
    engine : {"auto", "particles", "projective"}
        How to integrate.
    **case_params
        The recipe's parameters.

    Returns
    -------
    dict
        The parameters, ``t_level`` (``inf`` if not reached by T), the last :math:`\hat R_1,\hat R_2`
        (``R1_final``, ``R2_final``), the engine and the wall time.

    References
    ----------
    %(refs_model)s
    """
    validate_choice(kind, "kind", VARIANTS)
    validate_choice(engine, "engine", ("auto", "particles", "projective"))
    T = validate_positive(T, "T")
    level = validate_finite(level, "level")
    n_eval = validate_count(n_eval, "n_eval", minimum=2)
    seed = validate_count(seed, "seed", minimum=0)
    mc = make_case(case, d, matrix_seed, **case_params)
    X0 = sample_sphere(n, d, seed)
    layer = mc.layer(kind, beta)
    if engine == "auto":
        engine = "projective" if (layer.kind.has("second_moment") and d <= n) else "particles"
    if engine == "projective":
        layer.kind.require("second_moment", "the projective engine (exact for linear attention only)")
    start = time.perf_counter()
    if engine == "projective":
        traj = projective_flow(
            X0, layer, float(T), t_eval=[0.0, float(T)], solver="RK45", rtol=1e-8, atol=1e-10, until=level
        )
    else:
        tight = layer.kind.has("second_moment")  # the same accuracy as the projective path
        traj = simulate(
            X0,
            layer,
            float(T),
            method="adaptive",
            sphere=True,
            solver="RK45",
            rtol=1e-8 if tight else 1e-6,
            atol=1e-10 if tight else 1e-8,
            t_eval=[0.0, float(T)],
            stop_when=lambda X: order_parameters(X)[1] - level,
        )
    t_level = traj.info["event_time"]
    R1, R2 = order_parameters(traj.X[-1])
    return {
        "case": case,
        "kind": kind,
        "d": d,
        "n": n,
        "beta": beta,
        "T": T,
        "seed": seed,
        **case_params,
        "t_level": float(t_level),
        "R1_final": float(R1),
        "R2_final": float(R2),
        "engine": engine,
        "seconds": time.perf_counter() - start,
    }


def run_many(jobs, X0, *, n_jobs: int = 1, **kw) -> dict:
    r"""Independent runs of :func:`run_variant`, serially or in parallel (joblib).

    Parameters
    ----------
    jobs : mapping key -> (MatrixCase, kind, T)
        One run per entry, from the same tokens ``X0``.
    X0 : array (n, d)
        Initial unit tokens.
    n_jobs : int
        1: in this process; otherwise joblib workers (``-1``: every core). The runs are independent,
        so the results do not depend on ``n_jobs``.
    **kw
        Passed to :func:`run_variant` (``beta``, ``n_eval``, ``rtol``, ``atol``, ``engine``, ...).

    Returns
    -------
    dict
        key -> :class:`RunSummary`, in the order of ``jobs``.

    References
    ----------
    Paper 2 (Li et al., 2026), its high-dimensional experiments; book: ``chapters/06_high_dimensional.md``.
    """
    keys = list(jobs)
    if int(n_jobs) == 1:
        return {k: run_variant(jobs[k][0], jobs[k][1], X0, jobs[k][2], **kw) for k in keys}
    from joblib import Parallel, delayed

    out = Parallel(n_jobs=int(n_jobs))(delayed(run_variant)(jobs[k][0], jobs[k][1], X0, jobs[k][2], **kw) for k in keys)
    return dict(zip(keys, out))


def case_parameters(
    case: str,
    *,
    spectrum="positive",
    top: float = 2.0,
    a: float = 1.0,
    b: float = 0.5,
    skew_scale: float = 0.5,
    sigma: float = 1.0,
) -> dict[str, Any]:
    """The parameters that recipe ``case`` uses, picked from one flat set of knobs (for widgets).

    Parameters
    ----------
    case : str
        One of :data:`CASES`.
    spectrum, skew_scale : str or array, float
        Case 1's knobs.
    top : float
        Case 2's top eigenvalue.
    a, b : float
        Cases 3 and 4's block entries.
    sigma : float
        The random case's scale.

    Returns
    -------
    dict
        The keyword arguments of the recipe.

    References
    ----------
    Book: ``chapters/06_high_dimensional.md``.

    Examples
    --------
    >>> case_parameters("case3", a=0.5)
    {'a': 0.5, 'b': 0.5}
    """
    table = {
        "case1": {"spectrum": spectrum, "skew_scale": skew_scale},
        "case2": {"top": top},
        "case3": {"a": a, "b": b},
        "case4": {"a": a, "b": b},
        "random": {"sigma": sigma},
    }
    if not isinstance(case, str) or case not in table:
        raise ValueError(f"unknown matrix case {case!r}: case must be one of {CASES}")
    return table[case]
