r"""The well-posedness chapter's gallery of paper 1's attention variants, and its stability study.

Paper 1 (Castin et al., arXiv:2501.18322); ``chapters/01_well_posedness.md``, sections "Eight velocity
fields" and "Stability in Wasserstein distance". :func:`paper1_variants` builds the gallery from one pair
:math:`(A, V)` as :class:`Variant` objects (a layer, and for masked attention a sink) that push tokens
with :func:`~tokendynamics.particles.simulate`; :func:`stability_study` measures the growth factor
:math:`W_p(\mu_t,\nu_t)/W_p(\mu_0,\nu_0)` of nearby initial measures (:func:`perturb_in_ball`) against the
explicit bound of :func:`~tokendynamics.stability.log_stability_bound`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...attention import Attention
from ...kinds import KINDS
from ...masked import SinkSystem, with_sink
from ...particles import Trajectory, simulate
from ...stability import log_jacobian_bound, log_stability_bound, log_trajectory_bound
from ...transport import conditional_wasserstein, wasserstein
from ...validation import (
    validate_finite,
    validate_finite_array,
    validate_instance,
    validate_positive,
    validate_square,
    validate_tokens,
)
from ...variants import multihead_from_rows, sigmoid_layer

__all__ = ["VARIANT_NAMES", "Variant", "paper1_variants", "perturb_in_ball", "stability_study"]

#: The eight variants of the chapter's gallery.
VARIANT_NAMES = ("softmax", "multihead", "l2", "sinkhorn", "sigmoid", "linear", "unnormalized_softmax", "masked")


@dataclass(frozen=True, eq=False)
class Variant:
    r"""A named attention variant, ready to push tokens.

    ``layer`` is the layer, or a callable ``t -> Attention`` for depth-dependent parameters; for masked
    attention ``sink_mass`` (:math:`m_0`) and ``sink_token`` say how :func:`~tokendynamics.masked.with_sink`
    extends the tokens to :math:`(s,x)` space (positions :math:`s_i=i/n`, sink at :math:`s=0`).
    """

    name: str
    layer: Attention | Callable[[float], Attention]
    sink_mass: float | None = None
    sink_token: np.ndarray | None = None

    @property
    def masked(self) -> bool:
        """Whether this is masked attention with a sink (``sink_mass`` is set)."""
        return self.sink_mass is not None

    def system(self, X0) -> SinkSystem:
        """The measure that is integrated: the tokens (after the sink, with positions, if masked).

        Parameters
        ----------
        X0 : array (n, d)
            Initial tokens.

        Returns
        -------
        SinkSystem
            Uniform weights and positions ``i/n`` for an unmasked variant; :func:`~tokendynamics.masked.with_sink`
            for a masked one.
        """
        if self.masked:
            return with_sink(X0, self.sink_mass, sink=self.sink_token)  # type: ignore[arg-type]
        lay = self.layer if isinstance(self.layer, Attention) else self.layer(0.0)
        X0 = validate_tokens(X0, lay.d, name="X0")
        n = X0.shape[0]
        return SinkSystem(X0.copy(), np.full(n, 1.0 / n), np.arange(1, n + 1) / n, 0, 0.0, causal=lay.causal)

    def run(self, X0, T: float, *, dt: float, method="rk4", save_every=1, on_blowup="stop", **kwargs):
        r"""Integrate :math:`\dot x_i=\Gamma_{\mu_t}(x_i)` from ``X0`` up to ``T`` (a blow-up stops the run
        unless ``on_blowup="raise"``).

        Parameters
        ----------
        X0 : array (n, d)
            Initial tokens (without the sink: :meth:`system` adds it).
        T : float
            Final depth.
        dt, method, save_every, on_blowup
            As in :func:`~tokendynamics.particles.simulate`.
        **kwargs
            Further options of :func:`~tokendynamics.particles.simulate`.

        Returns
        -------
        trajectory : Trajectory
            The run of the whole system (sink rows included).
        system : SinkSystem
            The system integrated; ``system.tokens(trajectory.X)`` drops the sink rows.
        """
        sys_ = self.system(X0)
        extra = sys_.simulate_kwargs() if self.masked else {}
        kw = dict(dt=dt, method=method, save_every=save_every, on_blowup=on_blowup, **extra, **kwargs)
        traj: Trajectory = simulate(sys_.X, self.layer, T, **kw)
        return traj, sys_

    def __repr__(self) -> str:
        sink = f", m0={self.sink_mass:g}" if self.masked else ""
        lay = repr(self.layer) if isinstance(self.layer, Attention) else "depth-dependent"
        return f"Variant({self.name!r}, {lay}{sink})"


def paper1_variants(
    A, V, *, beta=1.0, eps=1.0, bias=0.0, n_heads=None, sink_mass=0.1, sink_token=None, names=VARIANT_NAMES
) -> dict[str, Variant]:
    r"""The gallery of paper 1's variants from one score matrix :math:`A` and value matrix :math:`V`.

    ``softmax``; ``multihead`` (:func:`~tokendynamics.variants.multihead_from_rows` with :math:`Q=I`,
    :math:`K=A`, ``n_heads`` heads, d by default); ``l2`` (:math:`e^{-\beta|x-Ay|^2}`: :math:`Q=I`,
    :math:`K=A`); ``sinkhorn`` (regularisation ``eps``); ``sigmoid`` (mean normalisation, bias ``bias``);
    ``linear``; ``unnormalized_softmax``; ``masked`` (causal softmax, positions :math:`i/n`, a sink of
    mass ``sink_mass`` at :math:`s=0`, by default at the origin). Any other registered kind (e.g.
    ``"relu"``, ``"hardmax"``) is ``Attention(name, A=A, V=V, beta=beta)``.

    Parameters
    ----------
    A, V : array_like (d, d)
        Score and value matrices of every variant.
    beta : float
        Inverse temperature.
    eps : float
        Entropic regularisation of the Sinkhorn variant.
    bias : float
        Bias of the sigmoid variant.
    n_heads : int, optional
        Heads of the multi-head variant (must divide d); None means d.
    sink_mass : float
        Sink mass :math:`m_0\in[0,1)` of the masked variant.
    sink_token : array_like (d,) or (k, d), optional
        Sink token(s) of the masked variant; None: the origin.
    names : sequence of str
        Which variants to build: among :data:`VARIANT_NAMES` or the registered kinds
        (:data:`~tokendynamics.kinds.KINDS`).

    Returns
    -------
    dict of str to Variant
        In the order of ``names``.
    """
    A = validate_square(A, "A")
    V = validate_square(V, "V", A.shape[0])
    d = A.shape[0]
    if isinstance(names, str):
        raise ValueError(f"names must be a list of variant names, got the string {names!r}")
    unknown = set(names) - set(VARIANT_NAMES) - set(KINDS)
    if unknown:
        raise ValueError(f"names lists unknown variant(s) {sorted(unknown)}; known: {VARIANT_NAMES + tuple(KINDS)}")
    sink_mass = validate_finite(sink_mass, "sink_mass")
    if not 0 <= sink_mass < 1:
        raise ValueError(f"sink_mass must be in [0, 1), got {sink_mass!r}")
    special = {
        "multihead": lambda: multihead_from_rows(np.eye(d), A, V, d if n_heads is None else n_heads, beta=beta),
        "l2": lambda: Attention("l2", Q=np.eye(d), K=A, V=V, beta=beta),
        "sinkhorn": lambda: Attention("sinkhorn", A=A, V=V, beta=beta, eps=eps),
        "sigmoid": lambda: sigmoid_layer(A, V, beta=beta, bias=bias),
        "masked": lambda: Attention("softmax", A=A, V=V, beta=beta, causal=True),
    }
    token = None if sink_token is None else np.asarray(sink_token, float)
    out = {}
    for name in names:
        layer = special[name]() if name in special else Attention(name, A=A, V=V, beta=beta)
        out[name] = Variant(name, layer, sink_mass, token) if name == "masked" else Variant(name, layer)
    return out


def perturb_in_ball(X, delta: float, rng=None) -> np.ndarray:
    r""":math:`x_i+\delta\xi_i` with :math:`\xi_i` i.i.d. uniform in the unit ball of :math:`\mathbb R^d`.

    Parameters
    ----------
    X : array_like (n, d)
        The tokens to perturb (not modified).
    delta : float
        Size :math:`\delta\ge0`: every token moves by at most :math:`\delta`, so :math:`W_p\le\delta`.
    rng : None, int or numpy.random.Generator
        Generator (or seed) of the directions and radii.

    Returns
    -------
    numpy.ndarray (n, d)
    """
    X = validate_tokens(X)
    delta = validate_positive(delta, "delta", allow_zero=True)
    rng = np.random.default_rng(rng)
    n, d = X.shape
    g = rng.standard_normal((n, d))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    return X + delta * (rng.random(n) ** (1.0 / d))[:, None] * g


def stability_study(variant, X0, deltas, *, T: float, dt: float, save_every=1, rng=None, p=2) -> dict[str, np.ndarray]:
    r"""Measured growth factor :math:`W_p(\mu_t,\nu_t)/W_p(\mu_0,\nu_0)` for nearby initial measures.

    :math:`\mu_0` is the empirical measure of ``X0``, :math:`\nu_0` that of :math:`x_i+\delta\xi_i` for each
    ``delta``, with the same :math:`\xi_i` (:func:`perturb_in_ball`) for every ``delta``; both are pushed by
    ``variant`` with RK4. Distances are exact (:func:`~tokendynamics.transport.wasserstein`), conditional
    (:func:`~tokendynamics.transport.conditional_wasserstein`) for masked attention, whose sink is part of
    the architecture and not perturbed.

    Parameters
    ----------
    variant : Variant
        The attention variant.
    X0 : array_like (n, d)
        The tokens of :math:`\mu_0` (without the sink).
    deltas : sequence of float
        Positive perturbation sizes.
    T, dt : float
        Final time and RK4 step.
    save_every : int
        Store every k-th step: the times at which the ratio is measured.
    rng : None, int or numpy.random.Generator
        Generator of the perturbation shared by all ``deltas``.
    p : float
        Order of the Wasserstein distance.

    Returns
    -------
    dict
        ``t`` (m,), ``ratio`` (len(deltas), m) (NaN after a blow-up), ``w0`` (len(deltas),), ``R0`` (the
        largest initial radius, sink included), ``log_bound`` (m,)
        (:func:`~tokendynamics.stability.log_stability_bound`, NaN where the kind has no explicit constant),
        ``log_sharp`` (m,) (the same constants on the measured radius of all the runs,
        :func:`~tokendynamics.stability.log_trajectory_bound`; NaN likewise and after a blow-up),
        ``log_jacobian`` (m,) (the measured rate of the field's Jacobian on the base run,
        :func:`~tokendynamics.stability.log_jacobian_bound`; NaN after a blow-up), ``blowup`` (time or NaN,
        per delta) and ``deltas``.
    """
    validate_instance(variant, Variant, "variant", "a Variant (paper1_variants)")
    deltas = validate_finite_array(deltas, "deltas", ndim=1)
    if deltas.size == 0 or np.any(deltas <= 0):
        raise ValueError(f"deltas must be a non-empty list of positive sizes, got {deltas.tolist()}")
    base, system = variant.run(X0, T, dt=dt, save_every=save_every)
    t = base.t
    ratio = np.full((len(deltas), t.size), np.nan)
    w0, blowup = np.zeros(len(deltas)), np.full(len(deltas), np.nan)
    R0 = float(np.max(np.linalg.norm(system.X, axis=1)))
    radius = np.max(np.linalg.norm(base.X, axis=-1), axis=-1)  # measured support radius of all the runs

    def dist(Xa, Xb):
        if variant.masked:
            return conditional_wasserstein(Xa, Xb, system.positions, p=p, weights=(system.weights, system.weights))
        return wasserstein(Xa, Xb, p=p, method="exact")

    X0 = np.asarray(X0, dtype=float)
    xi = perturb_in_ball(np.zeros_like(X0), 1.0, rng)
    runs = [base.X]
    for k, delta in enumerate(deltas):
        other, sys_y = variant.run(X0 + delta * xi, T, dt=dt, save_every=save_every)
        runs.append(other.X)
        R0 = max(R0, float(np.max(np.linalg.norm(sys_y.X, axis=1))))
        m = min(len(other.t), len(base.t))
        radius[:m] = np.maximum(radius[:m], np.max(np.linalg.norm(other.X[:m], axis=-1), axis=-1))
        radius[m:] = np.inf
        dists = np.array([dist(base.X[i], other.X[i]) for i in range(m)])
        w0[k], ratio[k, :m] = dists[0], dists / dists[0]
        if other.blew_up or base.blew_up:
            blowup[k] = min(x for x in (other.blowup_time, base.blowup_time) if x is not None)
    try:
        log_bound, _ = log_stability_bound(variant.layer, t - t[0], R0, m0=variant.sink_mass)
    except ValueError:  # no explicit constant (Sinkhorn, hardmax), or masked attention without a sink
        log_bound = np.full(t.size, np.nan)
    log_sharp, ok = np.full(t.size, np.nan), np.isfinite(radius)
    try:
        log_sharp[ok] = log_trajectory_bound(variant.layer, t[ok] - t[0], radius[ok], m0=variant.sink_mass)
    except ValueError:  # as above
        pass
    m, log_jacobian = min(len(X) for X in runs), np.full(t.size, np.nan)  # on the base run: the perturbed ones
    log_jacobian[:m] = log_jacobian_bound(  # change log C by < 1e-3 here and would double the cost
        variant.layer, t[:m], [base.X[:m]], weights=system.weights, positions=system.positions
    )
    return {
        "t": t,
        "ratio": ratio,
        "w0": w0,
        "R0": np.array(R0),
        "log_bound": log_bound,
        "log_sharp": log_sharp,
        "log_jacobian": log_jacobian,
        "blowup": blowup,
        "deltas": deltas,
    }
