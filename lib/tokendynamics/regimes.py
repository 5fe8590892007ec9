r"""Regimes of linear attention on the circle: closed forms, the hidden Hamiltonian and an Ott–Antonsen classifier.

=========================  ========  ==============================================================
name                       Type      long-time behaviour of :math:`R_2` (OA centre :math:`z`)
=========================  ========  ==============================================================
``"static_clusters"``      1         :math:`|z|\to1`, :math:`\arg z` converges: static antipodal clusters
``"rotating_clusters"``    2         :math:`|z|\to1`, :math:`\arg z` keeps turning: rotating clusters
``"oscillation"``          3         :math:`|z|<1` oscillates (periodic orbits)
``"partial"``              P         :math:`z\to z^*`, :math:`|z^*|<1`: partial clustering
=========================  ========  ==============================================================

:func:`predict_regime` gives the closed forms of paper 2's cases (Case 1 :math:`V=I`; Case 2 :math:`A=I`,
:math:`V` symmetric; the rotating family; the hidden Hamiltonian; the SNIC family), :func:`classify_regime` decides
from a long Ott–Antonsen run. The statements are our derivations matching the paper's claims; its exact theorem
hypotheses are [I].

References
----------
Paper 2 (Li et al., 2026), the cases and regimes. Book: ``chapters/05_kuramoto_regimes.md``, equations (eq-case1),
(eq-case2-limit), (eq-rot-period) and (eq-hamiltonian).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import brentq

from .docstrings import fill_doc
from .kuramoto import CIRCLE_DOCS, KuramotoCoefficients, coefficients, complex_parts, require_circle_layer
from .ott_antonsen import OAPolynomial
from .validation import validate_complex, validate_finite, validate_finite_array, validate_flag, validate_positive

__all__ = [
    "REGIMES", "TYPES", "Prediction", "predict_regime", "case1_region", "snic_family",
    "hamiltonian", "hamiltonian_centre", "classify_regime", "RegimeClassification", "rotation_period",
    "CLASSIFIER_TOLERANCES",
]  # fmt: skip

#: The four regime names, in the order of the paper's Types 1, 2, 3 and P.
REGIMES = ("static_clusters", "rotating_clusters", "oscillation", "partial")
#: The paper's Type labels of the regime names.
TYPES = {"static_clusters": "Type 1", "rotating_clusters": "Type 2", "oscillation": "Type 3", "partial": "Type P"}
#: Thresholds of :func:`classify_regime`: on the circle if :math:`\min|z|>1-` ``boundary``, turning if the
#: argument moves by more than ``arg``, settled if :math:`\max|z(t)-z(T)|<` ``fixed``.
CLASSIFIER_TOLERANCES = {"boundary": 1e-3, "arg": 1e-3, "fixed": 1e-6}

_REFS = "References\n----------\nPaper 2 (Li et al., 2026), "
_DOC = {
    **CIRCLE_DOCS,
    "refs": _REFS + "the cases and regimes; book: ``chapters/05_kuramoto_regimes.md``.",
    "refs_h": _REFS + "the hidden Hamiltonian; book: ``chapters/05_kuramoto_regimes.md``, (eq-hamiltonian).",
    "z0": "z0 : complex\n    OA datum (initial :math:`R_2`), in the closed unit disk.",
}


@fill_doc(_DOC)
@dataclass(frozen=True)
class Prediction:
    """A closed-form prediction of :func:`predict_regime`.

    Attributes
    ----------
    case, regime : str
        ``"case1"``, ``"case2"``, ``"rotating_family"``, ``"hamiltonian"`` or ``"snic_family"``; one of :data:`REGIMES`.
    limit, period : complex or None, float or None
        Limit and period of :math:`R_2`, when known.
    detail : str
        The sub-case in words.

    %(refs)s
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


def _one_complex(z, name: str) -> complex:
    z = validate_complex(z, name)
    if z.ndim != 0:
        raise ValueError(f"{name} must be one complex number, got shape {z.shape}")
    return complex(z)


def _region(ap, am, tol) -> str:
    tr, det = 2 * ap.real, abs(ap) ** 2 - abs(am) ** 2
    if det <= 0:
        return "det<=0"
    if tr > tol:
        return "tr>0"
    if abs(tr) <= tol:
        return "centre"
    return "sym_negative_definite" if 0.5 * tr + abs(am) < 0 else "bistable"


