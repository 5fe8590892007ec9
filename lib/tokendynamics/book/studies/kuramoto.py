r"""Studies of the d = 2 chapters (``04_kuramoto_reduction``, ``05_kuramoto_regimes``) on the reductions of paper 2.

The accuracy of the Ott–Antonsen reduction for finite n (:func:`oa_accuracy`), its structural stability over
long times (:func:`oa_stability`, from perturbations of the uniform law, :func:`perturbed_uniform`), the table
of example regimes (:data:`REGIME_TABLE`), the phase-portrait data of a panel or of the live explorer
(:func:`regime_portrait`), the Case 1 plane of matrices (:func:`case1_matrix`) and the period of a sampled
signal (:func:`sampled_period`), the regime of a sampled signal (:func:`sampled_regime`) and runs from uniform
tokens across the saddle-node family (:func:`uniform_start_run`). The mathematics is that of
:mod:`tokendynamics.kuramoto`, :mod:`tokendynamics.ott_antonsen` and :mod:`tokendynamics.regimes`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...attention import Attention
from ...docstrings import fill_doc
from ...kuramoto import CIRCLE_DOCS, coefficients, order_parameter, solve_phases
from ...ott_antonsen import OAPolynomial, poisson_kernel_atoms, sample_ott_antonsen, solve_ott_antonsen
from ...particles import circle_tokens, simulate
from ...regimes import Prediction, classify_regime, hamiltonian_centre, predict_regime, snic_family
from ...transport import circle_wasserstein1
from ...validation import validate_complex, validate_count, validate_finite, validate_finite_array, validate_positive

__all__ = [
    "OAAccuracy", "oa_accuracy", "case1_matrix", "perturbed_uniform", "OAStability", "oa_stability", "sampled_period",
    "sampled_regime", "uniform_start_run", "RegimeExample", "REGIME_TABLE", "Portrait", "regime_portrait",
]  # fmt: skip

_DOC = {**CIRCLE_DOCS, "tolerances": "rtol, atol : float\n    Tolerances of the particle integration (DOP853)."}


@dataclass(frozen=True, eq=False)
class OAAccuracy:
    r"""Distance between the particles' :math:`R_2` and the OA centre for several n and seeds (:func:`oa_accuracy`).

    Attributes
    ----------
    ns : array (k,)
        Sample sizes.
    errors : array (k, seeds)
        :math:`\sup_{t\le T}|R_2(t)-z(t)|` per n and seed.
    slope, intercept : float or None
        Least-squares fit :math:`\log\text{error}=\text{slope}\log n+\text{intercept}` over all points.
    params : dict
        The parameters of the study.
    """

    ns: np.ndarray
    errors: np.ndarray
    slope: float | None
    intercept: float | None
    params: dict


#: Default centre of :func:`oa_accuracy`: :math:`0.3e^{0.7i}`.
_OA_Z0 = 0.3 * complex(np.cos(0.7), np.sin(0.7))


@fill_doc(_DOC)
def oa_accuracy(
    layer,
    z0=_OA_Z0,
    ns=(250, 1000, 4000),
    seeds=8,
    T: float = 10.0,
    *,
    rng=0,
    equispaced: bool = False,
    n_times: int = 201,
    rtol: float = 1e-8,
    atol: float = 1e-10,
) -> OAAccuracy:
    r"""How far n particles sampled on the OA manifold drift from it: :math:`\sup_{t\le T}|R_2-z_{OA}|` against n.

    For each n, ``seeds`` samples of :func:`~tokendynamics.ott_antonsen.sample_ott_antonsen` (centre ``z0``) are
    integrated together by the O(n) angle equations (:func:`~tokendynamics.kuramoto.solve_phases`) and compared
    with the OA solution at ``n_times`` equally spaced times. The expected law is :math:`C/\sqrt n` (slope
    :math:`-1/2`), the initial sampling error propagated by a Grönwall bound.

    Parameters
    ----------
    %(layer)s
    z0 : complex
        Centre of the sampled Poisson kernel (default :math:`0.3e^{0.7i}`).
    ns : sequence of int
        Sample sizes n.
    seeds : int
        Samples per n.
    T : float
        Horizon.
    rng : int or numpy.random.Generator
        Seed or generator.
    equispaced : bool
        Equispaced constants (see :func:`~tokendynamics.ott_antonsen.sample_ott_antonsen`).
    n_times : int
        Comparison times.
    %(tolerances)s

    Returns
    -------
    OAAccuracy
    """
    if np.ndim(ns) != 1 or len(ns) < 1:
        raise ValueError(f"ns must list positive sample sizes, got {ns!r}")
    ns = np.array([validate_count(n, "ns[k]") for n in ns], dtype=int)
    seeds = validate_count(seeds, "seeds")
    T = validate_positive(T, "T")
    n_times = validate_count(n_times, "n_times", minimum=2)
    rng = np.random.default_rng(rng)
    t_eval = np.linspace(0.0, T, n_times)
    oa = solve_ott_antonsen(z0, layer, T, t_eval=t_eval, rtol=1e-11, atol=1e-13)
    errors = np.empty((ns.size, int(seeds)))
    for i, n in enumerate(ns):
        theta0 = np.stack([sample_ott_antonsen(z0, int(n), rng, equispaced=equispaced) for _ in range(int(seeds))])
        sol = solve_phases(theta0, layer, T, t_eval=t_eval, rtol=rtol, atol=atol)
        errors[i] = np.max(np.abs(order_parameter(sol.theta, 2) - oa.z[:, None]), axis=0)
    slope = intercept = None
    if np.unique(ns).size >= 2:
        x = np.repeat(np.log(ns), errors.shape[1])
        slope, intercept = (float(v) for v in np.polyfit(x, np.log(errors).ravel(), 1))
    z = complex(z0)
    params = dict(beta=float(layer.beta), z0=[z.real, z.imag], T=T, seeds=int(seeds), equispaced=equispaced)
    params.update(rtol=rtol, atol=atol)
    return OAAccuracy(ns=ns, errors=errors, slope=slope, intercept=intercept, params=params)


def perturbed_uniform(n: int, epsilon, *, modes: int = 3, rng=None) -> np.ndarray:
    r"""n token angles whose double angles are a smooth perturbation of size ``epsilon`` of the uniform law.

    :math:`\psi_k=u_k+\varepsilon\,g(u_k)`, :math:`u_k=2\pi(k+\frac12)/n`, with a random trigonometric polynomial
    :math:`g` of degree ``modes`` (Gaussian coefficients from ``rng``) scaled to :math:`\max|g'|=1`: for
    :math:`0\le\varepsilon<1` the map is increasing and the perturbed law is at :math:`W_1` distance of order
    :math:`\varepsilon` from uniform (the grid itself is at :math:`\pi/(2n)`). :math:`\theta_k=\psi_k/2`.

    Parameters
    ----------
    n : int
        Number of tokens (>= 2).
    epsilon : float or array (k,)
        Sizes of the perturbation, in :math:`[0, 1)`.
    modes : int
        Highest harmonic of g.
    rng : seed or Generator
        Draws the coefficients of g (one g for every epsilon).

    Returns
    -------
    array (n,) or (k, n)
        Token angles :math:`\theta_k`.
    """
    if int(n) != n or n < 2:
        raise ValueError(f"n must be an integer >= 2, got {n!r}")
    if int(modes) != modes or modes < 1:
        raise ValueError(f"modes must be a positive integer, got {modes!r}")
    eps = np.asarray(epsilon, dtype=float)
    if not np.all(np.isfinite(eps)) or np.any(eps < 0) or np.any(eps >= 1):
        raise ValueError("epsilon must lie in [0, 1) (the perturbed map must stay increasing)")
    coef = np.random.default_rng(rng).standard_normal((int(modes), 2))
    j = np.arange(1, int(modes) + 1)[:, None]
    u = 2 * np.pi * (np.arange(int(n)) + 0.5) / int(n)
    fine = np.linspace(0, 2 * np.pi, 4096, endpoint=False)
    slope = lambda s: np.sum(j * (-coef[:, :1] * np.sin(j * s) + coef[:, 1:] * np.cos(j * s)), axis=0)  # noqa: E731
    g = np.sum(coef[:, :1] * np.cos(j * u) + coef[:, 1:] * np.sin(j * u), axis=0)
    return (u + eps[..., None] * (g / np.max(np.abs(slope(fine))))) / 2


@dataclass(frozen=True, eq=False)
class OAStability:
    r"""Long-time distances between perturbed data and the Ott–Antonsen solutions (:func:`oa_stability`).

    Attributes
    ----------
    t : array (m,)
        Comparison times.
    epsilon : array (k,)
        Sizes of the perturbations of the uniform law.
    distance : array (m, k)
        :math:`W_1(\mu_t,p_{z(t)})` on the circle of double angles, :math:`z` the OA solution from
        :math:`R_2(\mu_0)`.
    distance_uniform : array (m, k)
        The same against the OA solution from :math:`z_u(0)=0` (the uniform law's).
    R2 : complex array (m, k)
        The particles' :math:`R_2(t)`.
    z : complex array (m, k)
        OA solutions from :math:`R_2(\mu_0)`.
    z_uniform : complex array (m,)
        OA solution from 0.
    theta_final : array (k, n)
        The token angles at the last time.
    params : dict
        The parameters of the run.
    """

    t: np.ndarray
    epsilon: np.ndarray
    distance: np.ndarray
    distance_uniform: np.ndarray
    R2: np.ndarray
    z: np.ndarray
    z_uniform: np.ndarray
    theta_final: np.ndarray
    params: dict

    def growth(self, uniform: bool = False) -> np.ndarray:
        r"""The growth ratio :math:`\sup_{s\le t}d(s)/d(0)` for every perturbation (bounded in t: stability).

        Parameters
        ----------
        uniform : bool
            Use ``distance_uniform`` instead of ``distance``.

        Returns
        -------
        array (m, k)
        """
        d = self.distance_uniform if uniform else self.distance
        return np.maximum.accumulate(d, axis=0) / d[0]


#: Atoms of each Poisson kernel in :func:`oa_stability` (W1 error at most 2 pi / atoms).
STABILITY_ATOMS = 4096


@fill_doc(_DOC)
def oa_stability(
    layer,
    epsilon=(0.01, 0.03, 0.1),
    *,
    n: int = 2000,
    T: float = 200.0,
    n_times: int = 101,
    modes: int = 3,
    rng=0,
    rtol: float = 1e-8,
    atol: float = 1e-10,
) -> OAStability:
    r"""Do data close to the uniform law stay close to the Ott–Antonsen solution for all time?

    The perturbed data :math:`\mu_0` (:func:`perturbed_uniform`, n tokens per entry of ``epsilon``) are run
    exactly by the O(n) angle equations and compared at ``n_times`` times in :math:`[0,T]` with two OA solutions
    :math:`\nu_t=p_{z(t)}`: from :math:`z(0)=R_2(\mu_0)` (``distance``) and from :math:`z(0)=0` (the uniform law,
    ``distance_uniform``), in :math:`W_1` on the circle of double angles
    (:func:`~tokendynamics.transport.circle_wasserstein1` against
    :func:`~tokendynamics.ott_antonsen.poisson_kernel_atoms`), which bounds the bounded-Lipschitz distance of
    the paper's statement from both sides. :meth:`OAStability.growth` measures whether the ratio stays bounded.

    Parameters
    ----------
    %(layer)s
    epsilon : sequence of floats in (0, 1)
        Sizes of the perturbations.
    n : int
        Tokens per perturbed law (keep :math:`\pi/(2n)` well below the smallest epsilon).
    T : float
        Horizon.
    n_times : int
        Comparison times.
    modes : int
        Harmonics of the perturbation.
    rng : seed or Generator
        Draws the perturbation.
    %(tolerances)s

    Returns
    -------
    OAStability
    """
    eps = np.atleast_1d(np.asarray(epsilon, dtype=float))
    if eps.ndim != 1 or np.any(eps <= 0):
        raise ValueError("epsilon must list positive sizes")
    if not (T > 0):
        raise ValueError(f"T must be positive, got {T}")
    theta0 = perturbed_uniform(n, eps, modes=modes, rng=rng)
    t_eval = np.linspace(0.0, float(T), int(n_times))
    sol = solve_phases(theta0, layer, float(T), t_eval=t_eval, rtol=rtol, atol=atol)
    R2 = order_parameter(sol.theta, 2)  # (m, k)
    field = OAPolynomial.of(coefficients(layer))
    z = field.solve(R2[0], float(T), t_eval=t_eval, rtol=1e-11, atol=1e-13).z
    zu = field.solve(0j, float(T), t_eval=t_eval, rtol=1e-11, atol=1e-13).z
    ref = poisson_kernel_atoms(z, STABILITY_ATOMS)  # (m, k, atoms)
    ref_u = poisson_kernel_atoms(zu, STABILITY_ATOMS)  # (m, atoms)
    psi = 2 * sol.theta
    m, k = psi.shape[:2]
    d, du = np.empty((m, k)), np.empty((m, k))
    for i in range(m):
        for j in range(k):
            d[i, j] = circle_wasserstein1(psi[i, j], ref[i, j])
            du[i, j] = circle_wasserstein1(psi[i, j], ref_u[i])
    params = dict(A=layer.A[0].tolist(), V=layer.V[0].tolist(), beta=float(layer.beta), n=int(n), T=float(T))
    params.update(modes=int(modes), atoms=STABILITY_ATOMS, rtol=rtol, atol=atol, nfev=sol.params["nfev"])
    return OAStability(t_eval, eps, d, du, R2, z, zu, sol.theta[-1].copy(), params)


def sampled_period(t, R, *, centre: complex = 0.0, transient: float = 0.0) -> float:
    r"""Period of a sampled complex signal (e.g. the particles' :math:`R_2(t)`).

    The mean time between upward zero crossings of :math:`\operatorname{Im}(R-\text{centre})`, located by linear
    interpolation (as accurate as the sampling; :func:`~tokendynamics.regimes.rotation_period` for the OA flow).

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
    """
    t = validate_finite_array(t, "t")
    y = np.imag(validate_complex(R, "R") - complex(validate_complex(centre, "centre")))
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


def sampled_regime(t, R, *, window: float = 0.2, tol: float = 1e-2) -> str:
    r"""The regime (one of :data:`~tokendynamics.regimes.REGIMES`) of a sampled :math:`R_2(t)`, e.g. the particles'.

    The rules of :func:`~tokendynamics.regimes.classify_regime` on the late window :math:`[(1-\text{window})T,T]`,
    with one looser threshold for finite n: on the circle if :math:`\min|R_2|>1-` ``tol``, then turning if the
    unwrapped :math:`\arg R_2` moves by more than ``tol``; inside, settled (partial) if
    :math:`\max|R_2(t)-R_2(T)|<` ``tol``, else oscillating.

    Parameters
    ----------
    t : array (m,)
        Sample times.
    R : complex array (m,)
        The signal.
    window, tol : float
        Examined fraction of the run; threshold.

    Returns
    -------
    str

    References
    ----------
    Paper 2 (Li et al., 2026), the regimes; book: ``chapters/05_kuramoto_regimes.md``.
    """
    late = validate_complex(R, "R")[validate_finite_array(t, "t") >= (1 - window) * float(t[-1])]
    if np.abs(late).min() > 1 - tol:
        return "rotating_clusters" if np.ptp(np.unwrap(np.angle(late))) > tol else "static_clusters"
    return "partial" if np.abs(late - late[-1]).max() < tol else "oscillation"


def uniform_start_run(a, c=0.0, b=1.0, T=60.0, *, n: int = 0, points: int = 4001, rtol=1e-10):
    r"""One run from uniform tokens (:math:`R_2(0)=0`) for :math:`A=I` and the traceless family.

    :math:`V=` :func:`~tokendynamics.regimes.snic_family` ``(a, b, c)``.

    On the Ott–Antonsen flow from :math:`z_0=0`, or (``n > 0``) on the particle system from n equispaced tokens
    (:func:`~tokendynamics.particles.simulate`, adaptive). For traceless V with :math:`|a|<|b|` the period counts
    turns around the centre :math:`z_c` (:func:`~tokendynamics.regimes.hamiltonian_centre`), otherwise around 0.

    Parameters
    ----------
    a, c, b : float
        The family's parameters.
    T : float
        Horizon.
    n : int
        Number of tokens (0: the Ott–Antonsen flow).
    points : int
        Samples on ``[0, T]``.
    rtol : float
        Relative tolerance (absolute: ``rtol / 100``).

    Returns
    -------
    tuple
        Times, :math:`R_2(t)`, the period (:func:`sampled_period`, ``inf`` without turns), the amplitude
        :math:`\max_t|R_2|` and the regime (:func:`sampled_regime`).

    References
    ----------
    Paper 2 (Li et al., 2026), the hidden Hamiltonian and the saddle-node; book: ``chapters/05_kuramoto_regimes.md``.
    """
    layer = Attention("linear", A=np.eye(2), V=snic_family(a, b, c))
    t = np.linspace(0.0, T, points)
    if n:
        X0 = circle_tokens(2 * np.pi * np.arange(n) / n)
        traj = simulate(X0, layer, T, method="adaptive", t_eval=t, rtol=rtol, atol=rtol / 100, sphere=True)
        R = order_parameter(traj.angles())
    else:
        R = solve_ott_antonsen(0j, layer, T, t_eval=t, rtol=rtol, atol=rtol / 100).z
    zc = hamiltonian_centre(layer.V[0]) if c == 0 else None
    period = sampled_period(t, R, centre=0.0 if zc is None else zc)
    return t, R, period, float(np.abs(R).max()), sampled_regime(t, R)


def case1_matrix(tr, det, skew=1.0):
    r"""Matrices with a given trace, determinant and skew part (the Case 1 plane).

    .. math:: A=\begin{pmatrix}\tfrac{t}{2}+p&-\omega\\ \omega&\tfrac{t}{2}-p\end{pmatrix},\qquad
              p=\sqrt{t^2/4+\omega^2-\det},

    which exists iff :math:`\det A\le t^2/4+\omega^2`; every real 2 x 2 matrix is a rotation conjugate of
    one of these (which does not change the Case 1 regime).

    Parameters
    ----------
    tr, det : float or array
        Trace :math:`t` and determinant (broadcast together).
    skew : float
        :math:`\omega=(a_{21}-a_{12})/2`.

    Returns
    -------
    A : array (..., 2, 2)
        The matrices (identity where infeasible).
    feasible : bool array (...)
        Where the matrix exists.

    """
    tr, det = np.broadcast_arrays(validate_finite_array(tr, "tr"), validate_finite_array(det, "det"))
    skew = validate_finite(skew, "skew")
    p2 = tr**2 / 4 + skew**2 - det
    ok = p2 >= 0
    p = np.sqrt(np.where(ok, p2, 0.0))
    A = np.empty(tr.shape + (2, 2))
    A[..., 0, 0], A[..., 1, 1] = tr / 2 + p, tr / 2 - p
    A[..., 0, 1], A[..., 1, 0] = -skew, skew
    A[~ok] = np.eye(2)
    return A, ok


# ---------------------------------------------------------------------------------------------
# the table of example regimes of paper 2 (beta = 1)
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
        One of :data:`~tokendynamics.regimes.REGIMES`.
    z0 : complex
        OA datum.
    value : float or None
        A characteristic number (:math:`|z^*|`, a period, ...).
    value_name : str
        What ``value`` is.
    T : float
        Horizon of :func:`~tokendynamics.regimes.classify_regime`.
    """

    label: str
    A: tuple
    V: tuple
    expected: str
    z0: complex = 0.3 + 0.2j
    value: float | None = None
    value_name: str = ""
    T: float = 200.0

    def matrices(self):
        """``(A, V)`` as float arrays.

        Returns
        -------
        tuple of two arrays (2, 2)
        """
        return np.array(self.A, dtype=float), np.array(self.V, dtype=float)

    def layer(self) -> Attention:
        """The example's linear-attention layer (beta = 1).

        Returns
        -------
        Attention
        """
        A, V = self.matrices()
        return Attention("linear", A=A, V=V)


_I = ((1.0, 0.0), (0.0, 1.0))
_BISTABLE_A = ((0.8, 2.0), (-2.0, -1.2))
_BISTABLE = "V=I, A=[[0.8,2],[-2,-1.2]] (bistable), z0="

#: The example regimes (chapter ``05_kuramoto_regimes``); the bistable focus attracts at rate
#: ``(1 - |z*|^2) |tr A| / 4 = 0.075``: T = 400 to settle to 1e-6.
REGIME_TABLE: tuple[RegimeExample, ...] = (
    RegimeExample("V=I, A=[[1,2],[-1,0.5]]", ((1, 2), (-1, 0.5)), _I, "static_clusters"),
    RegimeExample("V=I, A=diag(-1,-2)", ((-1, 0), (0, -2)), _I, "partial", value=1 / 3, value_name="|z*|"),
    RegimeExample("V=I, A=[[0.2,1],[-1,-0.2]], z0=0", ((0.2, 1), (-1, -0.2)), _I, "oscillation", 0j, 13.711, "period"),
    RegimeExample("V=I, A=diag(1,-2)", ((1, 0), (0, -2)), _I, "static_clusters"),
    *(
        RegimeExample(f"{_BISTABLE}{z!r}", _BISTABLE_A, _I, "partial", z, 0.4975, "|z*|", 400.0)
        for z in (0j, 0.9j, 0.6 + 0.6j)
    ),
    *(
        RegimeExample(f"{_BISTABLE}{z!r}", _BISTABLE_A, _I, "static_clusters", z)
        for z in (0.5 + 0j, -0.5 + 0j, 0.9 + 0j, -0.9 + 0j, -0.9j)
    ),
    RegimeExample("A=I, V=diag(2,-1)", _I, ((2, 0), (0, -1)), "static_clusters", value=1.0, value_name="R2 limit"),
    RegimeExample("A=I, V=diag(-1,-3)", _I, ((-1, 0), (0, -3)), "partial", value=0.5, value_name="|z*|"),
    RegimeExample("A=I, V=[[0.5,1],[-1,-0.5]]", _I, ((0.5, 1), (-1, -0.5)), "oscillation"),
    RegimeExample("A=I, V=[[1.5,1],[-1,-1.5]]", _I, ((1.5, 1), (-1, -1.5)), "static_clusters"),
    RegimeExample(
        "A=I, V=[[0.8,1],[-1,-0.2]]", _I, ((0.8, 1), (-1, -0.2)), "rotating_clusters", 0.3 + 0.2j, 3.628, "period"
    ),
    RegimeExample(
        "A=diag(2,1), V=[[1,-1],[1,1]]",
        ((2, 0), (0, 1)),
        ((1, -1), (1, 1)),
        "rotating_clusters",
        0.3 + 0.2j,
        2.221,
        "period",
    ),
)


# ---------------------------------------------------------------------------------------------
# everything a phase-portrait panel needs (figures and the live explorer)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Portrait:
    """The OA vector field on a grid of the disk, one OA orbit, the classified and predicted regimes.

    Attributes
    ----------
    grid : complex array (k, k)
        Grid points.
    field : complex masked array (k, k)
        :math:`\\dot z` at the grid points (masked outside the closed disk).
    t, orbit : arrays
        The OA orbit from ``z0`` (complex), sampled on ``t``.
    regime : str
        :func:`~tokendynamics.regimes.classify_regime` (fixed-step ``rk4`` path).
    prediction : Prediction or None
        :func:`~tokendynamics.regimes.predict_regime`.
    params : dict
        The parameters.
    """

    grid: np.ndarray
    field: np.ma.MaskedArray
    t: np.ndarray
    orbit: np.ndarray
    regime: str
    prediction: Prediction | None
    params: dict


@fill_doc(_DOC)
def regime_portrait(
    layer, z0=0.3 + 0.2j, *, n_grid: int = 21, T_orbit: float = 40.0, T_classify: float = 200.0, dt: float | None = None
) -> Portrait:
    r"""Phase-portrait data of the OA flow, an orbit, the regime and its closed form.

    Fast enough for a live explorer (tens of milliseconds): the field is one vectorised evaluation, the orbit
    and the classification use the fixed-step ``rk4`` path with step ``dt`` (default :math:`\min(0.05, 0.5/L)`,
    :math:`L=\sum_i|k_i|` the size of the OA polynomial's coefficients, a bound on its rates in the disk).

    Parameters
    ----------
    %(layer)s
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
    """
    n_grid = validate_count(n_grid, "n_grid", minimum=2)
    T_orbit = validate_positive(T_orbit, "T_orbit")
    T_classify = validate_positive(T_classify, "T_classify")
    poly = OAPolynomial.of(coefficients(layer))
    dt = min(0.05, 0.5 / max(poly.rate(), 1e-12)) if dt is None else validate_positive(dt, "dt")
    s = np.linspace(-1, 1, n_grid)
    grid = s[None, :] + 1j * s[:, None]
    field = np.ma.masked_array(poly(grid), mask=~(np.abs(grid) <= 1.0))
    t = np.linspace(0.0, T_orbit, int(round(T_orbit / dt)) + 1)
    orbit = poly.solve(z0, T_orbit, t_eval=t, method="rk4", dt=dt)
    regime = classify_regime(layer, z0, T_classify, method="rk4", dt=dt)
    params = dict(A=layer.A[0].tolist(), V=layer.V[0].tolist(), beta=float(layer.beta), z0=complex(z0), dt=dt)
    params.update(T_orbit=T_orbit, T_classify=T_classify)
    return Portrait(grid, field, orbit.t, orbit.z, regime, predict_regime(layer, z0), params)
