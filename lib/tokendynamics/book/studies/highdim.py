r"""The high-dimensional chapter's study: do the two-dimensional regimes of paper 2 persist at d = 100?

Tokens on :math:`\mathbb S^{d-1}` move by linear (LA), unnormalised softmax (USA) or softmax (SA)
attention (paper 2, Li et al. 2026; ``chapters/06_high_dimensional.md``, equation (eq-hd-model)),
through the library's :func:`~tokendynamics.particles.simulate` (``sphere=True``) or, for LA, its
exact projective reduction :func:`~tokendynamics.projective.projective_flow`. This module holds what
exists for that chapter:

* the **matrix recipes** of the authors' high-dimensional app [R] (:func:`case1` … :func:`case4`,
  :func:`random_case`, one entry :func:`make_case`), each a :class:`MatrixCase` with the spectrum it
  promises;
* the **2D prediction** of the planar theory (``chapters/05_kuramoto_regimes.md``) for a recipe,
  :func:`predict_2d_regime` and :func:`predict_for_case`, and the regime a run shows,
  :func:`observed_regime`, compared by :func:`agreement`;
* runs and their summaries: :func:`run_variant`, :func:`summarize`, :func:`run_many`, and one point
  of a sweep, :func:`clustering_time`;
* the damping of the Case 4 oscillation against n: :func:`swing_half_time`, :func:`desync_times`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import ortho_group

from ...attention import Attention
from ...kuramoto import complex_parts
from ...metrics import (
    axis_speed,
    coordinate_means,
    detect_clusters,
    first_passage_times,
    order_parameters,
    plane_order_parameters,
    top_direction,
    window_ranges,
)
from ...particles import Trajectory, normalize_rows, sample_sphere, simulate
from ...projective import projective_flow
from ...regimes import case1_region, predict_regime
from ...validation import (
    validate_choice,
    validate_count,
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
    "FAMILIES",
    "MatrixCase",
    "case1",
    "case2",
    "case3",
    "case4",
    "random_case",
    "make_case",
    "case_parameters",
    "near_plane_tokens",
    "CasePrediction",
    "predict_2d_regime",
    "predict_for_case",
    "observed_regime",
    "plane_motion",
    "agreement",
    "RunSummary",
    "summarize",
    "run_variant",
    "run_many",
    "clustering_time",
    "swing_half_time",
    "desync_times",
]

#: Names of the matrix recipes of the authors' app (:func:`make_case`).
CASES = ("case1", "case2", "case3", "case4", "random")
#: The attention variants compared (``Attention`` kinds): LA, USA, SA.
VARIANTS = ("linear", "unnormalized_softmax", "softmax")
#: Regime names shared with the d = 2 theory, plus ``bistable`` (Case 1 with tr A < 0 < det A: the
#: outcome depends on the data) and ``undetermined`` (no closed form).
CASE_REGIMES = ("static_clusters", "rotating_clusters", "oscillation", "partial", "bistable", "undetermined")
#: The planar families whose closed forms give a prediction, as the book names them.
FAMILIES = {
    "case1": "Case 1 (V = I)",
    "case2": "Case 2 (A = I, V symmetric)",
    "case3": "Case 3 (A = I, V a rotation-dilation)",
    "case4": "Case 4 (A = I, V traceless: the hidden Hamiltonian)",
    "identity_A": "A = I, V with diagonal (c + a, c − a) and off-diagonal (b, −b)",
    "random": "generic (A, V): no closed form",
}


# ---------------------------------------------------------------------------------------------
# matrix recipes (after the authors' high-dimensional app [R])
# ---------------------------------------------------------------------------------------------


def _readonly(M) -> np.ndarray:
    M = np.array(M, dtype=complex if np.iscomplexobj(M) else float, copy=True)
    M.flags.writeable = False
    return M


@dataclass(frozen=True, eq=False)
class MatrixCase:
    r"""A pair :math:`(A, V)` of d x d matrices made by one of the recipes of the authors' app [R].

    Attributes
    ----------
    name : str
        One of :data:`CASES`.
    A, V : array (d, d)
        Score matrix (score :math:`\langle x, Ay\rangle`) and value matrix, read-only.
    params : dict
        The recipe's parameters, including ``d`` and ``seed``.
    spectrum : array
        What the recipe promises: the eigenvalues of :math:`\mathrm{sym}(A)` (Case 1), of :math:`V`
        (Case 2), of the 2 x 2 block (Cases 3, 4); empty for ``random``.
    label, description : str
        A short plain-text name for tables and legends (e.g. ``"Case 2, λ₁ = 2"``), and what the
        recipe draws, in words.
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

    def layer(self, kind: str, beta: float = 1.0) -> Attention:
        """The attention layer ``Attention(kind, A=A, V=V, beta=beta)`` of this case.

        Parameters
        ----------
        kind : str
            One of :data:`VARIANTS`.
        beta : float
            Inverse temperature.

        Returns
        -------
        Attention
        """
        return Attention(kind, A=self.A, V=self.V, beta=beta)