@fill_doc(_DOC)
def case1_region(A) -> str:
    r"""The row of the Case 1 table (:math:`V=I`) of :math:`A`: ``"det<=0"``, ``"tr>0"`` (Type 1),
    ``"sym_negative_definite"`` (:math:`\frac12\operatorname{tr}A+|a_-|<0`: Type P), ``"bistable"``
    (:math:`\operatorname{tr}A<0<\det A`, :math:`\operatorname{sym}A` indefinite), ``"centre"``
    (:math:`\operatorname{tr}A=0<\det A`).

    Parameters
    ----------
    A : array (2, 2)
        Score matrix.

    Returns
    -------
    str

    %(refs)s
    """
    ap, am = complex_parts(A, "A")
    return _region(ap, am, 1e-12 * _scale(np.asarray(A, dtype=float)))


@fill_doc(_DOC)
def snic_family(a, b=1.0, c=0.3) -> np.ndarray:
    r"""The value matrices :math:`V=\begin{pmatrix}c+a&b\\-b&c-a\end{pmatrix}` of the SNIC family (with :math:`A=I`):
    for :math:`c>0` rotating clusters if :math:`|a|<|b|` (period :math:`\pi/(\beta\sqrt{b^2-a^2})`), else static.

    Parameters
    ----------
    a, b, c : float or array
        Broadcast together.

    Returns
    -------
    array (..., 2, 2)

    %(refs)s
    """
    a, b, c = np.broadcast_arrays(*(validate_finite_array(x, name) for x, name in ((a, "a"), (b, "b"), (c, "c"))))
    return np.stack([np.stack([c + a, b], -1), np.stack([-b, c - a], -1)], -2)


def _affine_exit(z0: complex, lam: complex, b: complex, contracting_centre: complex | None):
    """First point where the orbit of w' = lam w + b from z0 reaches |w| = 1 (the Case 1 limit), or None."""
    if abs(z0) >= 1:
        return complex(z0 / abs(z0))
    if abs(lam) > 0:
        zs = -b / lam
        flow = lambda s: zs + np.exp(lam * s) * (z0 - zs)  # noqa: E731
    else:
        flow = lambda s: z0 + b * s  # noqa: E731
    h = 0.02 / max(abs(lam), abs(b), 1e-300)
    start = 0.0
    for _ in range(2000):  # at most 2000 chunks of 5000 steps
        s = start + h * np.arange(1, 5001)
        hit = np.nonzero(np.abs(flow(s)) >= 1)[0]
        if hit.size:
            k = hit[0]
            root = brentq(lambda u: abs(flow(u)) - 1, s[k - 1] if k else start, s[k], xtol=1e-14, rtol=1e-14)
            w = flow(root)
            return complex(w / abs(w))
        start = s[-1]
        # |w - z*| shrinks like e^{Re(lam) s}: once inside the disk of radius 1 - |z*| it never exits
        if contracting_centre is not None and lam.real < 0:
            if abs(flow(start) - contracting_centre) < 1 - abs(contracting_centre):
                return None
    raise RuntimeError("the affine orbit neither left the disk nor settled (degenerate parameters?)")


_CASE1_WORDS = {
    "det<=0": "det A <= 0",
    "tr>0": "tr A > 0",
    "centre": "tr A = 0 < det A (centre)",
    "sym_negative_definite": "sym(A) negative definite",
    "bistable": "tr A < 0 < det A, sym(A) indefinite",
}


def _case1(A, ap, am, beta, z0) -> Prediction:
    region = _region(ap, am, 1e-12 * _scale(A))
    words = _CASE1_WORDS[region]
    # z* = -a_-/conj(a_+) (none when a_+ = 0, which happens only for det A = -|a_-|^2 <= 0)
    zs = complex(-am / np.conj(ap)) if ap != 0 else math.inf
    interior = abs(zs) < 1
    r = abs(z0 - zs)
    if region == "centre" and r < 1 - abs(zs):  # period of the closed orbit through z0
        disc = (1 - abs(zs) ** 2 - r**2) ** 2 - 4 * r**2 * abs(zs) ** 2
        return Prediction("case1", "oscillation", None, 4 * math.pi / (beta * abs(ap.imag) * math.sqrt(disc)), words)
    if interior and r < 1e-12:
        return Prediction("case1", "partial", complex(zs), None, words + ", z0 = z*")
    exit_point = _affine_exit(complex(z0), complex(np.conj(ap)), complex(am), complex(zs) if interior else None)
    if exit_point is None:
        return Prediction("case1", "partial", complex(zs), None, words)
    return Prediction("case1", "static_clusters", exit_point, None, words)


