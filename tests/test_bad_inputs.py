"""Bad inputs across the public API (issue #12): each raises a clear error that names the argument.

Every row of the table is one bad call: the exception type it must raise and the words (argument
names) its message must contain. The runner also checks that no input array is modified and that
no call returns silently (which is how NaNs leaked out before). Run this file as a script to
classify the table instead of asserting: ``clear`` (right type, message names the argument),
``weak`` (raises, but an internal or misnamed error) and ``silent`` (returns).
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

from tokendynamics import attention as att
from tokendynamics import ensembles as en
from tokendynamics import gaussian as ga
from tokendynamics import gradient_flow as gf
from tokendynamics import kuramoto as ku
from tokendynamics import masked as ma
from tokendynamics import meanfield as mf
from tokendynamics import metrics as me
from tokendynamics import odes as od
from tokendynamics import ott_antonsen as oa
from tokendynamics import particles as pa
from tokendynamics import phase as ph
from tokendynamics import projective as pr
from tokendynamics import regimes as rg
from tokendynamics import stability as st
from tokendynamics import sweeps as sw
from tokendynamics import transformer as tf
from tokendynamics import transport as tr
from tokendynamics import variants as va
from tokendynamics import watanabe_strogatz as ws
from tokendynamics.attention import Attention
from tokendynamics.book.studies import gradient_flow as sg
from tokendynamics.book.studies import kuramoto as sk
from tokendynamics.errors import CapabilityError, ConvergenceError, NonFiniteError

# ---------------------------------------------------------------------------------------------
# shared inputs (checked for mutation after every call)
# ---------------------------------------------------------------------------------------------

_rng = np.random.default_rng(0)
X = _rng.uniform(-1, 1, (6, 2))
X3 = _rng.uniform(-1, 1, (6, 3))
XNAN = X.copy()
XNAN[2, 1] = np.nan
U = pa.normalize_rows(X)  # unit tokens
A = np.array([[-1.0, 0.5], [-0.5, -0.5]])
ASYM = np.array([[-1.0, 0.2], [0.2, -0.5]])
I2 = np.eye(2)
A3 = np.eye(3)
ACPLX = A + 1j * np.eye(2)
W = np.full(6, 1 / 6)
POS = np.arange(6.0)
MEAN = np.array([0.3, -0.2])
COV = np.array([[0.5, 0.1], [0.1, 0.3]])
NOTPSD = np.array([[1.0, 2.0], [2.0, 1.0]])
THETA = np.linspace(0.1, 6.0, 8)
VTRACELESS = np.array([[0.5, 1.0], [-1.0, -0.5]])
T_GRID = np.linspace(0.0, 1.0, 11)
SHARED = {
    name: value
    for name, value in dict(globals()).items()
    if isinstance(value, np.ndarray) and name.isupper() and not name.startswith("_")
}
SNAPSHOT = {name: value.copy() for name, value in SHARED.items()}

SOFTMAX = Attention("softmax", A=A, V=I2)
CAUSAL = Attention("softmax", A=A, V=I2, causal=True)
LINEAR = Attention("linear", A=A, V=I2)
LINEAR_BATCH = Attention("linear", A=np.stack([A, A]), V=np.stack([I2, I2]), beta=np.ones(2))
SINKHORN = Attention("sinkhorn", A=A, V=I2)
SIGMOID = Attention("sigmoid", A=A, V=I2)
CLUSTERING = Attention("softmax", A=-I2, V=I2)
LAYER_1D = Attention("softmax", A=[[0.5]], V=[[1.0]])
SYSTEM = ma.with_sink(X, 0.1)


def _f(**kw):  # a module-level function for the sweeps
    return kw


# ---------------------------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------------------------


@dataclass
class Case:
    id: str
    call: Callable[[], object]
    exc: type
    words: tuple[str, ...] = field(default_factory=tuple)


CASES: list[Case] = []
_count = itertools.count()


def case(fn, *args, exc=ValueError, words=(), **kwargs):
    """One bad call of ``fn``: it must raise ``exc`` with a message containing every word of ``words``."""
    words = (words,) if isinstance(words, str) else tuple(words)
    name = f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}-{next(_count)}"
    CASES.append(Case(name, lambda: fn(*args, **kwargs), exc, words))


# -- attention --------------------------------------------------------------------------------
case(Attention, "softmax", A=A, V=I2, causal="no", words="causal")  # was silently causal
case(Attention, "softmax", A=A, V=I2, causal=1, words="causal")
case(Attention, "soft", A=A, V=I2, words="kind")
case(Attention, 3, A=A, V=I2, words="kind")
case(Attention, "softmax", A=ACPLX, V=I2, words="A")  # was cast to real with numpy's warning
case(Attention, "softmax", A=A, V=ACPLX, words="V")
case(Attention, "l2", Q=ACPLX, K=I2, V=I2, words="Q")
case(Attention, "l2", Q=I2, K=ACPLX, V=I2, words="K")
case(Attention, "softmax", A=[[np.nan, 0], [0, 1]], V=I2, words="A")
case(Attention, "softmax", A=np.ones((2, 3)), V=I2, words="A")
case(Attention, "softmax", A=A, words="V")
case(Attention, "softmax", A=A, V=A3, words="V")
case(Attention, "softmax", A="abc", V=I2, words="A")
case(Attention, "softmax", A=A, V=I2, beta=0, words="beta")
case(Attention, "softmax", A=A, V=I2, beta=-1.0, words="beta")
case(Attention, "softmax", A=A, V=I2, beta="1", words="beta")
case(Attention, "softmax", A=A, V=I2, beta=True, words="beta")
case(Attention, "softmax", A=A, V=I2, beta=np.nan, words="beta")
case(Attention, "sinkhorn", A=A, V=I2, eps=0, words="eps")
case(Attention, "sinkhorn", A=A, V=I2, eps="a", words="eps")
case(Attention, "sinkhorn", A=A, V=I2, sinkhorn_iters=2.5, words="sinkhorn_iters")
case(Attention, "sinkhorn", A=A, V=I2, sinkhorn_iters=0, words="sinkhorn_iters")
case(Attention, "sinkhorn", A=A, V=I2, sinkhorn_tol=-1, words="sinkhorn_tol")
case(Attention, "sinkhorn", A=A, V=I2, sinkhorn_tol="a", words="sinkhorn_tol")
case(Attention, "sigmoid", A=A, V=I2, bias=np.nan, words="bias")
case(Attention, "softmax", A=A, V=I2, bias=1.0, words="bias")
case(Attention, "l2", A=A, V=I2, words="Q")
case(att.velocity, X, "softmax", exc=TypeError, words="layer")  # was an AttributeError
case(att.velocity, X, SOFTMAX, positions=POS, words="positions")  # was ignored
case(att.velocity, XNAN, SOFTMAX, words="X")
case(att.velocity, X3, SOFTMAX, words="X")
case(att.velocity, X, SOFTMAX, weights=W[:5], words="weights")
case(att.velocity, X, SOFTMAX, weights=-W, words="weights")
case(att.velocity, X, SOFTMAX, weights=2 * W, words="weights")
case(att.velocity, X, SOFTMAX, backend="gpu", words="backend")
case(att.velocity, X, CAUSAL, positions=POS[:4], words="positions")
case(att.velocity, X, CAUSAL, positions=np.full(6, np.nan), words="positions")
case(att.velocity, X + 1j, SOFTMAX, words="X")
case(att.velocity, X[0], SOFTMAX, words="X")
case(att.velocity, X, SINKHORN, sinkhorn_state="x", exc=TypeError, words="sinkhorn_state")
case(att.attention_matrix, X, SOFTMAX, head=5, words="head")
case(att.attention_matrix, X, SOFTMAX, head=-1, words="head")
case(att.attention_matrix, X, SOFTMAX, head=0.5, words="head")
case(att.attention_matrix, X, None, exc=TypeError, words="layer")

# -- particles --------------------------------------------------------------------------------
case(pa.sample_gaussian, 2.7, MEAN, COV, words="n")  # drew 2 samples
case(pa.sample_gaussian, -1, MEAN, COV, words="n")  # failed inside numpy
case(pa.sample_gaussian, "3", MEAN, COV, words="n")
case(pa.sample_gaussian, 3, [np.nan, 0.0], COV, words="mean")
case(pa.sample_gaussian, 3, MEAN, NOTPSD, words="cov")
case(pa.sample_gaussian, 3, MEAN, A3, words="cov")
case(pa.sample_sphere, 2.7, 2, words="n")
case(pa.sample_sphere, 0, 2, words="n")
case(pa.sample_sphere, 3, 0, words="d")
case(pa.sample_sphere, 3, 2.5, words="d")
case(pa.normalize_rows, [[0.0, 0.0]], words="X")
case(pa.normalize_rows, XNAN, words="X")
case(pa.circle_tokens, [np.nan], words="theta")
case(pa.angles, X3, words="X")
case(pa.project_tangent, X, X3, words="U")
case(pa.simulate, XNAN, SOFTMAX, 1.0, dt=0.1, words="X0")
case(pa.simulate, X, SOFTMAX, 1.0, words="dt")
case(pa.simulate, X, SOFTMAX, 1.0, dt=0, words="dt")
case(pa.simulate, X, SOFTMAX, 1.0, dt=-1.0, words="dt")
case(pa.simulate, X, SOFTMAX, 1.0, dt="a", words="dt")
case(pa.simulate, X, SOFTMAX, 1.0, dt=0.1, method="rk5", words="method")
case(pa.simulate, X, SOFTMAX, 1.0, method="adaptive", dt=0, words="dt")  # was a ZeroDivisionError
case(pa.simulate, X, SOFTMAX, 1.0, method="adaptive", rtol=-1, words="rtol")  # ran with scipy's clamp
case(pa.simulate, X, SOFTMAX, 1.0, method="adaptive", atol=0, words="atol")
case(pa.simulate, X, SOFTMAX, 1.0, method="adaptive", solver="FOO", words="solver")  # was scipy's `method`
case(pa.simulate, X, SOFTMAX, 1.0, dt=0.1, on_blowup="ignore", words="on_blowup")
case(pa.simulate, X, SOFTMAX, 1.0, dt=0.1, blowup_threshold=0, words="blowup_threshold")
case(pa.simulate, X, SOFTMAX, 1.0, dt=0.1, save_every=0, words="save_every")
case(pa.simulate, X, SOFTMAX, 1.0, dt=0.1, save_every=1.5, words="save_every")
case(pa.simulate, U, SOFTMAX, 1.0, dt=0.1, sphere="yes", words="sphere")
case(pa.simulate, X, SOFTMAX, 1.0, dt=0.1, sphere=True, words="sphere")
case(pa.simulate, X, SOFTMAX, (1.0, 0.0), dt=0.1, words="t_span")
case(pa.simulate, X, SOFTMAX, "a", dt=0.1, words="t_span")
case(pa.simulate, X, SOFTMAX, np.nan, dt=0.1, words="t_span")
case(pa.simulate, X, "softmax", 1.0, dt=0.1, exc=TypeError, words="layer")
case(pa.simulate, X, SOFTMAX, 1.0, dt=0.1, positions=POS, words="positions")
case(pa.simulate, X, SOFTMAX, 1.0, dt=0.1, weights=W[:3], words="weights")
case(pa.simulate, X, SOFTMAX, 1.0, method="adaptive", t_eval=[0.0, 2.0], words="t_eval")
case(pa.simulate, X3, SOFTMAX, 1.0, dt=0.1, words="X0")
case(pa.simulate, X, SOFTMAX, 1.0, dt=0.1, backend="gpu", words="backend")
case(pa.simulate, X, SOFTMAX, 1.0, dt=0.1, seed=-1, words="seed")
case(pa.simulate, X, SOFTMAX, 1.0, dt=0.1, t_eval=[0.0, 1.0], words="t_eval")  # was ignored by rk4
case(pa.particle_field, X, "x", exc=TypeError, words="layer")
case(pa.particle_field, U, SOFTMAX, sphere="no", words="sphere")

# -- transport --------------------------------------------------------------------------------
case(tr.wasserstein, X, X, weights=W, words="weights")  # was an unpacking error
case(tr.wasserstein, X, X3, words="X and Y")
case(tr.wasserstein, X, X, p=0.5, words="p")
case(tr.wasserstein, X, X, p="2", words="p")
case(tr.wasserstein, X, X, method="fast", words="method")
case(tr.wasserstein, XNAN, X, words="X")
case(tr.wasserstein, X, X, weights=(-W, None), words="weights[0]")
case(tr.wasserstein, X, X, method="sliced", n_projections=0, words="n_projections")
case(tr.wasserstein, X, X + 1j, words="Y")
case(tr.bures_wasserstein, [np.nan, 0], COV, MEAN, COV, words="m1")
case(tr.bures_wasserstein, MEAN, COV, [0, 0, 0], A3, words="m2")
case(tr.bures_wasserstein, MEAN, NOTPSD, MEAN, COV, words="S1")
case(tr.wasserstein_gaussian_1d, X[:, 0], "a", 1.0, words="mean")
case(tr.wasserstein_gaussian_1d, X[:, 0], 0.0, -1.0, words="std")
case(tr.wasserstein_gaussian_1d, [np.nan], 0.0, 1.0, words="x")
case(tr.conditional_wasserstein, X, X, POS[:3], words="positions")
case(tr.conditional_wasserstein, X, X, POS, reduce="max", words="reduce")
case(tr.conditional_wasserstein, X, X, POS, bins=0, words="bins")
case(tr.psd_sqrt, [[np.nan, 0], [0, 1]], words="S")
case(tr.psd_sqrt, np.ones((2, 3)), words="S")

# -- gaussian ---------------------------------------------------------------------------------
case(ga.gaussian_velocity, MEAN, COV, "layer", exc=TypeError, words="layer")
case(ga.gaussian_velocity, MEAN, NOTPSD, SOFTMAX, words="cov")
case(ga.gaussian_velocity, [np.nan, 0], COV, SOFTMAX, words="mean")
case(ga.gaussian_velocity, MEAN, COV, SIGMOID, exc=ga.NotGaussianPreservingError, words="layer")
case(ga.gaussian_rhs, [0, 0, 0], COV, SOFTMAX, words="mean")
case(ga.solve_gaussian, MEAN, COV, SOFTMAX, None, words="t_span")
case(ga.solve_gaussian, MEAN, COV, SOFTMAX, 1.0, mode="fast", words="mode")
case(ga.solve_gaussian, MEAN, COV, SOFTMAX, 1.0, method="FOO", words="method")
case(ga.solve_gaussian, MEAN, COV, SOFTMAX, 1.0, rtol=-1, words="rtol")
case(ga.solve_gaussian, MEAN, COV, SOFTMAX, 1.0, blowup_trace=0, words="blowup_trace")
case(ga.solve_gaussian, MEAN, COV, SOFTMAX, 1.0, on_blowup="x", words="on_blowup")
case(ga.solve_gaussian, MEAN, COV, SOFTMAX, 1.0, step=0.1, words="step")  # projected_euler's option, not this one's
case(ga.solve_gaussian, MEAN, COV, SOFTMAX, 1.0, mode="faithful", words="mode")
case(ga.projected_euler, COV, SOFTMAX, step=-1.0, words="step")
case(ga.solve_gaussian, [np.nan, 0], COV, SOFTMAX, 1.0, words="mean0")
case(ga.solve_gaussian, MEAN, NOTPSD, SOFTMAX, 1.0, words="cov0")
case(ga.solve_gaussian, MEAN, COV, SOFTMAX, 1.0, t_eval=[0.0, 2.0], words="t_eval")
case(ga.projected_euler, COV, SOFTMAX, step=0, words="step")
case(ga.projected_euler, COV, SOFTMAX, step=0.1, max_iter=0, words="max_iter")
case(ga.projected_euler, COV, SOFTMAX, step=0.1, tol_high=-1, words="tol_high")
case(ga.projected_euler, A3, SOFTMAX, step=0.1, words="cov0")
case(ga.projected_euler, COV, SOFTMAX, step=0.1, backend="gpu", words="backend")
case(ga.empirical_moments, XNAN, words="X")  # returned NaN moments
case(ga.empirical_moments, X, weights=W[:2], words="weights")
case(ga.gauss_hermite, MEAN, COV, k=0, words="k")
case(ga.gauss_hermite, MEAN, COV, k=2.5, words="k")
case(ga.gauss_hermite, [np.nan, 0], COV, words="mean")
case(ga.covariance_eigenvalues, [[np.nan, 0], [0, 1]], words="cov")
case(ga.covariance_eigenvalues, np.ones((2, 3)), words="cov")
case(ga.one_dimensional_solution, "a", 1.0, LAYER_1D, 1.0, words="mean0")
case(ga.one_dimensional_solution, 0.0, -1.0, LAYER_1D, 1.0, words="var0")
case(ga.one_dimensional_solution, 0.0, 1.0, LAYER_1D.with_(A=[[-0.5]]), -2.0, words="backward pole")  # gave NaN
case(ga.isotropic_covariance, COV, SOFTMAX.with_(A=I2), np.nan, words="t")
case(ga.blowup_time, NOTPSD, SOFTMAX.with_(A=I2), words="cov0")
case(ga.rank_one_velocity, [np.nan, 0.0], SOFTMAX, words="z")
case(ga.decoupled_mean, [1.0, 2.0, 3.0], SINKHORN, 1.0, words="mean0")
case(ga.clustering_limit, COV, CLUSTERING, tol=-1, words="tol")

# -- gradient_flow ----------------------------------------------------------------------------
case(gf.interaction_energy, XNAN, SOFTMAX, words="X")
case(gf.interaction_energy, X3, SOFTMAX, words="X")
case(gf.interaction_energy, X, "A", exc=TypeError, words="layer")
case(gf.interaction_energy, X, SOFTMAX, log="yes", words="log")
case(gf.energy_rate, X, "layer", exc=TypeError, words="layer")
case(gf.twisted_matrix, SOFTMAX, words="A")  # not symmetric
case(gf.twisted_matrix, SOFTMAX.with_(A=np.zeros((2, 2))), words="A")  # not invertible
case(gf.kinetic_norm, XNAN, words="U")
case(gf.kinetic_norm, X, M=NOTPSD, words="M")
case(gf.sinkhorn_energy, MEAN, COV, SINKHORN, words="A")  # not symmetric
ONE_ITERATION = SINKHORN.with_(A=ASYM, sinkhorn_iters=1)
case(gf.sinkhorn_energy_empirical, X, ONE_ITERATION, exc=ConvergenceError, words="sinkhorn_iters")
case(gf.twisted_wasserstein, X, X3, I2, words="Y")
case(gf.twisted_bures_wasserstein, MEAN, COV, [np.nan, 0], COV, I2, words="m2")
case(gf.second_variation, X, X3, SOFTMAX, words="U")
case(gf.dirac_second_variation, [np.nan, 0.0], [1.0, 0.0], SOFTMAX, words="x0")
case(gf.finite_difference_gradient, "f", MEAN, COV, exc=TypeError, words="fun")
case(gf.bw_gradient_velocity, [np.nan, 0], COV, COV, words="grad_mean")
case(gf.energy_curve, X, SOFTMAX, words="Xs")
case(gf.layer_matrices, SOFTMAX.with_(A=np.stack([A, A]), V=np.stack([I2, I2])), words="one head")

# -- book.studies.gradient_flow ---------------------------------------------------------------
case(sg.sign_rule_survey, 0, words="cases")
case(sg.sign_rule_survey, 3, kind="linear", words="kind")
case(sg.gaussian_energy_curves, MEAN, COV, SOFTMAX, 0.0, words="T")
case(sg.gaussian_energy_curves, MEAN, COV, SOFTMAX, 1.0, n_times=1, words="n_times")
case(sg.descent_profile, "traj", exc=TypeError, words="traj")

# -- kuramoto ---------------------------------------------------------------------------------
case(ku.complex_parts, A3, words="M")
case(ku.coefficients, SOFTMAX, exc=CapabilityError, words="softmax")  # not linear attention
case(ku.coefficients, Attention("linear", A=A3, V=A3), words="d = 2")
case(ku.coefficients, I2, exc=TypeError, words="layer")
case(ku.phase_velocity, [np.nan, 1.0], LINEAR, words="theta")
case(ku.phase_velocity, THETA, LINEAR.with_(causal=True), words="causal")
case(ku.order_parameter, THETA, m=0, words="m")
case(ku.order_parameter, THETA, m=1.5, words="m")
case(ku.order_parameter, [], words="theta")
case(ku.solve_phases, THETA, LINEAR, method="FOO", words="method")
case(ku.solve_phases, THETA, LINEAR, t_span=-1.0, words="t_span")
case(ku.solve_phases, THETA, LINEAR, rtol=0, words="rtol")
case(ku.cluster_velocity, np.nan, LINEAR, words="theta")
case(ku.transverse_exponent, THETA, SOFTMAX, exc=CapabilityError, words="softmax")

# -- watanabe_strogatz ------------------------------------------------------------------------
case(ws.solve_watanabe_strogatz, THETA, LINEAR, alpha0=2.0, words="alpha0")
case(ws.solve_watanabe_strogatz, THETA, LINEAR, alpha0="a", words="alpha0")
case(ws.solve_watanabe_strogatz, np.ones((2, 3)), LINEAR, words="theta0")
case(ws.solve_watanabe_strogatz, THETA, LINEAR, method="FOO", words="method")
case(ws.solve_watanabe_strogatz, THETA, LINEAR_BATCH, exc=TypeError, words="batch")
case(ws.ws_reconstruct, [0.1, 0.2], [0.0], THETA, THETA, words="alpha")
case(ws.ws_reconstruct, [np.nan], [0.0], THETA, THETA, words="alpha")
case(ws.ws_reconstruct, [0.1], [0.0], [np.nan], [0.2], words="c")

# -- ott_antonsen -----------------------------------------------------------------------------
case(oa.ott_antonsen_rhs, "z", LINEAR, words="z")
case(oa.ott_antonsen_rhs, np.nan, LINEAR, words="z")
case(oa.solve_ott_antonsen, 2.0, LINEAR, words="z0")
case(oa.solve_ott_antonsen, 0.1, LINEAR, method="FOO", words="method")
case(oa.solve_ott_antonsen, 0.1, LINEAR, method="rk4", dt=0, words="dt")
case(oa.solve_ott_antonsen, 0.1, LINEAR, rtol=-1, words="rtol")
case(oa.solve_ott_antonsen, 0.1, LINEAR, events="x", exc=TypeError, words="events")
case(oa.solve_ott_antonsen, [0.1, 0.2, 0.3], LINEAR_BATCH, exc=ValueError, words="broadcast")
case(oa.sample_ott_antonsen, 0.1, 2.5, words="n")
case(oa.sample_ott_antonsen, 0.1, -1, words="n")
case(oa.sample_ott_antonsen, 1.0, 5, words="z0")

# -- regimes ----------------------------------------------------------------------------------
case(rg.case1_region, A3, words="A")
case(rg.snic_family, np.nan, words="a")
case(rg.predict_regime, LINEAR, z0=2.0, words="z0")
case(rg.predict_regime, LINEAR, z0="a", words="z0")
case(rg.predict_regime, LINEAR_BATCH, exc=TypeError, words="batch")
case(rg.classify_regime, LINEAR, T=-1.0, words="T")
case(rg.classify_regime, LINEAR, window=2.0, words="window")
case(rg.rotation_period, LINEAR, T=0.0, words="T")
case(rg.hamiltonian, 0.1, LINEAR.with_(A=I2, V=I2), words="tr V")
case(rg.hamiltonian, 1.0, LINEAR.with_(A=I2, V=VTRACELESS), words="|z| < 1")
case(rg.hamiltonian, 0.1, LINEAR.with_(V=VTRACELESS), words="A = I")

# -- book.studies.kuramoto --------------------------------------------------------------------
case(sk.case1_matrix, "a", 1.0, words="tr")
case(sk.oa_accuracy, LINEAR, ns=[0], words="ns")
case(sk.oa_accuracy, LINEAR, seeds=0, words="seeds")
case(sk.sampled_period, T_GRID, np.zeros(3, complex), words="t and R")
case(sk.regime_portrait, LINEAR, n_grid=1, words="n_grid")
case(sk.regime_portrait, LINEAR, dt=0.0, words="dt")

# -- projective -------------------------------------------------------------------------------
case(pr.projective_flow, U, SOFTMAX, 1.0, words="layer")
case(pr.projective_flow, U, "x", 1.0, exc=TypeError, words="layer")
case(pr.projective_flow, X, LINEAR, 1.0, words="X0")
case(pr.projective_flow, U, LINEAR, 1.0, solver="FOO", words="solver")
case(pr.projective_flow, U, LINEAR, 1.0, until="a", words="until")
case(pr.projective_flow, XNAN, LINEAR, 1.0, words="X0")

# -- metrics ----------------------------------------------------------------------------------
case(me.second_moment, XNAN, words="X")
case(me.order_parameters, X[0], words="X")
case(me.top_direction, X[:1], words="X")
case(me.detect_clusters, U, threshold=2.0, words="threshold")
case(me.detect_clusters, U, threshold="a", words="threshold")
case(me.sorted_gram, U, axis=[1.0, 2.0, 3.0], words="axis")
case(me.first_passage_times, T_GRID, T_GRID[:3], words="t and R")
case(me.first_passage_times, T_GRID, T_GRID, levels=[np.nan], words="levels")
case(me.axis_speed, T_GRID[::-1], np.ones((11, 2)), words="t")

# -- variants ---------------------------------------------------------------------------------
case(va.multihead_from_rows, I2, A, I2, 0, words="n_heads")
case(va.multihead_from_rows, I2, A, I2, 3, words="n_heads")
case(va.multihead_from_rows, I2, A, I2, 1, scale=0.0, words="scale")
case(va.multihead_from_rows, I2, A, ACPLX, 1, words="V")
case(va.sigmoid_layer, A, I2, normalization="max", words="normalization")
case(va.sigmoid_layer, A, I2, normalization="sum", words="n")
case(va.sigmoid_layer, A, I2, normalization="sum", n=2.5, words="n")
case(va.sigmoid_layer, A, I2, bias="log n", n=5, words="bias")

# -- masked -----------------------------------------------------------------------------------
case(ma.with_sink, X, 1.0, words="m0")
case(ma.with_sink, X, "a", words="m0")
case(ma.with_sink, X, 0.1, positions=POS, words="positions")
case(ma.with_sink, X, 0.1, sink=[[np.nan, 0.0]], words="sink")
case(ma.sink_attention, X, CAUSAL, "system", exc=TypeError, words="system")

# -- stability --------------------------------------------------------------------------------
case(st.support_speed, SOFTMAX, -1.0, words="R")
case(st.lipschitz_constants, SOFTMAX, "a", words="R")
case(st.log_stability_bound, SOFTMAX, [0.0, 1.0], -1.0, words="R0")
case(st.log_stability_bound, SOFTMAX, [1.0, 2.0], 1.0, words="t")
case(st.log_stability_bound, SOFTMAX, [0.0, 1.0], 1.0, substeps=0, words="substeps")
case(st.log_trajectory_bound, SOFTMAX, [0.0, 1.0], [1.0, -1.0], words="R")
case(st.log_trajectory_bound, SOFTMAX, [1.0, 2.0], [1.0, 1.0], words="t")

# -- meanfield --------------------------------------------------------------------------------
case(mf.blowup_time_1d, 0.0, 1.0, 1.0, words="sigma0")
case(mf.blowup_time_1d, 1.0, "a", 1.0, words="a")
case(mf.gaussian_1d_solution, 1.0, 0.0, 1.0, np.nan, 1.0, words="a")
case(mf.gaussian_1d_flow_map, X[:, 0], 1.0, 0.0, -1.0, 1.0, 1.0, words="sigma0")

# -- transformer ------------------------------------------------------------------------------
case(tf.forward, XNAN, SOFTMAX, 1.0, 4, words="X0")
case(tf.forward, X, SOFTMAX, 0.0, 4, words="T")
case(tf.forward, X, SOFTMAX, 1.0, 0, words="L")
case(tf.forward, X, SOFTMAX, 1.0, 2.5, words="L")
case(tf.forward, X, SOFTMAX, 1.0, 4, norm="layer", words="norm")
case(tf.forward, X, SOFTMAX, 1.0, 4, norm="sphere", words="X0")  # not unit tokens
case(tf.forward, X, "softmax", 1.0, 4, exc=TypeError, words="layer")
case(tf.forward, X, [SOFTMAX] * 3, 1.0, 4, words="L = 4")
case(tf.forward, X, [SOFTMAX, "x"], 1.0, 2, exc=TypeError, words="layer[1]")
case(tf.forward, X3, SOFTMAX, 1.0, 4, words="layer[0]")
case(tf.forward, X, SOFTMAX, 1.0, 4, mlp="relu", exc=TypeError, words="mlp")
case(tf.forward, X, SOFTMAX, 1.0, 4, rng=0, words="rng")
case(tf.forward, X[:, :1], LAYER_1D, 1.0, 4, norm="pre", words="d >= 2")
case(tf.MLP, 0, 1.0, words="width")
case(tf.MLP, 4, -1.0, words="strength")
case(tf.MLP, 4, 1.0, "gelu", words="activation")
case(tf.layer_norm, X, eps=0, words="eps")
case(tf.layer_norm, XNAN, words="X")

# -- sweeps -----------------------------------------------------------------------------------
case(sw.grid, beta=5, words="axis 'beta'")
case(sw.grid, beta=[], words="axis 'beta'")
case(sw.sweep, "f", [{}], exc=TypeError, words="fn")
case(sw.sweep, _f, [1], words="points")
case(sw.sweep, _f, [{"a": 1}], a=2, words="['a']")
case(sw.sweep, _f, [{}], n_jobs=0, words="n_jobs")
case(sw.sweep, _f, [{}], progress="yes", words="progress")
case(sw.mean_by, [], "d", words="results")
case(sw.mean_by, [{"d": 1}], "d", "t", words="['t']")


def _small_budget(fn):
    """``fn`` with the evaluation budget of the adaptive reductions lowered to 20 000 (the default is reached the
    same way, only 25 times later): the run must stop at the budget with a ConvergenceError naming max_nfev."""

    def call(*args, **kwargs):
        default = od.MAX_EVALUATIONS
        od.MAX_EVALUATIONS = 20_000
        try:
            return fn(*args, **kwargs)
        finally:
            od.MAX_EVALUATIONS = default

    call.__module__, call.__name__ = fn.__module__, fn.__name__
    return call


# -- work, memory and seeds (issue 24): refused up front, in one line naming the argument ------------------
case(pa.simulate, U, SOFTMAX, 1e9, dt=1e-3, words=("max_steps", "dt"))  # 1e12 steps: refused before the first
case(en.simulate_batch, np.stack([U, U]), SOFTMAX, 1e9, dt=1e-3, words="max_steps")
case(pa.simulate, U, SOFTMAX, 10.0, dt=0.1, max_steps=5, words="max_steps")
case(pa.simulate, U, SOFTMAX, 10.0, dt=0.1, max_steps=0, words="max_steps")
case(_small_budget(ku.solve_phases), THETA, LINEAR, 1e12, exc=ConvergenceError, words="max_nfev")  # stops at the budget
case(_small_budget(ws.solve_watanabe_strogatz), THETA, LINEAR, 1e12, exc=ConvergenceError, words="max_nfev")
case(od.solve_ode, lambda t, y: -y, [1.0], (0.0, 1e12), max_nfev=100, exc=ConvergenceError, words="max_nfev")
case(od.solve_ode, lambda t, y: -y, [1.0], (0.0, 1.0), max_nfev=0, words="max_nfev")
case(od.step_count, 0.0, 1e9, 1e-3, words=("max_steps", "dt"))
case(od.step_count, 0.0, 1.0, np.nan, words="dt")
case(od.step_count, 0.0, 1.0, -0.1, words="dt")
case(pa.sample_sphere, 10**10, 1, exc=MemoryError, words=("n = 10000000000", "GiB"))
case(pa.sample_sphere, 10**400, 2, exc=MemoryError, words="GiB")  # an int too large for a float
case(pa.sample_gaussian, 10**11, MEAN, COV, exc=MemoryError, words=("n = 100000000000", "GiB"))
case(en.sample_clouds, 10**6, 10**4, 3, exc=MemoryError, words=("size = 1000000", "GiB"))
case(tf.forward, U, SOFTMAX, 1.0, 10**12, exc=MemoryError, words=("L = 1000000000000", "GiB"))
case(att.velocity, np.zeros((30_000, 2)), SINKHORN, exc=MemoryError, words=("n = 30000", "GiB"))
case(pa.sample_sphere, 4, 2, rng="abc", exc=TypeError, words="rng")
case(pa.sample_sphere, 4, 2, rng=1.5, exc=TypeError, words="rng")
case(pa.sample_sphere, 4, 2, rng=-3, exc=TypeError, words="rng")
case(pa.sample_gaussian, 4, MEAN, COV, rng=True, exc=TypeError, words="rng")
case(en.sample_clouds, 2, 4, 2, "abc", exc=TypeError, words="rng")
case(en.recipe_matrices, "gaussian", 2, 3, rng=[1.5], exc=TypeError, words="rng")
case(tf.forward, U, SOFTMAX, 1.0, 4, mlp=tf.MLP(8, 1.0), rng="seed", exc=TypeError, words="rng")
case(en.simulate_batch, np.stack([U, U]), SOFTMAX, 1.0, dt=0.1, sphere="no", words="sphere")
case(en.simulate_batch, np.stack([U, U]) + 0j, SOFTMAX, 1.0, dt=0.1, words="X0")
case(en.simulate_batch, np.stack([U, U]), SOFTMAX, 1.0, dt=np.inf, words="dt")
case(en.simulate_batch, np.stack([U, U]), SOFTMAX, 1.0, dt=0.1, backend="gpu", words="backend")
case(en.simulate_batch, np.stack([U, U]), SIGMOID, 1.0, dt=0.1, backend="numba", words="numba")
case(en.simulate_batch, np.stack([U, U]), SOFTMAX, np.nan, dt=0.1, words="t_span")
case(pa.simulate, U, SOFTMAX, 2.0, method="adaptive", t_eval=[0.0, np.nan, 1.0], words="t_eval")
case(pa.simulate, U, SOFTMAX, 2.0, method="adaptive", stop_when=lambda X: np.nan, words="stop_when")
case(pa.simulate, U, SOFTMAX, 2.0, method="adaptive", rtol=np.nan, words="rtol")
case(pa.simulate, U, SOFTMAX, 2.0, method="adaptive", atol=-1.0, words="atol")
case(pa.sample_sphere, np.float64(np.inf), 2, words="n")
case(oa.solve_ott_antonsen, 0.3 + 0.1j, LINEAR, 1e12, method="rk4", dt=0.01, words=("max_steps", "dt"))
case(_small_budget(oa.solve_ott_antonsen), 0.3 + 0.1j, LINEAR, 1e12, exc=ConvergenceError, words="max_nfev")
case(ga.projected_euler, COV, CLUSTERING, step=1e-6, max_iter=10**13, words="max_iter")
case(_small_budget(pr.projective_flow), U, LINEAR, 1e12, exc=ConvergenceError, words="max_nfev")


# -- issue 24, fourth pass: what a new campaign of 374 cases found (each now refused, naming its argument) ---------
LOGK = -np.abs(np.subtract.outer(np.arange(4.0), np.arange(4.0)))
LOGW = np.log(np.full(4, 0.25))
SINKHORN_ARGS = {"eps": 1.0, "max_iter": 10, "tol": 1e-9}
TRAJ = pa.simulate(U, SOFTMAX, 1.0, dt=0.1)
BATCH = en.simulate_batch(np.stack([U, U]), SOFTMAX, 1.0, dt=0.1, backend="numpy")
case(tr.sinkhorn_potentials, LOGK, LOGW, eps=0.0, max_iter=10, tol=1e-9, words="eps")  # returned NaN potentials
case(tr.sinkhorn_potentials, LOGK, LOGW, eps=1.0, max_iter=0, tol=1e-9, words="max_iter")
case(tr.sinkhorn_potentials, LOGK, LOGW, eps=1.0, max_iter=10, tol=-1.0, words="tol")
case(tr.sinkhorn_potentials, LOGK, LOGW, **SINKHORN_ARGS, memory=-1, words="memory")
case(tr.sinkhorn_potentials, np.full((4, 4), np.nan), LOGW, **SINKHORN_ARGS, words="logK")
case(tr.sinkhorn_potentials, LOGK[:3], LOGW, **SINKHORN_ARGS, words="logK")  # was numpy's reshape error
case(tr.sinkhorn_potentials, LOGK, LOGW, **SINKHORN_ARGS, g0=np.zeros(7), words="g0")  # was a broadcast error
case(tr.sinkhorn_potentials, LOGK, LOGW, eps=1.0, max_iter=10**12, tol=1e-300, words=("max_iter", "budget"))  # hung
case(Attention, "sinkhorn", A=A, V=I2, sinkhorn_iters=10**12, words=("sinkhorn_iters", "budget"))
case(tf.forward, X[:1, :1], LAYER_1D, 1.0, 10**8, words=("L", "budget"))  # 1e8 blocks ran
case(
    tr.wasserstein,
    np.zeros((60_000, 2)),
    np.zeros((60_000, 2)),
    method="exact",
    exc=MemoryError,
    words=("n = 60000", "GiB"),
)
case(tr.wasserstein, X, X, method="sliced", n_projections=10**12, exc=MemoryError, words=("n_projections", "GiB"))
case(ga.gauss_hermite, MEAN, COV, k=10**7, exc=MemoryError, words=("k = 10000000", "GiB"))
case(oa.poisson_kernel_atoms, 0.3, m=10**12, exc=MemoryError, words=("m = 1000000000000", "GiB"))
case(oa.sample_ott_antonsen, 0.3, 10**11, exc=MemoryError, words=("n = 100000000000", "GiB"))
case(me.pair_overlaps, np.ones((60_000, 3)), exc=MemoryError, words=("n = 60000", "GiB"))  # hung
case(tf.forward, U, SOFTMAX, 1.0, 4, mlp=tf.MLP(10**11, 1.0), exc=MemoryError, words=("width", "GiB"))
case(en.recipe_matrices, "gaussian", 2, 10**12, exc=MemoryError, words=("size = 1000000000000", "GiB"))
case(od.solve_ode, lambda t, y: -y, [1.0], 1.0, rtol=np.nan, words="rtol")  # a number span was 'not subscriptable'
case(od.solve_ode, lambda t, y: -y, [np.nan], 1.0, words="y0")
case(od.solve_ode, lambda t, y: -y, [1.0], 1.0, t_eval=[0.5, np.nan], words="t_eval")
case(od.solve_ode, "f", [1.0], 1.0, exc=TypeError, words="rhs")
case(od.solve_ode, lambda t, y: y * np.nan, [1.0], 1.0, exc=NonFiniteError, words="not finite")  # ran to max_nfev
case(od.step_count, 1.0, 0.0, 0.1, words="T")  # returned a step count
case(pa.simulate, U, SOFTMAX, 1.0, method="adaptive", stop_when=lambda Y: "a", words="stop_when")
case(pa.simulate, U, SOFTMAX, 1.0, method="adaptive", stop_when=lambda Y: np.ones(2), words="stop_when")
case(pa.rotation_matrix, np.nan, words="theta")  # returned NaN
case(pa.rotation_matrix, "a", words="theta")
case(TRAJ.at, np.nan, words="time")  # returned the first frame
case(TRAJ.at, 100.0, words="time")  # returned the last frame
case(BATCH.system, -5, words="b")  # was numpy's negative indexing
case(BATCH.system, 1.5, words="b")
case(oa.solve_ott_antonsen, 0.3, LINEAR, events=[lambda t, z: np.nan], words="events")  # was ignored
case(oa.solve_ott_antonsen, np.bool_(False), LINEAR, words="z0")  # a boolean taken as 0
case(oa.sample_ott_antonsen, 0.3, 10, rng="x", exc=TypeError, words="rng")  # was numpy's SeedSequence error
case(oa.poisson_kernel_atoms, np.nan, m=10, words="z")
case(gf.linearize, U, SOFTMAX, tol=-1.0, words="tol")
case(gf.linearize, U, SOFTMAX, sphere="yes", words="sphere")
case(gf.finite_difference_gradient, lambda m, S: np.nan, MEAN, COV, words="fun")  # returned NaN
case(gf.energy_curve, np.stack([X, XNAN]), SOFTMAX, words="Xs")
case(tr.psd_sqrt, COV, pinv_rtol=-1.0, words="pinv_rtol")
case(ph.crossing, [1.0, 2.0, 3.0], [0.1, 0.6, 0.9], level=np.nan, words="level")
case(att.attention_matrix, X, SOFTMAX, return_info="yes", words="return_info")
case(me.plane_order_parameters, X3, planes=[(0, 0)], words="planes")
case(me.plane_order_parameters, X3, planes=[(0.5, 1)], words="planes")
case(me.axis_speed, T_GRID, np.ones(11), words="axis")
case(tf.layer_norm, "abc", words="X")
case(ku.linear_layers, "a", I2, words="A")
case(en.Schedule, (), 1.0, words="layers")
case(Attention, "softmax", A=A, V=I2, beta=np.ones(2), words=("A", "beta"))  # named A only
case(ga.projected_euler, COV, SOFTMAX, step=0.1, tol_low=10.0, tol_high=1.0, backend="numpy", words="tol_low")


# ---------------------------------------------------------------------------------------------
# the runner
# ---------------------------------------------------------------------------------------------


def classify(c: Case) -> tuple[str, str]:
    """``("clear" | "weak" | "silent", what happened)`` for one case."""
    try:
        out = c.call()
    except Exception as exc:  # noqa: BLE001 - classifying every exception is the point
        msg = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, c.exc) and all(w in str(exc) for w in c.words):
            return "clear", msg
        return "weak", msg
    nan = ""
    try:
        if not np.all(np.isfinite(np.asarray(out, dtype=complex))):
            nan = " (with NaN/inf)"
    except (TypeError, ValueError):
        pass
    return "silent", f"returned {type(out).__name__}{nan}"


def test_the_table_covers_every_module_and_is_large_enough():
    modules = {c.id.split(".")[0] for c in CASES}
    assert len(CASES) >= 150
    assert modules >= {
        "attention",
        "particles",
        "transport",
        "gaussian",
        "gradient_flow",
        "kuramoto",
        "watanabe_strogatz",
        "ott_antonsen",
        "regimes",
        "projective",
        "metrics",
        "variants",
        "masked",
        "stability",
        "meanfield",
        "sweeps",
        "transformer",
        "ensembles",
        "odes",
    }


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_bad_input_raises_a_clear_error_naming_the_argument(c):
    verdict, what = classify(c)
    for name, value in SHARED.items():  # no input array is modified
        np.testing.assert_array_equal(value, SNAPSHOT[name], err_msg=f"{c.id} modified {name}")
    assert verdict == "clear", f"{c.id}: expected {c.exc.__name__} naming {c.words}, got {what}"


if __name__ == "__main__":  # python tests/test_bad_inputs.py: the counts (before/after a change)
    import warnings

    warnings.simplefilter("ignore")
    counts = {"clear": 0, "weak": 0, "silent": 0}
    for c in CASES:
        verdict, what = classify(c)
        counts[verdict] += 1
        if verdict != "clear" and "-v" in sys.argv:
            print(f"{verdict:6s} {c.id}: {what[:160]}")
    print(f"{len(CASES)} cases: {counts['clear']} clear, {counts['weak']} weak, {counts['silent']} silent")