def _rng(seed) -> np.random.Generator:
    return np.random.default_rng(validate_count(seed, "seed", minimum=0))


def _case(name, A, V, params, spectrum, label, words) -> MatrixCase:
    return MatrixCase(name, _readonly(A), _readonly(V), params, _readonly(spectrum), label, words)


def case1(d: int, spectrum="positive", *, skew_scale: float = 0.5, seed: int = 42) -> MatrixCase:
    r"""Case 1 [R]: :math:`V=I`, :math:`A=Q\,\mathrm{diag}(\lambda)\,Q^\top+0.2\,s\,(P-P^\top)`.

    :math:`Q` Haar-orthogonal, :math:`P_{ij}\sim N(0,1)`, :math:`s` = ``skew_scale``, so
    :math:`\mathrm{sym}(A)` has exactly the eigenvalues :math:`\lambda`: ``"positive"``
    :math:`\lambda_i\sim U(0.5,2)`; ``"mixed"`` one :math:`p\sim U(0.3,0.8)` and :math:`d-1` values
    :math:`-U(p/(d-1.5),1.5p/(d-1.5))` (tr A :math:`\le0`); ``"negative"`` :math:`-U(0.5,2)`; or
    the d numbers given.

    Parameters
    ----------
    d : int
        Dimension.
    spectrum : str or array (d,)
        As above.
    skew_scale : float
        :math:`s`.
    seed : int
        Seed of :math:`Q`, :math:`\lambda` and :math:`P`.

    Returns
    -------
    MatrixCase
    """
    d = validate_count(d, "d", minimum=2)
    s = validate_finite(skew_scale, "skew_scale")
    rng = _rng(seed)
    Q = ortho_group.rvs(d, random_state=rng)
    shape = spectrum if isinstance(spectrum, str) else "given"
    if shape == "given":
        lam = validate_finite_array(spectrum, "spectrum")
        if lam.shape != (d,):
            raise ValueError(f"spectrum must be {d} finite numbers, got shape {lam.shape}")
    elif shape == "positive":
        lam = rng.uniform(0.5, 2.0, size=d)
    elif shape == "negative":
        lam = -rng.uniform(0.5, 2.0, size=d)
    elif shape == "mixed":
        if d < 3:
            raise ValueError("the 'mixed' spectrum needs d >= 3")
        p = rng.uniform(0.3, 0.8)
        lam = np.concatenate([[p], -rng.uniform(p / (d - 1.5), 1.5 * p / (d - 1.5), size=d - 1)])
    else:
        raise ValueError(f"spectrum must be 'positive', 'mixed', 'negative' or an array, got {spectrum!r}")
    P = rng.standard_normal((d, d))
    label, words = {
        "positive": ("Case 1, sym(A) ≻ 0", "positive definite"),
        "mixed": ("Case 1, sym(A) indefinite", "indefinite with one positive eigenvalue and tr A < 0"),
        "negative": ("Case 1, sym(A) ≺ 0", "negative definite"),
        "given": ("Case 1, given spectrum", "with the given eigenvalues"),
    }[shape]
    params = {"d": d, "spectrum": shape, "skew_scale": s, "seed": seed}
    A = (Q * lam) @ Q.T + 0.2 * s * (P - P.T)
    words = f"V = I, A with symmetric part {words} plus a random skew part"
    return _case("case1", A, np.eye(d), params, np.sort(lam)[::-1], label, words)


def case2(d: int, top: float = 2.0, *, spread: float = 0.5, seed: int = 42) -> MatrixCase:
    r"""Case 2 [R]: :math:`A=I`, :math:`V=Q\,\mathrm{diag}(\lambda)\,Q^\top` symmetric with top eigenvalue
    :math:`\lambda_1` = ``top``.

    The other eigenvalues are :math:`N(0,\mathrm{spread}^2)` clipped to :math:`\pm0.9\lambda_1` if
    :math:`\lambda_1>0`; otherwise :math:`\lambda_1-0.1\max(|\lambda_1|,0.1)-|N(0,\mathrm{spread}^2)|`
    (so :math:`\lambda_1` stays on top).

    Parameters
    ----------
    d : int
        Dimension.
    top : float
        :math:`\lambda_1`.
    spread : float
        Standard deviation of the other eigenvalues.
    seed : int
        Seed of :math:`Q` and the eigenvalues.

    Returns
    -------
    MatrixCase
    """
    d = validate_count(d, "d", minimum=2)
    top = validate_finite(top, "top")
    spread = validate_positive(spread, "spread", allow_zero=True)
    rng = _rng(seed)
    Q = ortho_group.rvs(d, random_state=rng)
    others = rng.normal(0.0, spread, size=d - 1)
    others = np.clip(others, -0.9 * top, 0.9 * top) if top > 0 else top - 0.1 * max(abs(top), 0.1) - np.abs(others)
    lam = np.concatenate([[top], others])
    V = (Q * lam) @ Q.T
    params = {"d": d, "top": top, "spread": spread, "seed": seed}
    words = f"A = I, V symmetric with top eigenvalue {top:g}"
    return _case("case2", np.eye(d), 0.5 * (V + V.T), params, np.sort(lam)[::-1], f"Case 2, λ₁ = {top:g}", words)