def _centre(kappa, vm) -> complex | None:
    """The interior centre of the Hamiltonian flow of a traceless V with Im v_+ = kappa, or None."""
    if kappa**2 - abs(vm) ** 2 <= 0:
        return None
    v11, v12 = abs(vm), -kappa
    q = np.cbrt((v12 - v11) / (v12 + v11))
    y, phase = (q - 1) / (q + 1), vm / abs(vm) if abs(vm) > 0 else 1.0
    return complex(1j * y * phase)


def _identity_score(V, vp, vm, beta, z0, tol) -> Prediction | None:
    c, b = vp.real, -vp.imag  # V = [[c + a, b], [-b, c - a]] up to a rotation, |a| = |v_-|
    if abs(b) <= tol:  # V symmetric: Case 2
        l2, l1 = (float(x) for x in np.linalg.eigvalsh(0.5 * (V + V.T)))
        if abs(l1 - l2) <= tol:
            return None  # V multiple of I: Case 1
        top = np.exp(2j * (0.5 * np.angle(vm)))  # v_- = (l1 - l2)/2 e^{2 i theta1}
        if l1 >= 0:
            words = f"lambda_max(V) = {l1:.4g} >= 0: clusters on the top eigenvector"
            return Prediction("case2", "static_clusters", complex(top), None, words)
        limit = complex((l1 - l2) / abs(l1 + l2) * top)
        return Prediction("case2", "partial", limit, None, f"lambda_max(V) = {l1:.4g} < 0")
    gap = b * b - abs(vm) ** 2  # det V - c^2
    if abs(c) <= tol:  # traceless: hidden Hamiltonian
        if gap > tol:
            zc = _centre(vp.imag, vm)
            if abs(z0 - zc) < 1e-12:
                return Prediction("hamiltonian", "partial", zc, None, "z0 at the centre")
            return Prediction("hamiltonian", "oscillation", detail="det V > 0: closed level sets of the Hamiltonian")
        if gap < -tol:
            return Prediction("hamiltonian", "static_clusters", detail="det V < 0: level sets run to the boundary")
        return None  # det V = 0: saddle-node on the circle, degenerate
    if abs(gap) <= tol:
        return None  # at the SNIC itself
    if c > 0 and gap > 0:
        words = "tr V > 0, complex eigenvalues: rotation on the circle"
        return Prediction("snic_family", "rotating_clusters", None, math.pi / (beta * math.sqrt(gap)), words)
    if c > 0:
        words = "tr V > 0, real eigenvectors: clusters stop at one of them"
        return Prediction("snic_family", "static_clusters", detail=words)
    if gap > 0:
        return Prediction("snic_family", "partial", detail="tr V < 0, complex eigenvalues: interior focus")
    # tr V < 0, real eigenvalues c +- sqrt(a^2 - b^2): the boundary equilibrium on the top eigenvector has transverse
    # exponent -beta (c + sqrt(a^2 - b^2)) (kuramoto.transverse_exponent); our derivation, checked against planar
    # particle runs (tests/book/test_studies_highdim.py): clusters iff that eigenvalue is >= 0.
    top = c + math.sqrt(-gap)
    if abs(top) <= tol:
        return None
    words = "> 0: clusters on its eigenvector" if top > 0 else "< 0: interior equilibrium"
    words = f"tr V < 0, real eigenvalues, largest {top:.3g} {words} [derived]"
    return Prediction("snic_family", "static_clusters" if top > 0 else "partial", detail=words)


def _rotating_family(A, V, beta, tol) -> Prediction | None:
    S = 0.5 * (A + A.T)
    if abs(A[0, 1] - A[1, 0]) > tol or np.linalg.eigvalsh(S)[0] <= tol:
        return None
    if abs(V[0, 0] - V[1, 1]) > tol or abs(V[0, 1] + V[1, 0]) > tol:
        return None  # V is not c I + s J
    c, s = 0.5 * (V[0, 0] + V[1, 1]), 0.5 * (V[1, 0] - V[0, 1])
    if c <= tol or abs(s) <= tol:
        return None
    period = math.pi / (beta * abs(s) * math.sqrt(float(np.linalg.det(S))))
    words = "A symmetric positive definite, V = cI + sJ with c > 0"
    return Prediction("rotating_family", "rotating_clusters", None, period, words)


