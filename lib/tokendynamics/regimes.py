r"""Regimes of linear attention on the circle: closed-form predictions and an Ott–Antonsen classifier (paper 2).

Names (paper 2, Li et al. 2026; the "Types" of its published summary):

=========================  ========  ==============================================================
name                       Type      long-time behaviour of :math:`R_2` (OA centre :math:`z`)
=========================  ========  ==============================================================
``"static_clusters"``      1         :math:`|z|\to1`, :math:`\arg z` converges: static antipodal clusters
``"rotating_clusters"``    2         :math:`|z|\to1`, :math:`\arg z` keeps turning: rotating clusters
``"oscillation"``          3         :math:`|z|<1` oscillates (periodic orbits)
``"partial"``              P         :math:`z\to z^*`, :math:`|z^*|<1`: partial clustering
=========================  ========  ==============================================================

:func:`predict_regime` gives the closed forms of paper 2's cases where a case applies (Case 1
:math:`V=I`; Case 2 :math:`A=I`, :math:`V` symmetric; the rotating family
:math:`A\succ0`, :math:`V=cI+sJ`; the hidden Hamiltonian :math:`A=I`, :math:`\operatorname{tr}V=0`;
the SNIC family :math:`A=I`), :func:`classify_regime` decides from a long Ott–Antonsen run.
The statements are our derivations made to match the paper's claims; the paper's exact
theorem hypotheses are [I].

References
----------
Paper 2: S. Li et al., *On the Diverse Dynamical Behaviors Arising in Deep Linear Transformers* (2026),
the cases and regimes. Book: ``chapters/05_kuramoto_regimes.md``, equations (eq-case1), (eq-case2-limit),
(eq-rot-period) and (eq-hamiltonian).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import brentq

from .docstrings import fill_doc
from .kuramoto import cluster_velocity, coefficients, complex_parts
from .ott_antonsen import OAPolynomial, hamiltonian_centre, solve_ott_antonsen
from .validation import (
    PARAMETER_DOCS,
    validate_beta,
    validate_complex,
    validate_count,
    validate_finite,
    validate_finite_array,
    validate_flag,
    validate_matrix2,
    validate_positive,
)

__all__ = [
    "REGIMES",
    "TYPES",
    "Prediction",
    "predict_regime",
    "case1_region",
    "case1_period",
    "case1_matrix",
    "snic_family",
    "classify_regime",
    "RegimeClassification",
    "rotation_period",
    "sampled_period",
    "RegimeExample",
    "REGIME_TABLE",
    "Portrait",
    "regime_portrait",
]

#: The four regime names, in the order of the paper's Types 1, 2, 3 and P.
REGIMES = ("static_clusters", "rotating_clusters", "oscillation", "partial")
#: The paper's Type labels of the regime names.
TYPES = {"static_clusters": "Type 1", "rotating_clusters": "Type 2", "oscillation": "Type 3", "partial": "Type P"}


@dataclass(frozen=True)
class Prediction:
    """A closed-form prediction for one of paper 2's cases (:func:`predict_regime`).

    Attributes
    ----------
    case : str
        Which closed form applies: ``"case1"``, ``"case2"``, ``"rotating_family"``,
        ``"hamiltonian"`` or ``"snic_family"``.
    regime : str
        One of :data:`REGIMES`.
    limit : complex or None
        Predicted limit of :math:`R_2` (boundary point or interior :math:`z^*`) when known.
    period : float or None
        Predicted period of :math:`R_2` (rotation of :math:`\\arg R_2` or oscillation) when known.
    detail : str
        The sub-case (e.g. ``"tr A > 0"``, ``"bistable"``) in words.

    References
    ----------
    Paper 2 (Li et al., 2026), the cases and regimes; book: ``chapters/05_kuramoto_regimes.md``.
    """

    case: str
    regime: str
    limit: complex | None = None
    period: float | None = None
    detail: str = ""


def _scale(*Ms) -> float:
    return max(1.0, *(float(np.abs(M).max()) for M in Ms))


def _is_multiple_of_identity(M, tol):
    return abs(M[0, 1]) <= tol and abs(M[1, 0]) <= tol and abs(M[0, 0] - M[1, 1]) <= tol


# ---------------------------------------------------------------------------------------------
# Case 1: V = I (paper 2; book equation (eq-case1))
# ---------------------------------------------------------------------------------------------


def case1_region(A) -> str:
    r"""Which row of the Case 1 table the matrix :math:`A` falls in (:math:`V=I`).

    ``"det<=0"`` (Type 1), ``"tr>0"`` (Type 1), ``"sym_negative_definite"``
    (:math:`\frac12\operatorname{tr}A+|a_-|<0`: Type P), ``"bistable"``
    (:math:`\operatorname{tr}A<0<\det A`, :math:`\operatorname{sym}A` indefinite),
    ``"centre"`` (:math:`\operatorname{tr}A=0<\det A`).

    Parameters
    ----------
    A : array (2, 2)
        Score matrix.

    Returns
    -------
    str
        The row's name.

    References
    ----------
    Paper 2 (Li et al., 2026), the cases and regimes of linear attention on the circle; book:
    ``chapters/05_kuramoto_regimes.md``, equation (eq-case1).
    """
    A = validate_matrix2(A, "A")
    ap, am = complex_parts(A, "A")
    tol = 1e-12 * _scale(A)
    tr, det = 2 * ap.real, abs(ap) ** 2 - abs(am) ** 2
    if det <= 0:
        return "det<=0"
    if tr > tol:
        return "tr>0"
    if abs(tr) <= tol:
        return "centre"
    if 0.5 * tr + abs(am) < 0:
        return "sym_negative_definite"
    return "bistable"


def case1_matrix(tr, det, skew=1.0):
    r"""Matrices with a given trace, determinant and skew part (the Case 1 plane).

    .. math:: A=\begin{pmatrix}\tfrac{t}{2}+p&-\omega\\ \omega&\tfrac{t}{2}-p\end{pmatrix},\qquad
              p=\sqrt{t^2/4+\omega^2-\det},

    (:math:`\omega=(a_{21}-a_{12})/2`), which exists iff :math:`\det A\le t^2/4+\omega^2`. Every real
    2 x 2 matrix is a rotation conjugate of one of these (which does not change the Case 1 regime).

    Parameters
    ----------
    tr, det : float or array
        Trace :math:`t` and determinant (vectorised, broadcast together).
    skew : float
        :math:`\omega`.

    Returns
    -------
    A : array (..., 2, 2)
        The matrices (identity where infeasible).
    feasible : bool array (...)
        Where the matrix exists.

    References
    ----------
    Paper 2 (Li et al., 2026), the cases and regimes of linear attention on the circle; book:
    ``chapters/05_kuramoto_regimes.md``, equation (eq-case1).
    """
    tr, det = np.broadcast_arrays(validate_finite_array(tr, "tr"), validate_finite_array(det, "det"))
    skew = validate_finite(skew, "skew")
    p2 = tr**2 / 4 + skew**2 - det
    ok = p2 >= 0
    p = np.sqrt(np.where(ok, p2, 0.0))
    A = np.empty(tr.shape + (2, 2))
    A[..., 0, 0] = tr / 2 + p
    A[..., 1, 1] = tr / 2 - p
    A[..., 0, 1] = -skew
    A[..., 1, 0] = skew
    A[~ok] = np.eye(2)
    return A, ok


def snic_family(a, b=1.0, c=0.3) -> np.ndarray:
    r"""The value matrices of the SNIC (saddle-node on invariant circle) family, with :math:`A=I`.

    .. math:: V=\begin{pmatrix}c+a&b\\-b&c-a\end{pmatrix}.

    :math:`c>0`: rotating clusters for :math:`|a|<|b|` with period :math:`\pi/(\beta\sqrt{b^2-a^2})`,
    static clusters for :math:`|a|>|b|`.

    Parameters
    ----------
    a, b, c : float or array
        Broadcast together (vectorised).

    Returns
    -------
    array (..., 2, 2)

    References
    ----------
    Paper 2 (Li et al., 2026), the saddle-node bifurcation; book: ``chapters/05_kuramoto_regimes.md``.
    """
    a, b, c = np.broadcast_arrays(*(validate_finite_array(x, name) for x, name in ((a, "a"), (b, "b"), (c, "c"))))
    V = np.empty(a.shape + (2, 2))
    V[..., 0, 0] = c + a
    V[..., 0, 1] = b
    V[..., 1, 0] = -b
    V[..., 1, 1] = c - a
    return V


@fill_doc(PARAMETER_DOCS)
def case1_period(A, z0, beta=1.0) -> float:
    r"""Period of the Case 1 oscillation (:math:`V=I`, :math:`\operatorname{tr}A=0<\det A`).

    .. math:: P=\frac{4\pi}{\beta|\operatorname{Im}a_+|\sqrt{(1-|z^*|^2-r^2)^2-4r^2|z^*|^2}},\quad
              z^*=-a_-/\bar a_+,\ r=|z_0-z^*|<1-|z^*| .

    Parameters
    ----------
    A : array (2, 2)
        Score matrix with :math:`\operatorname{tr}A=0<\det A`.
    z0 : complex
        OA datum (its orbit must not touch the circle).
    %(beta)s

    Returns
    -------
    float
        :math:`P`.

    References
    ----------
    Paper 2 (Li et al., 2026), the cases and regimes of linear attention on the circle; book:
    ``chapters/05_kuramoto_regimes.md``, equation (eq-case1) (provenance [D]).
    """
    ap, am = complex_parts(validate_matrix2(A, "A"))
    zs = -am / np.conj(ap)
    r = abs(_one_complex(z0, "z0") - zs)
    if not r < 1 - abs(zs):
        raise ValueError("the orbit of z0 touches the circle: it is not an oscillation")
    disc = (1 - abs(zs) ** 2 - r**2) ** 2 - 4 * r**2 * abs(zs) ** 2
    return float(4 * math.pi / (validate_beta(beta) * abs(ap.imag) * math.sqrt(disc)))


def _one_complex(z, name: str) -> complex:
    z = validate_complex(z, name)
    if z.ndim != 0:
        raise ValueError(f"{name} must be one complex number, got shape {z.shape}")
    return complex(z)


def _affine_exit(z0: complex, lam: complex, b: complex, contracting_centre: complex | None):
    r"""First point where the orbit of :math:`\dot w=\lambda w+b` from ``z0`` reaches :math:`|w|=1`, or None.

    Case 1 orbits are time changes of this affine flow, stopped at the circle (book equation (eq-case1)), so
    the exit point is the limit of :math:`R_2`. Sampled in the flow time, refined by ``brentq``.
    """
    if abs(z0) >= 1:
        return complex(z0 / abs(z0))
    if abs(lam) > 0:
        zs = -b / lam
        flow = lambda s: zs + np.exp(lam * s) * (z0 - zs)  # noqa: E731
    else:
        flow = lambda s: z0 + b * s  # noqa: E731
    speed = max(abs(lam), abs(b), 1e-300)
    h = 0.02 / speed
    start = 0.0
    for _ in range(2000):  # at most 2000 chunks of 5000 steps
        s = start + h * np.arange(1, 5001)
        r = np.abs(flow(s))
        hit = np.nonzero(r >= 1)[0]
        if hit.size:
            k = hit[0]
            lo = s[k - 1] if k else start
            root = brentq(lambda u: abs(flow(u)) - 1, lo, s[k], xtol=1e-14, rtol=1e-14)
            w = flow(root)
            return complex(w / abs(w))
        start = s[-1]
        if contracting_centre is not None and lam.real < 0:
            # |w - z*| shrinks like e^{Re(lam) s}: once inside the disk of radius 1 - |z*| it never exits
            if abs(flow(start) - contracting_centre) < 1 - abs(contracting_centre):
                return None
    raise RuntimeError("the affine orbit neither left the disk nor settled (degenerate parameters?)")


def _case1(A, beta, z0) -> Prediction:
    ap, am = complex_parts(A, "A")
    region = case1_region(A)
    words = {
        "det<=0": "det A <= 0",
        "tr>0": "tr A > 0",
        "centre": "tr A = 0 < det A (centre)",
        "sym_negative_definite": "sym(A) negative definite",
        "bistable": "tr A < 0 < det A, sym(A) indefinite",
    }
    # z* = -a_-/conj(a_+) (none when a_+ = 0, which happens only for det A = -|a_-|^2 <= 0)
    zs = complex(-am / np.conj(ap)) if ap != 0 else math.inf
    interior = abs(zs) < 1
    if region == "centre":
        r = abs(z0 - zs)
        if r < 1 - abs(zs):
            return Prediction("case1", "oscillation", None, case1_period(A, z0, beta), words[region])
    if interior and abs(z0 - zs) < 1e-12:
        return Prediction("case1", "partial", complex(zs), None, words[region] + ", z0 = z*")
    exit_point = _affine_exit(complex(z0), complex(np.conj(ap)), complex(am), complex(zs) if interior else None)
    if exit_point is None:
        return Prediction("case1", "partial", complex(zs), None, words[region])
    return Prediction("case1", "static_clusters", exit_point, None, words[region])


# ---------------------------------------------------------------------------------------------
# A = I: Case 2, the hidden Hamiltonian, the SNIC family (paper 2; book chapter 05_kuramoto_regimes)
# ---------------------------------------------------------------------------------------------


def _identity_score(V, beta, z0, tol) -> Prediction | None:
    vp, vm = complex_parts(V, "V")
    c, b = vp.real, -vp.imag  # V = [[c + a, b], [-b, c - a]] up to a rotation, |a| = |v_-|
    if abs(b) <= tol:  # V symmetric: Case 2
        lam = np.linalg.eigvalsh(0.5 * (V + V.T))
        l2, l1 = float(lam[0]), float(lam[1])
        if abs(l1 - l2) <= tol:
            return None  # V multiple of I: Case 1
        theta1 = 0.5 * np.angle(vm)  # v_- = (l1 - l2)/2 e^{2 i theta1}
        top = np.exp(2j * theta1)
        if l1 >= 0:
            return Prediction(
                "case2",
                "static_clusters",
                complex(top),
                None,
                f"lambda_max(V) = {l1:.4g} >= 0: clusters on the top eigenvector",
            )
        return Prediction(
            "case2", "partial", complex((l1 - l2) / abs(l1 + l2) * top), None, f"lambda_max(V) = {l1:.4g} < 0"
        )
    if abs(c) <= tol:  # traceless: hidden Hamiltonian
        det = b * b - abs(vm) ** 2
        if det > tol:
            zc = hamiltonian_centre(V, beta)
            if abs(z0 - zc) < 1e-12:
                return Prediction("hamiltonian", "partial", zc, None, "z0 at the centre")
            return Prediction(
                "hamiltonian", "oscillation", None, None, "det V > 0: closed level sets of the Hamiltonian"
            )
        if det < -tol:
            return Prediction("hamiltonian", "static_clusters", None, None, "det V < 0: level sets run to the boundary")
        return None  # det V = 0: saddle-node on the circle, degenerate
    gap = b * b - abs(vm) ** 2
    if abs(gap) <= tol:
        return None  # at the SNIC itself
    if c > 0:
        if gap > 0:
            return Prediction(
                "snic_family",
                "rotating_clusters",
                None,
                math.pi / (beta * math.sqrt(gap)),
                "tr V > 0, complex eigenvalues: rotation on the circle",
            )
        return Prediction(
            "snic_family", "static_clusters", None, None, "tr V > 0, real eigenvectors: clusters stop at one of them"
        )
    if gap > 0:
        return Prediction("snic_family", "partial", None, None, "tr V < 0, complex eigenvalues: interior focus")
    # tr V < 0 with real eigenvalues c +- sqrt(a^2 - b^2): the boundary equilibrium on the top
    # eigenvector has transverse exponent -beta (c + sqrt(a^2 - b^2)) (kuramoto.transverse_exponent).
    # Our derivation, checked against planar particle runs (tests/test_highdim.py): clusters iff that
    # eigenvalue is >= 0.
    top = c + math.sqrt(-gap)
    if abs(top) <= tol:
        return None
    if top > 0:
        return Prediction(
            "snic_family",
            "static_clusters",
            None,
            None,
            f"tr V < 0, real eigenvalues, largest {top:.3g} > 0: clusters on its eigenvector [derived]",
        )
    return Prediction(
        "snic_family",
        "partial",
        None,
        None,
        f"tr V < 0, real eigenvalues, largest {top:.3g} < 0: interior equilibrium [derived]",
    )


def _rotating_family(A, V, beta, tol) -> Prediction | None:
    S = 0.5 * (A + A.T)
    if abs(A[0, 1] - A[1, 0]) > tol or np.linalg.eigvalsh(S)[0] <= tol:
        return None
    if abs(V[0, 0] - V[1, 1]) > tol or abs(V[0, 1] + V[1, 0]) > tol:
        return None  # V is not c I + s J
    c, s = 0.5 * (V[0, 0] + V[1, 1]), 0.5 * (V[1, 0] - V[0, 1])
    if c <= tol or abs(s) <= tol:
        return None
    det = float(np.linalg.det(S))
    return Prediction(
        "rotating_family",
        "rotating_clusters",
        None,
        math.pi / (beta * abs(s) * math.sqrt(det)),
        "A symmetric positive definite, V = cI + sJ with c > 0",
    )


@fill_doc(PARAMETER_DOCS)
def predict_regime(A, V, beta=1.0, z0=0.3 + 0.2j) -> Prediction | None:
    r"""The closed-form prediction of paper 2's cases for :math:`(A,V,\beta)` and the OA datum ``z0``, or None.

    * Case 1, :math:`V=vI` (:math:`v\neq0`; :math:`v<0` is :math:`A\to-A`): orbits of
      :math:`\dot z=\frac{\beta v}2(1-|z|^2)(\bar a_+z+a_-)` are those of the affine flow
      :math:`\dot w=\bar a_+w+a_-` stopped at the circle, so :math:`R_2` tends to the point where
      that orbit leaves the disk (static clusters), or to :math:`z^*=-a_-/\bar a_+` if it never
      leaves (partial; always when :math:`\operatorname{sym}A\prec0`, for some data in the
      bistable wedge); :math:`\operatorname{tr}A=0<\det A`: circles around :math:`z^*`
      (oscillation with :func:`case1_period`).
    * :math:`A=aI` (:math:`a\neq0`; :math:`a<0` is :math:`V\to-V`): :math:`V` symmetric (Case 2):
      static on the top eigenvector iff :math:`\lambda_{\max}\ge0`, else partial with limit
      :math:`\frac{\lambda_1-\lambda_2}{|\lambda_1+\lambda_2|}e^{2i\theta_1}`;
      :math:`\operatorname{tr}V=0`: oscillation if :math:`\det V>0`, static if :math:`\det V<0`;
      otherwise (SNIC family, :math:`V=\begin{pmatrix}c+a&b\\-b&c-a\end{pmatrix}` up to rotation):
      :math:`c>0`, :math:`|a|<|b|`: rotating, period :math:`\pi/(\beta\sqrt{b^2-a^2})`;
      :math:`c>0`, :math:`|a|>|b|`: static; :math:`c<0`, :math:`|a|<|b|`: partial;
      :math:`c<0`, :math:`|a|>|b|`: static iff :math:`c+\sqrt{a^2-b^2}>0`, else partial (our
      derivation from :func:`~tokendynamics.kuramoto.transverse_exponent`, checked against particle runs).
    * Rotating family: :math:`A` symmetric positive definite, :math:`V=cI+sJ`, :math:`c>0\neq s`:
      rotating, period :math:`\pi/(\beta|s|\sqrt{\det A})`.

    Degenerate parameter values (exactly at a bifurcation) return None, as do matrices outside
    these families.

    Parameters
    ----------
    %(matrices2_beta)s
    z0 : complex
        OA datum (initial :math:`R_2`), in the closed unit disk.

    Returns
    -------
    Prediction or None

    References
    ----------
    Paper 2 (Li et al., 2026), the cases and regimes of linear attention on the circle; book:
    ``chapters/05_kuramoto_regimes.md``, equations (eq-case1), (eq-case2-limit), (eq-rot-period),
    (eq-hamiltonian).

    Examples
    --------
    >>> import numpy as np
    >>> predict_regime(np.eye(2), np.diag([1.0, -0.5])).regime  # Case 2, lambda_max(V) >= 0
    'static_clusters'
    """
    A = validate_matrix2(A, "A")
    V = validate_matrix2(V, "V")
    if A.ndim != 2 or V.ndim != 2:
        raise ValueError("predict_regime takes one pair of 2 x 2 matrices")
    beta = validate_beta(beta)
    z0 = _one_complex(z0, "z0")
    if not abs(z0) <= 1 + 1e-12:
        raise ValueError(f"z0 must lie in the closed unit disk, got |z0| = {abs(z0):.6g}")
    tol = 1e-12 * _scale(A, V)
    if _is_multiple_of_identity(V, tol) and abs(V[0, 0]) > tol:
        v = V[0, 0]
        return _case1(np.sign(v) * A, beta * abs(v), z0)
    if _is_multiple_of_identity(A, tol) and abs(A[0, 0]) > tol:
        a = A[0, 0]
        return _identity_score(np.sign(a) * V, beta * abs(a), z0, tol)
    return _rotating_family(A, V, beta, tol)


# ---------------------------------------------------------------------------------------------
# the classifier (long-time Ott-Antonsen flow)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class RegimeClassification:
    """What :func:`classify_regime` measured in the late window of the OA run.

    Attributes
    ----------
    regime : str or array of str
        One of :data:`REGIMES` (per layer for a batch).
    z_final : complex or array
        :math:`z(T)`.
    min_modulus : float or array
        :math:`\\min|z|` over the window.
    arg_range : float or array
        Range of the unwrapped :math:`\\arg z` over the window.
    z_range : float or array
        :math:`\\max|z(t)-z(T)|` over the window.
    prediction : Prediction or None
        The closed form of :func:`predict_regime` (single layers only).
    params : dict
        The parameters of the run.

    References
    ----------
    Paper 2 (Li et al., 2026), the cases and regimes; book: ``chapters/05_kuramoto_regimes.md``.
    """

    regime: object
    z_final: object
    min_modulus: object
    arg_range: object
    z_range: object
    prediction: Prediction | None = None
    params: dict = field(default_factory=dict)


@fill_doc(PARAMETER_DOCS)
def classify_regime(
    A,
    V,
    beta=1.0,
    z0=0.3 + 0.2j,
    T: float = 200.0,
    *,
    window: float = 0.2,
    boundary_tol: float = 1e-3,
    arg_tol: float = 1e-3,
    fixed_tol: float = 1e-6,
    method: str = "DOP853",
    dt: float = 0.01,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    details: bool = False,
):
    r"""The regime of linear attention on the circle, decided from the long-time Ott–Antonsen flow.

    Integrates :func:`~tokendynamics.ott_antonsen.solve_ott_antonsen` from ``z0`` to ``T`` and looks
    at the late window :math:`[(1-\text{window})T,T]`:

    * :math:`\min|z|>1-` ``boundary_tol`` and range of :math:`\arg z<` ``arg_tol``: ``"static_clusters"``;
    * :math:`\min|z|>1-` ``boundary_tol``, :math:`\arg z` still turning: ``"rotating_clusters"``;
    * :math:`\max|z(t)-z(T)|<` ``fixed_tol``: ``"partial"``;
    * otherwise ``"oscillation"``.

    One refinement of the plain rule: a turning argument counts as rotation only if it turned by at
    least :math:`\pi` in the window or the clusters' own velocity on the circle at
    :math:`\arg z(T)/2` (:func:`~tokendynamics.kuramoto.cluster_velocity`) is at least
    :math:`10^{-2}\beta\|A\|\|V\|`; otherwise the orbit is still creeping towards an
    equilibrium of the circle (slow Case 1 approaches, where every boundary point is one) and is
    reported as ``"static_clusters"``.

    ``A``, ``V`` (stacks (..., 2, 2)) and ``z0`` broadcast: a batch is integrated in one call and
    an array of names is returned. ``method="rk4"`` with step ``dt`` is the fast path for one
    layer (about 0.05 s for T = 200, dt = 0.02; used by the live widget). A slowly converging orbit
    (near a bifurcation) can be reported as ``"oscillation"``; raise ``T``.

    Parameters
    ----------
    A, V : array (2, 2) or (..., 2, 2)
        Score and value matrices.
    %(beta)s
    z0 : complex or complex array
        OA datum.
    T : float
        Horizon.
    window : float
        Fraction of ``[0, T]`` at its end that is examined.
    boundary_tol, arg_tol, fixed_tol : float
        Thresholds of the rules above.
    method : str
        ``"DOP853"`` (or another ``solve_ivp`` method) or ``"rk4"``.
    dt : float
        Step of ``"rk4"``.
    rtol, atol : float
        Tolerances of the adaptive methods.
    details : bool
        Return a :class:`RegimeClassification` (with, for one layer, :func:`predict_regime`).

    Returns
    -------
    str, array of str, or RegimeClassification
        The regime name(s) of :data:`REGIMES`.

    References
    ----------
    Paper 2 (Li et al., 2026), the cases and regimes of linear attention on the circle; book:
    ``chapters/05_kuramoto_regimes.md``; the Ott–Antonsen flow: ``chapters/04_kuramoto_reduction.md``,
    equation (eq-oa).
    """
    T = validate_positive(T, "T")
    window = validate_positive(window, "window")
    if window > 1:
        raise ValueError(f"window must be a fraction in (0, 1], got {window!r}")
    boundary_tol = validate_positive(boundary_tol, "boundary_tol")
    arg_tol = validate_positive(arg_tol, "arg_tol")
    fixed_tol = validate_positive(fixed_tol, "fixed_tol")
    details = validate_flag(details, "details")
    # sample the window finely enough to unwrap arg z: |d arg z/dt| <= |dz/dt| / |z| <= sum |k_i| near the circle
    field = OAPolynomial.of(coefficients(A, V, beta))
    speed = float(np.max(sum(np.abs(k) for k in field.k)))
    batch = int(np.prod(np.broadcast_shapes(np.shape(z0), *(np.shape(k) for k in field.k))))
    # (a coarser sampling of a large batch can misstate arg_range but not static vs rotating)
    m = int(min(20_000, max(401, 2 * window * T * speed), max(401, 4_000_000 // max(batch, 1))))
    t_eval = np.linspace((1 - window) * T, T, m)
    sol = solve_ott_antonsen(z0, A, V, beta, (0.0, T), t_eval=t_eval, method=method, rtol=rtol, atol=atol, dt=dt)
    z = sol.z
    mod = np.abs(z)
    min_mod = mod.min(axis=0)
    arg_range = np.ptp(np.unwrap(np.angle(z), axis=0), axis=0)
    z_range = np.max(np.abs(z - z[-1]), axis=0)
    boundary = min_mod > 1 - boundary_tol
    # velocity of a cluster pair at the final boundary point, against the scale beta |A| |V|
    coef = coefficients(A, V, beta)
    cluster_speed = np.abs(cluster_velocity(0.5 * np.angle(z[-1]), A, V, beta))
    scale = coef.beta * (np.abs(coef.a_plus) + np.abs(coef.a_minus)) * (np.abs(coef.v_plus) + np.abs(coef.v_minus))
    turning = (arg_range >= arg_tol) & ((arg_range >= np.pi) | (cluster_speed >= 1e-2 * scale))
    names = np.where(
        boundary,
        np.where(turning, "rotating_clusters", "static_clusters"),
        np.where(z_range < fixed_tol, "partial", "oscillation"),
    )
    single = names.ndim == 0
    regime = str(names) if single else names.astype(object)
    if not details:
        return regime
    pred = None
    if single and np.ndim(A) == 2 and np.ndim(V) == 2 and np.ndim(z0) == 0:
        pred = predict_regime(A, V, beta, z0)
    conv = (lambda x: complex(x) if np.iscomplexobj(x) else float(x)) if single else (lambda x: x)
    return RegimeClassification(
        regime,
        conv(z[-1]),
        conv(min_mod),
        conv(arg_range),
        conv(z_range),
        pred,
        {
            "T": T,
            "window": window,
            "method": method,
            "nfev": sol.params["nfev"],
            **({"dt": sol.params["dt"]} if method == "rk4" else {"rtol": rtol, "atol": atol}),
        },
    )


@fill_doc(PARAMETER_DOCS)
def rotation_period(
    A,
    V,
    beta=1.0,
    z0=0.3 + 0.2j,
    T: float = 400.0,
    *,
    transient: float | None = None,
    centre: complex = 0.0,
    rtol: float = 1e-11,
    atol: float = 1e-13,
    return_intervals: bool = False,
):
    r"""Period of :math:`R_2` on the OA flow.

    The mean time between upward zero crossings of :math:`\operatorname{Im}(z-\text{centre})`.
    With ``centre = 0`` this is "the time between every second zero of
    :math:`\operatorname{Im}R_2`" of paper 2 for rotating clusters (one turn of :math:`\arg R_2`, i.e. the
    clusters turn by :math:`\pi`); use ``centre`` = :math:`z^*` or :math:`z_c` for oscillations
    around an interior point. Crossings are located by the solver's event finder. Crossings
    before ``transient`` (default :math:`T/2`) are ignored.

    Parameters
    ----------
    %(matrices2_beta)s
    z0 : complex
        OA datum.
    T : float
        Horizon.
    transient : float, optional
        Crossings before it are ignored (default :math:`T/2`).
    centre : complex
        Point around which the turns are counted.
    rtol, atol : float
        Tolerances.
    return_intervals : bool
        Also return the intervals between crossings.

    Returns
    -------
    float
        The period (``math.inf`` if fewer than two crossings remain: no rotation, frequency 0).

    References
    ----------
    Paper 2 (Li et al., 2026), the cases and regimes of linear attention on the circle; book:
    ``chapters/05_kuramoto_regimes.md``, equation (eq-rot-period).
    """
    T = validate_positive(T, "T")
    transient = 0.5 * T if transient is None else validate_finite(transient, "transient")
    centre = _one_complex(centre, "centre")
    return_intervals = validate_flag(return_intervals, "return_intervals")

    def crossing(t, z):
        return float(np.imag(z - centre))

    crossing.direction = 1.0  # type: ignore[attr-defined]  # solve_ivp's event attribute
    sol = solve_ott_antonsen(z0, A, V, beta, (0.0, T), t_eval=[T], rtol=rtol, atol=atol, events=crossing)
    times = sol.t_events[0]
    times = times[times >= transient]
    if times.size < 2:
        return (math.inf, np.diff(times)) if return_intervals else math.inf
    gaps = np.diff(times)
    period = float(gaps.mean())
    return (period, gaps) if return_intervals else period


def sampled_period(t, R, *, centre: complex = 0.0, transient: float = 0.0) -> float:
    r"""Period of a sampled complex signal (e.g. the particles' :math:`R_2(t)`).

    The mean time between upward zero crossings of :math:`\operatorname{Im}(R-\text{centre})`.
    Crossing times are located by linear interpolation between samples, so the result is as
    accurate as the sampling (use :func:`rotation_period` for the OA flow itself). Samples before
    ``transient`` are ignored.

    Parameters
    ----------
    t : array (m,)
        Sample times.
    R : complex array (m,)
        The signal.
    centre : complex
        Point around which the turns are counted.
    transient : float
        Samples before it are ignored.

    Returns
    -------
    float
        The period (``math.inf`` with fewer than two crossings).

    References
    ----------
    Paper 2 (Li et al., 2026), the cases and regimes; book: ``chapters/05_kuramoto_regimes.md``.
    """
    t = validate_finite_array(t, "t")
    y = np.imag(validate_complex(R, "R") - _one_complex(centre, "centre"))
    transient = validate_finite(transient, "transient")
    if t.ndim != 1 or y.shape != t.shape:
        raise ValueError("t and R must be 1-D arrays of the same length")
    keep = t >= transient
    t, y = t[keep], y[keep]
    up = np.nonzero((y[:-1] < 0) & (y[1:] >= 0))[0]
    if up.size < 2:
        return math.inf
    times = t[up] - y[up] * (t[up + 1] - t[up]) / (y[up + 1] - y[up])
    return float(np.diff(times).mean())


# ---------------------------------------------------------------------------------------------
# the summary table of the regimes of paper 2 (beta = 1)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RegimeExample:
    """One row of the table of regimes of paper 2 (beta = 1): matrices, OA datum, expected regime.

    Attributes
    ----------
    label : str
        The row in words.
    A, V : tuple
        The matrices (nested tuples).
    expected : str
        One of :data:`REGIMES`.
    z0 : complex
        OA datum.
    value : float or None
        A characteristic number (:math:`|z^*|`, a period, ...).
    value_name : str
        What ``value`` is.
    T : float
        Horizon of :func:`classify_regime`.

    References
    ----------
    Paper 2 (Li et al., 2026), summary of the regimes; book: ``chapters/05_kuramoto_regimes.md``.
    """

    label: str
    A: tuple
    V: tuple
    expected: str
    z0: complex = 0.3 + 0.2j
    value: float | None = None  # |z*|, the period, ...
    value_name: str = ""
    T: float = 200.0  # classifier horizon

    def matrices(self):
        """``(A, V)`` as float arrays.

        Returns
        -------
        tuple of two arrays (2, 2)
            The example's score and value matrices.
        """
        return np.array(self.A, dtype=float), np.array(self.V, dtype=float)


_I = ((1.0, 0.0), (0.0, 1.0))
_BISTABLE_A = ((0.8, 2.0), (-2.0, -1.2))

REGIME_TABLE: tuple[RegimeExample, ...] = (
    RegimeExample("V=I, A=[[1,2],[-1,0.5]]", ((1, 2), (-1, 0.5)), _I, "static_clusters"),
    RegimeExample("V=I, A=diag(-1,-2)", ((-1, 0), (0, -2)), _I, "partial", value=1 / 3, value_name="|z*|"),
    RegimeExample(
        "V=I, A=[[0.2,1],[-1,-0.2]], z0=0",
        ((0.2, 1), (-1, -0.2)),
        _I,
        "oscillation",
        0j,
        value=13.711,
        value_name="period",
    ),
    RegimeExample("V=I, A=diag(1,-2)", ((1, 0), (0, -2)), _I, "static_clusters"),
    # the bistable focus attracts at rate (1 - |z*|^2)|tr A|/4 = 0.075: T = 400 to settle to 1e-6
    *(
        RegimeExample(
            f"V=I, A=[[0.8,2],[-2,-1.2]] (bistable), z0={z!r}",
            _BISTABLE_A,
            _I,
            "partial",
            z,
            value=0.4975,
            value_name="|z*|",
            T=400.0,
        )
        for z in (0j, 0.9j, 0.6 + 0.6j)
    ),
    *(
        RegimeExample(f"V=I, A=[[0.8,2],[-2,-1.2]] (bistable), z0={z!r}", _BISTABLE_A, _I, "static_clusters", z)
        for z in (0.5 + 0j, -0.5 + 0j, 0.9 + 0j, -0.9 + 0j, -0.9j)
    ),
    RegimeExample("A=I, V=diag(2,-1)", _I, ((2, 0), (0, -1)), "static_clusters", value=1.0, value_name="R2 limit"),
    RegimeExample("A=I, V=diag(-1,-3)", _I, ((-1, 0), (0, -3)), "partial", value=0.5, value_name="|z*|"),
    RegimeExample("A=I, V=[[0.5,1],[-1,-0.5]]", _I, ((0.5, 1), (-1, -0.5)), "oscillation"),
    RegimeExample("A=I, V=[[1.5,1],[-1,-1.5]]", _I, ((1.5, 1), (-1, -1.5)), "static_clusters"),
    RegimeExample(
        "A=I, V=[[0.8,1],[-1,-0.2]]", _I, ((0.8, 1), (-1, -0.2)), "rotating_clusters", value=3.628, value_name="period"
    ),
    RegimeExample(
        "A=diag(2,1), V=[[1,-1],[1,1]]",
        ((2, 0), (0, 1)),
        ((1, -1), (1, 1)),
        "rotating_clusters",
        value=2.221,
        value_name="period",
    ),
)


# ---------------------------------------------------------------------------------------------
# everything a phase-portrait panel needs (figures and the live widget)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Portrait:
    """The OA vector field on a grid of the disk, one OA orbit, the classified and predicted regimes.

    Attributes
    ----------
    grid : complex array (k, k)
        Grid points (points outside the closed disk are masked in ``field``).
    field : complex masked array (k, k)
        :math:`\\dot z` at the grid points.
    t, orbit : arrays
        The OA orbit from ``z0`` (complex), sampled on ``t``.
    regime : str
        :func:`classify_regime` (fast ``rk4`` path).
    prediction : Prediction or None
        :func:`predict_regime`.
    params : dict
        The parameters.

    References
    ----------
    Paper 2 (Li et al., 2026), the cases and regimes; book: ``chapters/05_kuramoto_regimes.md``.
    """

    grid: np.ndarray
    field: np.ma.MaskedArray
    t: np.ndarray
    orbit: np.ndarray
    regime: str
    prediction: Prediction | None
    params: dict


@fill_doc(PARAMETER_DOCS)
def regime_portrait(
    A,
    V,
    beta=1.0,
    z0=0.3 + 0.2j,
    *,
    n_grid: int = 21,
    T_orbit: float = 40.0,
    T_classify: float = 200.0,
    dt: float | None = None,
) -> Portrait:
    r"""Phase portrait data of the OA flow, an orbit, the regime and its closed form.

    Fast enough for a live widget (tens of milliseconds): the field is one vectorised evaluation
    of :func:`~tokendynamics.ott_antonsen.ott_antonsen_rhs`, the orbit and the classification use
    the fixed-step ``rk4`` path of :func:`~tokendynamics.ott_antonsen.solve_ott_antonsen` with
    step ``dt`` (default :math:`\min(0.05, 0.5/L)`, :math:`L=\sum_i|k_i|` the size of the OA
    polynomial's coefficients, a bound on its rates in the disk).

    Parameters
    ----------
    %(matrices2_beta)s
    z0 : complex
        Start of the orbit.
    n_grid : int
        Grid points per side of :math:`[-1,1]^2`.
    T_orbit, T_classify : float
        Horizons of the orbit and of the classification.
    dt : float, optional
        Step of the ``rk4`` path.

    Returns
    -------
    Portrait

    References
    ----------
    Paper 2 (Li et al., 2026), the cases and regimes of linear attention on the circle; book:
    ``chapters/05_kuramoto_regimes.md``; ``chapters/04_kuramoto_reduction.md``, equation (eq-oa).
    """
    A = validate_matrix2(A, "A")
    V = validate_matrix2(V, "V")
    n_grid = validate_count(n_grid, "n_grid", minimum=2)
    T_orbit = validate_positive(T_orbit, "T_orbit")
    T_classify = validate_positive(T_classify, "T_classify")
    if dt is not None:
        dt = validate_positive(dt, "dt")
    s = np.linspace(-1, 1, n_grid)
    grid = s[None, :] + 1j * s[:, None]
    inside = np.abs(grid) <= 1.0
    poly = OAPolynomial.of(coefficients(A, V, beta))
    if dt is None:
        dt = min(0.05, 0.5 / max(sum(abs(k) for k in poly.k), 1e-12))
    field = poly(grid)
    field = np.ma.masked_array(field, mask=~inside)
    t = np.linspace(0.0, T_orbit, int(round(T_orbit / dt)) + 1)
    orbit = solve_ott_antonsen(z0, A, V, beta, T_orbit, t_eval=t, method="rk4", dt=dt)
    regime = classify_regime(A, V, beta, z0, T_classify, method="rk4", dt=dt)
    return Portrait(
        grid=grid,
        field=field,
        t=orbit.t,
        orbit=orbit.z,
        regime=regime,
        prediction=predict_regime(A, V, beta, z0),
        params={
            "A": A.tolist(),
            "V": V.tolist(),
            "beta": float(validate_beta(beta)),
            "z0": complex(z0),
            "dt": dt,
            "T_orbit": T_orbit,
            "T_classify": T_classify,
        },
    )