def _blocks(name, d, a, b, seed, sign, dominant=1.0) -> MatrixCase:
    """Cases 3 (sign +1) and 4 (sign -1): V block-diagonal with 2 x 2 blocks [[a, b], [-b, sign a]]."""
    d, a, b = validate_count(d, "d", minimum=2), validate_finite(a, "a"), validate_finite(b, "b")
    block = np.array([[a, b], [-b, sign * a]])
    V = np.zeros((d, d))
    for i in range(0, d - 1, 2):
        V[i : i + 2, i : i + 2] = block
    V[:2, :2] *= dominant
    if d % 2:
        V[-1, -1] = a if sign > 0 else 0.0
    if seed is not None:  # conjugated by a Haar-orthogonal matrix: the same spectrum, a generic orientation
        Q = ortho_group.rvs(d, random_state=_rng(seed))
        V = Q @ V @ Q.T
    params: dict[str, Any] = {"d": d, "a": a, "b": b, "seed": seed}
    label = f"Case {3 if sign > 0 else 4}, a = {a:g}, b = {b:g}"
    blocks = "rotation blocks [[a, b], [-b, a]]" if sign > 0 else "traceless blocks [[a, b], [-b, -a]]"
    words = f"A = I, V with {d // 2} {blocks}, a = {a:g}, b = {b:g}"
    if dominant != 1.0:
        params["dominant"] = dominant
        label += f", first plane ×{dominant:g}"
        words += f", the first block multiplied by {dominant:g}"
    return _case(name, np.eye(d), V, params, np.linalg.eigvals(block.astype(complex)), label, words)


def case3(d: int, a: float = 1.0, b: float = 0.5, *, seed: int | None = None) -> MatrixCase:
    r"""Case 3 [R]: :math:`A=I`, :math:`V` block-diagonal with blocks :math:`\begin{pmatrix}a&b\\-b&a\end{pmatrix}`
    (:math:`a` in the last slot if d is odd).

    In d = 2 the conformal case of the planar theory: :math:`a>0` gives clusters, rotating if :math:`b\ne0`.

    Parameters
    ----------
    d : int
        Dimension.
    a, b : float
        Block entries.
    seed : int, optional
        Seed of a Haar-orthogonal conjugation (none by default, as in the app).

    Returns
    -------
    MatrixCase
    """
    return _blocks("case3", d, a, b, seed, 1.0)


def case4(d: int, a: float = 1.0, b: float = 0.5, *, seed: int | None = None, dominant: float = 1.0) -> MatrixCase:
    r"""Case 4 [R]: :math:`A=I`, :math:`V` block-diagonal with traceless blocks
    :math:`\begin{pmatrix}a&b\\-b&-a\end{pmatrix}` (0 in the last slot if d is odd).

    In d = 2 the hidden-Hamiltonian family (``chapters/05_kuramoto_regimes.md``, equation
    (eq-hamiltonian)): oscillation for :math:`|a|<|b|`, clusters for :math:`|a|\ge|b|`.

    Parameters
    ----------
    d : int
        Dimension.
    a, b : float
        Block entries.
    seed : int, optional
        As in :func:`case3`.
    dominant : float
        Multiplies the first block: above 1, one rotation plane dominates.

    Returns
    -------
    MatrixCase
    """
    return _blocks("case4", d, a, b, seed, -1.0, validate_finite(dominant, "dominant"))


def random_case(d: int, sigma: float = 1.0, *, seed: int = 42) -> MatrixCase:
    r"""Random case [R]: :math:`A_{ij}, V_{ij}\sim N(0,\sigma^2/d)` i.i.d.

    Parameters
    ----------
    d : int
        Dimension.
    sigma : float
        :math:`\sigma > 0`.
    seed : int
        Seed.

    Returns
    -------
    MatrixCase
    """
    d = validate_count(d, "d", minimum=2)
    sigma = validate_positive(sigma, "sigma")
    rng = _rng(seed)
    A, V = rng.normal(0.0, sigma / math.sqrt(d), (2, d, d))
    words = f"A and V with independent N(0, {sigma:g}²/d) entries"
    return _case("random", A, V, {"d": d, "sigma": sigma, "seed": seed}, np.zeros(0), f"Random, σ = {sigma:g}", words)