def _predict(layer, k: KuramotoCoefficients, z0: complex) -> Prediction | None:
    A, V, beta = layer.A[0], layer.V[0], layer.beta
    tol = 1e-12 * _scale(A, V)
    if _is_multiple_of_identity(V, tol) and abs(V[0, 0]) > tol:
        s = np.sign(V[0, 0])  # V = v I with v < 0 is A -> -A
        return _case1(s * A, s * k.a_plus, s * k.a_minus, beta * abs(V[0, 0]), z0)
    if _is_multiple_of_identity(A, tol) and abs(A[0, 0]) > tol:
        s = np.sign(A[0, 0])  # A = a I with a < 0 is V -> -V
        return _identity_score(s * V, s * k.v_plus, s * k.v_minus, beta * abs(A[0, 0]), z0, tol)
    return _rotating_family(A, V, beta, tol)


@fill_doc(_DOC)
def predict_regime(layer, z0=0.3 + 0.2j) -> Prediction | None:
    r"""The closed-form prediction of paper 2's cases for the layer and the OA datum ``z0``, or None.

    * Case 1, :math:`V=vI` (:math:`v<0`: :math:`A\to-A`): the orbits are those of :math:`\dot w=\bar a_+w+a_-` stopped
      at the circle: :math:`R_2` tends to the exit point (static) or to :math:`z^*=-a_-/\bar a_+` (partial);
      :math:`\operatorname{tr}A=0<\det A`: oscillation of period :math:`\frac{4\pi}{\beta|v||\operatorname{Im}a_+|
      \sqrt{(1-|z^*|^2-r^2)^2-4r^2|z^*|^2}}`, :math:`r=|z_0-z^*|`.
    * :math:`A=aI` (:math:`a<0`: :math:`V\to-V`): :math:`V` symmetric (Case 2): static on the top eigenvector iff
      :math:`\lambda_{\max}\ge0`, else partial, limit :math:`\frac{\lambda_1-\lambda_2}{|\lambda_1+\lambda_2|}
      e^{2i\theta_1}`; :math:`\operatorname{tr}V=0`: oscillation iff :math:`\det V>0`; otherwise (:func:`snic_family`
      up to rotation): :math:`c>0`: rotating (:math:`|a|<|b|`) or static; :math:`c<0`: partial (:math:`|a|<|b|`),
      else static iff :math:`c+\sqrt{a^2-b^2}>0` (our derivation).
    * Rotating family, :math:`A\succ0` symmetric, :math:`V=cI+sJ`, :math:`c>0\neq s`: period
      :math:`\pi/(\beta|s|\sqrt{\det A})`.

    Degenerate values (at a bifurcation) and other layers give None.

    Parameters
    ----------
    %(layer)s
    %(z0)s

    Returns
    -------
    Prediction or None

    %(refs)s

    Examples
    --------
    >>> import numpy as np
    >>> from tokendynamics import Attention
    >>> predict_regime(Attention("linear", A=np.eye(2), V=np.diag([1.0, -0.5]))).regime  # Case 2
    'static_clusters'
    """
    k = KuramotoCoefficients.of(require_circle_layer(layer, "predict_regime"))
    z0 = _one_complex(z0, "z0")
    if not abs(z0) <= 1 + 1e-12:
        raise ValueError(f"z0 must lie in the closed unit disk, got |z0| = {abs(z0):.6g}")
    return _predict(layer, k, z0)


def _traceless(V, vp, vm):
    """(Im v_+, v_-) of a traceless V (a ValueError otherwise)."""
    if abs(V[0, 0] + V[1, 1]) > 1e-12 * _scale(V):
        raise ValueError(f"the Hamiltonian structure needs tr V = 0, got tr V = {V[0, 0] + V[1, 1]:.3g}")
    return vp.imag, vm