_RECIPES: dict[str, Callable[..., MatrixCase]] = {
    "case1": case1,
    "case2": case2,
    "case3": case3,
    "case4": case4,
    "random": random_case,
}


def make_case(case: str, d: int, matrix_seed: int = 42, **params) -> MatrixCase:
    """The recipe ``case`` in dimension d: Cases 3 and 4 are deterministic (``matrix_seed`` unused), the
    others draw with ``matrix_seed``.

    Parameters
    ----------
    case : str
        One of :data:`CASES`.
    d : int
        Dimension.
    matrix_seed : int
        Seed of the random recipes.
    **params
        The recipe's parameters.

    Returns
    -------
    MatrixCase

    Examples
    --------
    >>> make_case("case2", 10, top=1.5).spectrum[0]
    np.float64(1.5)
    """
    if not isinstance(case, str) or case not in _RECIPES:
        raise ValueError(f"unknown matrix case {case!r}: case must be one of {CASES}")
    seeded = {} if case in ("case3", "case4") else {"seed": matrix_seed}
    return _RECIPES[case](d, **seeded, **params)


def case_parameters(case: str, *, spectrum="positive", top=2.0, a=1.0, b=0.5, skew_scale=0.5, sigma=1.0) -> dict:
    """The parameters recipe ``case`` uses, picked from one flat set of knobs (for the explorer).

    Parameters
    ----------
    case : str
        One of :data:`CASES`.
    spectrum, skew_scale, top, a, b, sigma
        The knobs of :func:`case1` (``spectrum``, ``skew_scale``), :func:`case2` (``top``), Cases 3
        and 4 (``a``, ``b``) and :func:`random_case` (``sigma``).

    Returns
    -------
    dict
        The keyword arguments of the recipe.

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


def near_plane_tokens(n: int, d: int, spread: float = 0.05, rng=None) -> np.ndarray:
    r"""n unit tokens close to the plane of the first two coordinates.

    :math:`x_k=y_k/|y_k|`, :math:`y_k=(\cos\theta_k,\sin\theta_k,\ \text{spread}\cdot\xi_k)` with
    :math:`\theta_k` uniform and :math:`\xi_k\sim N(0,I_{d-2})`: the planar data thickened by ``spread``.

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
    """
    n, d = validate_count(n, "n"), validate_count(d, "d", minimum=2)
    if d < 2:
        raise ValueError(f"need d >= 2 for tokens near a plane, got d = {d}")
    spread = validate_positive(spread, "spread", allow_zero=True)
    rng = np.random.default_rng(rng)
    theta = rng.uniform(0.0, 2 * np.pi, n)
    return normalize_rows(np.c_[np.cos(theta), np.sin(theta), spread * rng.standard_normal((n, d - 2))])


# ---------------------------------------------------------------------------------------------
# the 2D prediction (chapter 5) for a high-dimensional case
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CasePrediction:
    """A regime predicted by the d = 2 theory.

    Attributes
    ----------
    regime : str
        One of :data:`CASE_REGIMES`.
    family : str
        The planar family whose closed form was used (a value of :data:`FAMILIES`).
    criterion : str
        The criterion and the numbers it was applied to, in words.
    chapter : str
        The chapter that derives the closed form (a document name, for ``{doc}`` links).
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


def _identity_A(c, a, b, family) -> CasePrediction:
    """A = I, V = [[c + a, b], [-b, c - a]] through ``regimes.predict_regime``."""
    if a == 0 and b == 0 and c == 0:
        raise ValueError("V = 0: nothing moves, there is no regime to predict")
    p = predict_regime(Attention("linear", A=np.eye(2), V=np.array([[c + a, b], [-b, c - a]])))
    if p is None:
        return CasePrediction("undetermined", family, "at a bifurcation (degenerate parameters)")
    return CasePrediction(p.regime, family, p.detail)


def predict_2d_regime(case: str, *, A=None, lambda_max=None, a=None, b=None, c: float = 0.0, tol: float = 1e-12):
    r"""The regime the d = 2 theory predicts for linear attention, in closed form.

    * ``"case1"`` (:math:`V=I`), ``A`` 2 x 2: :math:`\mathrm{sym}(A)\prec0` → partial; else
      :math:`\operatorname{tr}A>0` or :math:`\det A\le0` → static clusters;
      :math:`\operatorname{tr}A<0<\det A` → bistable; :math:`\operatorname{tr}A=0<\det A` → oscillation.
    * ``"case2"`` (:math:`A=I`, V symmetric), ``lambda_max``: :math:`\lambda_{\max}(V)\ge0` → static
      clusters, else partial.
    * ``"case3"``, ``a, b``: :math:`a>0` → rotating clusters if :math:`b\ne0` (static if 0);
      :math:`a<0` → partial; :math:`a=0` → oscillation.
    * ``"case4"``, ``a, b``: :math:`|a|<|b|` → oscillation, else static clusters.
    * ``"identity_A"``, ``c, a, b`` (:math:`A=I`, :math:`V=\begin{pmatrix}c+a&b\\-b&c-a\end{pmatrix}`):
      for :math:`|a|<|b|` the sign of c decides rotating clusters / oscillation / partial; for
      :math:`|a|\ge|b|` clusters when :math:`c+\sqrt{a^2-b^2}\ge0`, else partial (our derivation,
      tested against 2D particle runs).
    * ``"random"`` → undetermined.

    A thin layer over :func:`~tokendynamics.regimes.case1_region` and
    :func:`~tokendynamics.regimes.predict_regime`, so the two chapters share one implementation.

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

    Returns
    -------
    CasePrediction

    Examples
    --------
    >>> predict_2d_regime("case4", a=0.2, b=1.0).regime
    'oscillation'
    """
    if case == "case1":
        if A is None:
            raise ValueError("case1 needs the 2 x 2 matrix A")
        A = validate_matrix2(A, "A")
        if A.shape != (2, 2):
            raise ValueError(f"Case 1 needs one 2 x 2 matrix A, got shape {A.shape}")
        ap, am = complex_parts(A, "A")
        regime, words = _CASE1_WORDS[case1_region(A)]
        words = words.format(level=abs(am) / abs(ap) if ap else np.inf)
        facts = f"tr A = {np.trace(A):.3g}, det A = {np.linalg.det(A):.3g}"
        return CasePrediction(regime, FAMILIES["case1"], f"{words} ({facts})")
    if case == "case2":
        if lambda_max is None:
            raise ValueError("case2 needs lambda_max, the top eigenvalue of the symmetric V")
        lam = validate_finite(lambda_max, "lambda_max")
        # the criterion depends on lambda_max only: any symmetric V with that top eigenvalue
        return _identity_A((0.0 if abs(lam) <= tol else lam) - 0.5, 0.5, 0.0, FAMILIES["case2"])
    if case in ("case3", "case4", "identity_A"):
        if a is None or b is None:
            raise ValueError(f"{case} needs the block parameters a and b")
        a, b = validate_finite(a, "a"), validate_finite(b, "b")
        if case == "case3":
            return _identity_A(a, 0.0, b, FAMILIES["case3"])
        if case == "case4":
            return _identity_A(0.0, a, b, FAMILIES["case4"])
        return _identity_A(validate_finite(c, "c"), a, b, FAMILIES["identity_A"])
    if case == "random":
        return CasePrediction("undetermined", FAMILIES["random"], "no closed-form criterion for generic (A, V)")
    raise ValueError(f"unknown case {case!r}: case must be one of {CASES + ('identity_A',)}")


def predict_for_case(mc: MatrixCase) -> CasePrediction:
    r"""The 2D prediction for a high-dimensional recipe: the planar criterion applied to its planar analogue.

    Cases 3 and 4: the 2 x 2 block of V (exact); Case 2: the top eigenvalue of V; Case 1: the
    compression :math:`U^\top AU` of A to the plane of the top and bottom eigenvectors of
    :math:`\mathrm{sym}(A)` (our choice of plane [I]); random: undetermined.

    Parameters
    ----------
    mc : MatrixCase
        A recipe.

    Returns
    -------
    CasePrediction
    """
    if mc.name == "case1":
        U = np.linalg.eigh(0.5 * (mc.A + mc.A.T))[1][:, [-1, 0]]
        return predict_2d_regime("case1", A=U.T @ mc.A @ U)
    if mc.name == "case2":
        return predict_2d_regime("case2", lambda_max=float(np.linalg.eigvalsh(mc.V)[-1]))
    if mc.name in ("case3", "case4"):
        return predict_2d_regime(mc.name, a=mc.params["a"], b=mc.params["b"])
    return predict_2d_regime("random")