@fill_doc(_DOC)
def hamiltonian(z, layer):
    r"""The conserved quantity :math:`\mathcal E(z)=\frac\beta4\frac{-\kappa(1+|z|^2)+2\operatorname{Im}(\bar v_-z)}
    {(1-|z|^2)^2}`, :math:`\kappa=\tfrac12(v_{21}-v_{12})`, of the OA flow for :math:`A=I`, traceless :math:`V`
    (:math:`\dot z=-2i(1-|z|^2)^3\partial_{\bar z}\mathcal E`).

    Parameters
    ----------
    z : complex or complex array
        Points of the open unit disk.
    layer : Attention
        Linear attention on the circle, :math:`A=I`, :math:`\operatorname{tr}V=0`.

    Returns
    -------
    float or array

    %(refs_h)s
    """
    k = KuramotoCoefficients.of(require_circle_layer(layer, "hamiltonian"))
    if not np.allclose(layer.A[0], np.eye(2), rtol=0, atol=1e-12):
        raise ValueError("the hidden Hamiltonian is that of A = I; this layer has another A")
    kappa, vm = _traceless(layer.V[0], k.v_plus, k.v_minus)
    z = validate_complex(z, "z")
    r2 = np.abs(z) ** 2
    if np.any(r2 >= 1):
        raise ValueError("the Hamiltonian is defined in the open unit disk |z| < 1")
    out = 0.25 * layer.beta * (-kappa * (1 + r2) + 2 * np.imag(np.conj(vm) * z)) / (1 - r2) ** 2
    return float(out) if out.ndim == 0 else out


@fill_doc(_DOC)
def hamiltonian_centre(V):
    r"""The interior centre :math:`z_c` of the Hamiltonian OA flow (None unless :math:`\det V>0`): for
    :math:`V=\begin{pmatrix}v_{11}&v_{12}\\-v_{12}&-v_{11}\end{pmatrix}`, :math:`z_c=iy_c`,
    :math:`(\frac{1+y_c}{1-y_c})^3=\frac{v_{12}-v_{11}}{v_{12}+v_{11}}` (rotated by the phase of :math:`v_-`).

    Parameters
    ----------
    V : array (2, 2)
        Traceless value matrix.

    Returns
    -------
    complex or None

    %(refs_h)s
    """
    vp, vm = complex_parts(V, "V")
    if np.ndim(vp):
        raise ValueError("one 2 x 2 matrix V, please")
    return _centre(*_traceless(np.asarray(V, dtype=float), vp, vm))


@fill_doc(_DOC)
@dataclass(frozen=True, eq=False)
class RegimeClassification:
    r"""What :func:`classify_regime` measured in the late window of the OA run (arrays for a batch).

    Attributes
    ----------
    regime : str or array of str
        One of :data:`REGIMES`.
    z_final, min_modulus, arg_range, z_range : complex or array, float or array
        :math:`z(T)`, :math:`\min|z|`, the range of the unwrapped :math:`\arg z`, :math:`\max|z(t)-z(T)|`.
    prediction : Prediction or None
        :func:`predict_regime` (single layers only).
    params : dict
        The parameters of the run.

    %(refs)s
    """

    regime: object
    z_final: object
    min_modulus: object
    arg_range: object
    z_range: object
    prediction: Prediction | None = None
    params: dict = field(default_factory=dict)