def observed_regime(t, R2, axis, *, level=0.99, window=0.5, rotation_tol=1e-2, settle_tol=0.05, wiggle=0.02) -> str:
    r"""The regime a run shows, named as in the 2D theory.

    * :math:`\hat R_2(T)>` ``level`` (clusters): over the stored times of the last ``window``
      fraction after :math:`\hat R_2` first exceeded ``level``, ``rotating_clusters`` if the cluster
      axis turns faster than ``rotation_tol`` radians per unit time on average, else
      ``static_clusters`` (``not_settled`` with fewer than three such times).
    * otherwise, over the last ``window`` fraction: ``oscillation`` if :math:`\hat R_2` changes
      direction at least twice by more than ``wiggle`` times its mean; ``partial`` if its range is
      below ``settle_tol`` times both its mean and its mean distance to 1; else ``not_settled``.

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
        ``static_clusters``, ``rotating_clusters``, ``oscillation``, ``partial`` or ``not_settled``.
    """
    t, R2 = validate_finite_array(t, "t"), validate_finite_array(R2, "R2")
    axis = validate_finite_array(axis, "axis", min_ndim=1)
    if t.ndim != 1 or R2.shape != t.shape or axis.shape[0] != t.size:
        raise ValueError("t, R2 and axis must have the same number of stored times")
    late = t >= t[-1] - window * (t[-1] - t[0])
    if late.sum() < 5:
        raise ValueError("too few stored times in the late window: store more output times")
    if R2[-1] > level:
        sel = late & (np.maximum.accumulate(R2) > level)
        if sel.sum() < 3:
            return "not_settled"
        speed = float(np.average(axis_speed(t[sel], axis[sel]), weights=np.diff(t[sel])))
        return "rotating_clusters" if speed > rotation_tol else "static_clusters"
    r = R2[late]
    scale = max(float(np.mean(r)), 1e-300)
    turns, direction, anchor = 0, 0, r[0]  # turning points of excursions above wiggle * scale (hysteresis)
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
    if float(r.max() - r.min()) <= settle_tol * min(scale, max(float(np.mean(1.0 - r)), 1e-300)):
        return "partial"
    return "not_settled"


def plane_motion(r, *, level=0.99, window=0.5, swing=0.3, turn=0.5, fit_tol=0.05) -> str:
    r"""Tell clustering, rigid rotation and oscillation apart, plane by plane of :math:`V`.

    In each coordinate plane :math:`p` (the rotation planes of the unconjugated block recipes: their
    real Schur form) the tokens give two harmonics, the plane mean :math:`\mu_p=\frac1n\sum_kw_k`
    and :math:`z_p=\sum_kw_k^2/\sum_k|w_k|^2` (:math:`w_k=x_k^{(2p)}+\mathrm i\,x_k^{(2p+1)}`).
    The signal is :math:`z_p` if the run has clustered (median :math:`|z_p(T)|>` ``level``), else
    :math:`\mu_p`. Over the last ``window`` fraction, with medians over the planes: ``oscillation``
    if the modulus swings (range over mean above ``swing``); else, if the unwrapped phase turns by
    more than ``turn`` radians and a straight line fits it to ``fit_tol`` of that turn, rigid
    rotation (``rotating_clusters`` or ``rotation``); else ``static_clusters`` or ``rest``. A
    rotation keeps the modulus and turns the phase at a constant rate, so the coordinate means
    swing under it (:func:`~tokendynamics.metrics.coordinate_means`) but :math:`|\mu_p|` does not.

    Parameters
    ----------
    r : RunSummary
        A run (its ``t``, ``planes`` and ``means``).
    level, window, swing, turn, fit_tol : float
        Thresholds of the rules above.

    Returns
    -------
    str
        ``static_clusters``, ``rotating_clusters``, ``rotation``, ``oscillation`` or ``rest``.

    References
    ----------
    Paper 2 (Li et al., 2026), the high-dimensional Cases 3 and 4; book: ``chapters/06_high_dimensional.md``.
    """
    validate_instance(r, RunSummary, "r", "a RunSummary (the result of run_variant)")
    late = r.t >= r.t[-1] - window * (r.t[-1] - r.t[0])
    P = r.planes.shape[1]
    clustered = float(np.median(np.abs(r.planes[-1]))) > level
    w = (r.planes if clustered else r.means[:, 0 : 2 * P : 2] + 1j * r.means[:, 1 : 2 * P : 2])[late]
    m, phase, tl = np.abs(w), np.unwrap(np.angle(w), axis=0), r.t[late]
    if float(np.median(np.ptp(m, axis=0) / np.maximum(m.mean(axis=0), 1e-300))) > swing:
        return "oscillation"
    slope, icpt = np.polyfit(tl, phase, 1)
    turned = float(np.median(np.abs(slope))) * (tl[-1] - tl[0])
    misfit = float(np.median(np.std(phase - (slope * tl[:, None] + icpt), axis=0)))
    if turned > turn and misfit < fit_tol * turned:
        return "rotating_clusters" if clustered else "rotation"
    return "static_clusters" if clustered else "rest"


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
        ``"agrees"``, ``"differs"``, ``"undecided"`` (the run has not settled) or ``"no prediction"``.

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
# runs and their summaries
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class RunSummary:
    r"""What the chapter keeps from one run (the full trajectory is not stored).

    Attributes
    ----------
    case, kind : str
        The recipe's label and the attention variant.
    beta : float
        Inverse temperature.
    t : array (m,)
        Stored times.
    R1, R2, lam1 : arrays (m,)
        :math:`\hat R_1`, :math:`\hat R_2` and the top eigenvalue of :math:`\Sigma` at each time.
    axis : array (m, d)
        Top eigenvector of :math:`\Sigma(t)` (the cluster axis once clustered).
    X0, XT : arrays (n, d)
        Tokens at the first and the last stored time.
    means : array (m, d)
        :func:`~tokendynamics.metrics.coordinate_means`.
    planes : complex array (m, d // 2)
        :func:`~tokendynamics.metrics.plane_order_parameters` of the planes :math:`(2p, 2p+1)`.
    nfev : int
        Evaluations of the field.
    seconds : float
        Wall time of the integration.
    engine : str
        ``"particles"`` or ``"projective"``.
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

    def clusters(self, threshold: float = 0.999):
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
    """The order parameters, top eigenpair, coordinate means and plane order parameters of a run, at every
    stored time, and its first and last tokens.

    Parameters
    ----------
    traj : Trajectory
        A run of :func:`~tokendynamics.particles.simulate` or of the projective flow.
    case : str
        The recipe's label.
    seconds : float
        Wall time of the run.
    engine : str
        ``"particles"`` or ``"projective"``.

    Returns
    -------
    RunSummary
    """
    validate_instance(traj, Trajectory, "traj", "a Trajectory (the result of simulate)")
    R1, R2 = order_parameters(traj.X)
    lam1, axis = top_direction(traj.X)
    lay = traj.layer if isinstance(traj.layer, Attention) else traj.layer(float(traj.t[0]))
    return RunSummary(
        case=case,
        kind=lay.kind.name,
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
    r"""One attention variant on one matrix case from tokens X0 up to time T, summarised (:func:`summarize`).

    ``engine="particles"``: :func:`~tokendynamics.particles.simulate` (adaptive, ``sphere=True``);
    ``"projective"`` (LA only): :func:`~tokendynamics.projective.projective_flow`. The default
    tolerances are those of the authors' app (RK45, rtol 1e-6, atol 1e-8).

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
    beta : float
        Inverse temperature.
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
        With the wall time of the run in ``seconds``.
    """
    validate_instance(mc, MatrixCase, "mc", "a MatrixCase (e.g. make_case('case2', d))")
    validate_choice(kind, "kind", VARIANTS)
    validate_choice(engine, "engine", ("particles", "projective"))
    layer = mc.layer(kind, beta)
    T = validate_positive(T, "T")
    t_eval = np.linspace(0.0, T, validate_count(n_eval, "n_eval", minimum=2))
    start = time.perf_counter()
    if engine == "projective":
        traj = projective_flow(X0, layer, T, t_eval=t_eval, solver=solver, rtol=rtol, atol=atol)
    else:
        traj = simulate(
            X0, layer, T, method="adaptive", sphere=True, solver=solver, rtol=rtol, atol=atol, t_eval=t_eval
        )
    return summarize(traj, mc.label, time.perf_counter() - start, engine)


def run_many(jobs, X0, *, n_jobs: int = 1, **kw) -> dict:
    """Independent runs of :func:`run_variant` from the same tokens, serially or on joblib workers.

    Parameters
    ----------
    jobs : mapping key -> (MatrixCase, kind, T)
        One run per entry.
    X0 : array (n, d)
        Initial unit tokens.
    n_jobs : int
        1: in this process; otherwise joblib workers (``-1``: every core); the results do not depend on it.
    **kw
        Passed to :func:`run_variant`.

    Returns
    -------
    dict
        key -> :class:`RunSummary`, in the order of ``jobs``.
    """
    from joblib import Parallel, delayed

    keys = list(jobs)
    out = Parallel(n_jobs=int(n_jobs))(delayed(run_variant)(jobs[k][0], jobs[k][1], X0, jobs[k][2], **kw) for k in keys)
    return dict(zip(keys, out))


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
    engine: str = "auto",
    **case_params,
) -> dict[str, Any]:
    r"""First time :math:`t_x` at which :math:`\hat R_2` exceeds ``level``: one point of a sweep.

    Builds ``make_case(case, d, matrix_seed, **case_params)``, draws n uniform tokens with ``seed``
    and runs ``kind`` up to T, stopped by a terminal event when :math:`\hat R_2` reaches the level.
    ``engine="auto"``: LA through :func:`~tokendynamics.projective.projective_flow` when
    :math:`d\le n`, else the particle system (RK45; rtol 1e-8 for LA, 1e-6 for the softmax variants
    as in the authors' app). A module-level function of plain arguments, so that
    :func:`tokendynamics.sweeps.sweep` can ship it to other processes.

    Parameters
    ----------
    case : str
        One of :data:`CASES`.
    kind : str
        One of :data:`VARIANTS`.
    d, n : int
        Dimension and number of tokens.
    beta : float
        Inverse temperature.
    T : float
        Horizon.
    level : float
        The level of :math:`\hat R_2`.
    seed, matrix_seed : int
        Seeds of the tokens and of the random recipes.
    engine : {"auto", "particles", "projective"}
        How to integrate.
    **case_params
        The recipe's parameters.

    Returns
    -------
    dict
        The parameters, ``t_level`` (``inf`` if not reached by T), ``R1_final``, ``R2_final``, the
        engine and the wall time ``seconds``.
    """
    validate_choice(kind, "kind", VARIANTS)
    validate_choice(engine, "engine", ("auto", "particles", "projective"))
    T, level = validate_positive(T, "T"), validate_finite(level, "level")
    layer = make_case(case, d, matrix_seed, **case_params).layer(kind, beta)
    X0 = sample_sphere(n, d, validate_count(seed, "seed", minimum=0))
    linear = layer.kind.has("second_moment")
    if engine == "auto":
        engine = "projective" if linear and d <= n else "particles"
    start = time.perf_counter()
    if engine == "projective":
        traj = projective_flow(X0, layer, T, t_eval=[0.0, T], solver="RK45", rtol=1e-8, atol=1e-10, until=level)
    else:
        rtol, atol = (1e-8, 1e-10) if linear else (1e-6, 1e-8)  # LA: the accuracy of the projective path
        stop = lambda X: order_parameters(X)[1] - level  # noqa: E731
        kw = dict(method="adaptive", sphere=True, solver="RK45", rtol=rtol, atol=atol, t_eval=[0.0, T], stop_when=stop)
        traj = simulate(X0, layer, T, **kw)  # type: ignore[arg-type]
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
        "t_level": float(traj.info["event_time"]),
        "R1_final": float(R1),
        "R2_final": float(R2),
        "engine": engine,
        "seconds": time.perf_counter() - start,
    }


def swing_half_time(t, y, window: float) -> float:
    r"""The start of the first window of length ``window`` whose range of y is below half that of the first.

    :math:`t_{1/2}=\min\{s_j:\ \mathrm{ptp}_{[s_j,s_j+W]}y<\tfrac12\,\mathrm{ptp}_{[s_0,s_0+W]}y\}` over
    consecutive windows (:func:`~tokendynamics.metrics.window_ranges`): when a swing has halved.

    Parameters
    ----------
    t, y : arrays (m,)
        Stored times and a signal.
    window : float
        Window length W (about one period of the oscillation, or less, to resolve the damping).

    Returns
    -------
    float
        :math:`t_{1/2}`, ``inf`` if the swing never halves.

    References
    ----------
    Book: ``chapters/06_high_dimensional.md`` (oscillations at d = 100).
    """
    starts, ranges = window_ranges(t, y, window)
    below = np.nonzero(ranges < 0.5 * ranges[0])[0]
    return float(starts[below[0]]) if below.size else math.inf


def desync_times(kind, ns, seeds, *, d=100, a=0.5, b=1.0, T=400.0, window=50.0, n_eval=801) -> np.ndarray:
    r"""When the Case 4 oscillation of :math:`\hat R_2` has halved, for each number of tokens and seed.

    Uniform tokens (``sample_sphere(n, d, seed)``) under :func:`case4` (a, b) with ``kind`` up to T;
    :func:`swing_half_time` of :math:`\hat R_2/\langle\hat R_2\rangle`: the planes drifting out of step.

    Parameters
    ----------
    kind : str
        One of :data:`VARIANTS`.
    ns, seeds : sequences of int
        Numbers of tokens and token seeds.
    d, a, b, T, window, n_eval
        Dimension, block entries, horizon, window length, stored times.

    Returns
    -------
    array (len(ns), len(seeds))
        :math:`t_{1/2}` (``inf`` where the swing never halves by T).

    References
    ----------
    Paper 2 (Li et al., 2026), the high-dimensional Case 4; book: ``chapters/06_high_dimensional.md``.
    """
    mc = case4(d, a, b)
    runs = ((run_variant(mc, kind, sample_sphere(n, d, s), T, n_eval=n_eval) for s in seeds) for n in ns)
    return np.array([[swing_half_time(r.t, r.R2 / r.R2.mean(), window) for r in row] for row in runs])