@fill_doc(_DOC)
def classify_regime(
    layer, z0=0.3 + 0.2j, T=200.0, *, window=0.2, method="DOP853", dt=0.01, rtol=1e-10, atol=1e-12, details=False
):
    r"""The regime from the late window :math:`[(1-\text{window})T,T]` of the OA flow (thresholds
    :data:`CLASSIFIER_TOLERANCES`).

    :math:`|z|\to1` with :math:`\arg z` still: ``"static_clusters"``; turning (by :math:`\ge\pi`, or with a cluster
    velocity at :math:`\arg z(T)/2` of at least :math:`10^{-2}\beta\|A\|\|V\|`): ``"rotating_clusters"``; :math:`z`
    settled inside: ``"partial"``; otherwise ``"oscillation"``.

    Parameters
    ----------
    %(layers)s
    %(z0)s
    T, window : float
        Horizon; the examined fraction of ``[0, T]`` at its end.
    method, dt, rtol, atol
        ``"DOP853"`` (a ``solve_ivp`` method, tolerances) or ``"rk4"`` (step ``dt``, fast for one layer).
    details : bool
        Return a :class:`RegimeClassification`.

    Returns
    -------
    str, array of str, or RegimeClassification

    %(refs)s
    The Ott–Antonsen flow: ``chapters/04_kuramoto_reduction.md``, equation (eq-oa).
    """
    T = validate_positive(T, "T")
    window = validate_positive(window, "window")
    if window > 1:
        raise ValueError(f"window must be a fraction in (0, 1], got {window!r}")
    details = validate_flag(details, "details")
    coef = coefficients(layer)
    poly = OAPolynomial.of(coef)
    # sample the window finely enough to unwrap arg z: |d arg z/dt| <= |dz/dt| / |z| <= sum |k_i| near the circle
    # (a coarser sampling of a large batch can misstate arg_range but not static vs rotating)
    speed = float(np.max(poly.rate()))
    batch = int(np.prod(np.broadcast_shapes(np.shape(z0), *(np.shape(k) for k in poly.k))))
    m = int(min(20_000, max(401, 2 * window * T * speed), max(401, 4_000_000 // max(batch, 1))))
    t_eval = np.linspace((1 - window) * T, T, m)
    sol = poly.solve(z0, (0.0, T), t_eval=t_eval, method=method, rtol=rtol, atol=atol, dt=dt)
    z, tols = sol.z, CLASSIFIER_TOLERANCES
    min_mod = np.abs(z).min(axis=0)
    arg_range = np.ptp(np.unwrap(np.angle(z), axis=0), axis=0)
    z_range = np.max(np.abs(z - z[-1]), axis=0)
    cluster_speed = np.abs(coef.cluster_velocity(0.5 * np.angle(z[-1])))
    scale = coef.beta * (np.abs(coef.a_plus) + np.abs(coef.a_minus)) * (np.abs(coef.v_plus) + np.abs(coef.v_minus))
    turning = (arg_range >= tols["arg"]) & ((arg_range >= np.pi) | (cluster_speed >= 1e-2 * scale))
    names = np.where(
        min_mod > 1 - tols["boundary"],
        np.where(turning, "rotating_clusters", "static_clusters"),
        np.where(z_range < tols["fixed"], "partial", "oscillation"),
    )
    single = names.ndim == 0
    regime = str(names) if single else names.astype(object)
    if not details:
        return regime
    pred = _predict(layer, coef, complex(z0)) if single and layer.batch_size is None and np.ndim(z0) == 0 else None
    conv = (lambda x: complex(x) if np.iscomplexobj(x) else float(x)) if single else (lambda x: x)
    params = dict(T=T, window=window, method=method, nfev=sol.params["nfev"])
    params.update({"dt": sol.params["dt"]} if method == "rk4" else {"rtol": rtol, "atol": atol})
    return RegimeClassification(regime, conv(z[-1]), conv(min_mod), conv(arg_range), conv(z_range), pred, params)


@fill_doc(_DOC)
def rotation_period(layer, z0=0.3 + 0.2j, T=400.0, *, transient=None, centre=0.0, rtol=1e-11, atol=1e-13) -> float:
    r"""Period of :math:`R_2` on the OA flow: the mean time between upward zero crossings of
    :math:`\operatorname{Im}(z-\text{centre})` after ``transient`` (``centre=0``: one turn of rotating clusters;
    :math:`z^*` or :math:`z_c` for oscillations).

    Parameters
    ----------
    %(layer)s
    %(z0)s
    T, transient : float
        Horizon; crossings before ``transient`` (default :math:`T/2`) are ignored.
    centre : complex
        Point around which the turns are counted.
    rtol, atol : float
        Tolerances.

    Returns
    -------
    float
        ``math.inf`` if fewer than two crossings remain.

    %(refs)s
    Equation (eq-rot-period).
    """
    T = validate_positive(T, "T")
    transient = 0.5 * T if transient is None else validate_finite(transient, "transient")
    centre = _one_complex(centre, "centre")
    poly = OAPolynomial.of(KuramotoCoefficients.of(require_circle_layer(layer, "rotation_period")))

    def crossing(t, z):
        return float(np.imag(z - centre))

    crossing.direction = 1.0  # type: ignore[attr-defined]  # solve_ivp's event attribute
    times = poly.solve(z0, (0.0, T), t_eval=[T], rtol=rtol, atol=atol, events=crossing).t_events[0]
    times = times[times >= transient]
    return float(np.diff(times).mean()) if times.size >= 2 else math.inf
