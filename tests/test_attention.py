"""Tests of ``tokendynamics.attention``: the layer, the attention matrix and the velocity field of every
variant, against a direct evaluation of its definition.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from tests.helpers import sigmoid
from tokendynamics import (
    Attention,
    ConvergenceError,
    NonFiniteError,
    attention_matrix,
    simulate,
    velocity,
)
from tokendynamics.transport import sinkhorn_potentials

KINDS_A = ["softmax", "unnormalized_softmax", "linear", "sinkhorn", "sigmoid"]


def loop_field(
    X, kind, A=None, V=None, Q=None, K=None, beta=1.0, w=None, bias=0.0, causal=False, positions=None, eps=1.0
):
    """Double-loop evaluation of the definitions of the variants of both papers (one head)."""
    n, d = X.shape
    w = np.full(n, 1.0 / n) if w is None else w
    s = np.arange(n) if positions is None else positions
    if kind == "sinkhorn":
        P = loop_sinkhorn(X, A, beta, w, eps)
    out = np.zeros((n, d))
    for i in range(n):
        num = np.zeros(d)
        den = 0.0
        for j in range(n):
            if causal and s[j] > s[i]:
                continue
            vx = V @ X[j]
            if kind == "l2":
                diff = Q @ X[i] - K @ X[j]
                k = w[j] * math.exp(-beta * float(diff @ diff))
                num += k * vx
                den += k
                continue
            score = beta * float(X[i] @ A @ X[j])
            if kind == "softmax":
                k = w[j] * math.exp(score)
                num += k * vx
                den += k
            elif kind == "unnormalized_softmax":
                num += w[j] * math.exp(score) * vx
            elif kind == "linear":
                num += w[j] * score * vx
            elif kind == "sigmoid":
                num += w[j] * sigmoid(score + bias) * vx
            elif kind == "sinkhorn":
                num += P[i, j] * vx
        out[i] = num / den if kind in ("softmax", "l2") else num
    return out


def loop_sinkhorn(X, A, beta, w, eps, iters=5000):
    """Plain (exponential-domain) Sinkhorn scaling with loops: P = diag(u) K diag(v w)."""
    n = X.shape[0]
    Kmat = np.array([[math.exp(beta * float(X[i] @ A @ X[j]) / eps) for j in range(n)] for i in range(n)])
    u = np.ones(n)
    v = np.ones(n)
    for _ in range(iters):
        u = 1.0 / np.array([sum(Kmat[i, j] * v[j] * w[j] for j in range(n)) for i in range(n)])
        v = 1.0 / np.array([sum(w[i] * u[i] * Kmat[i, j] for i in range(n)) for j in range(n)])
    u = 1.0 / (Kmat @ (v * w))
    return u[:, None] * Kmat * (v * w)[None, :]


@pytest.fixture
def data():
    rng = np.random.default_rng(1234)
    n, d = 9, 3
    X = rng.standard_normal((n, d))
    A = rng.standard_normal((d, d)) / 2
    V = rng.standard_normal((d, d))
    w = rng.random(n) + 0.1
    return X, A, V, w / w.sum(), rng


@pytest.mark.claim("variant-fields-match-their-definitions")
@pytest.mark.parametrize("kind", KINDS_A)
@pytest.mark.parametrize("weighted", [False, True])
def test_velocity_matches_double_loop_definition(kind, weighted, data):
    """Paper 1 (Castin et al., arXiv 2501.18322): every variant is one field Gamma_mu, here against a double loop
    over token pairs of its definition.
    """
    X, A, V, w, _ = data
    bias = -0.7 if kind == "sigmoid" else 0.0
    extra = {"sinkhorn_tol": 1e-14} if kind == "sinkhorn" else {}
    layer = Attention(kind, A=A, V=V, beta=0.8, bias=bias, **extra)
    ww = w if weighted else None
    got = velocity(X, layer, ww)
    ref = loop_field(X, kind, A=A, V=V, beta=0.8, w=ww, bias=bias)
    np.testing.assert_allclose(got, ref, atol=1e-12, rtol=1e-12)


@pytest.mark.claim("variant-fields-match-their-definitions")
@pytest.mark.parametrize("weighted", [False, True])
def test_l2_velocity_matches_double_loop_definition(weighted, data):
    """Paper 1 (Castin et al., arXiv 2501.18322): l2 attention, exp(-beta |Q x - K y|^2) normalised, against a
    double loop of its definition.
    """
    X, _, V, w, rng = data
    Q = rng.standard_normal((2, 3))
    K = rng.standard_normal((2, 3))
    layer = Attention("l2", Q=Q, K=K, V=V, beta=0.6)
    ww = w if weighted else None
    np.testing.assert_allclose(
        velocity(X, layer, ww), loop_field(X, "l2", Q=Q, K=K, V=V, beta=0.6, w=ww), atol=1e-12, rtol=1e-12
    )


@pytest.mark.claim("score-convention")
@pytest.mark.parametrize("kind", ["softmax", "unnormalized_softmax", "linear", "sigmoid", "sinkhorn"])
def test_layer_from_q_and_k_equals_layer_from_a_equal_qt_k(kind, data):
    """The book's convention for Paper 1 (Castin et al., arXiv 2501.18322) and Paper 2 (Li et al., 2026): the score
    <Q x, K y> is <x, A y> with A = Q^T K.
    """
    X, _, V, _, rng = data
    Q = rng.standard_normal((2, 3))
    K = rng.standard_normal((2, 3))
    from_qk = Attention(kind, Q=Q, K=K, V=V)
    from_a = Attention(kind, A=Q.T @ K, V=V)
    np.testing.assert_allclose(velocity(X, from_qk), velocity(X, from_a), atol=1e-13)
    np.testing.assert_allclose(from_qk.A[0], Q.T @ K)


@pytest.mark.claim("score-convention")
def test_score_convention_is_x_dot_a_y_and_transposing_a_changes_the_field(data):
    """The book's convention, score <x, A y>; Paper 1 (Castin et al., arXiv 2501.18322) writes <A1 x, y>, so A1 =
    A^T, and a non-symmetric A and its transpose give visibly different fields.
    """
    X, A, V, _, _ = data
    layer = Attention("softmax", A=A, V=V)
    # <Qx, Ky> = <x, Q^T K y>: build the scores by hand for one pair
    P = attention_matrix(X, layer)
    e = np.exp(X[0] @ A @ X.T)
    np.testing.assert_allclose(P[0], e / e.sum(), atol=1e-14)
    transposed = velocity(X, Attention("softmax", A=A.T, V=V))
    assert np.max(np.abs(transposed - velocity(X, layer))) > 1e-2


@pytest.mark.claim("multihead-heads-by-row-blocks")
def test_multihead_field_is_sum_of_each_heads_field(data):
    """Paper 1 (Castin et al., arXiv 2501.18322): multi-head attention adds the fields of its heads."""
    X, A, V, _, rng = data
    A2 = rng.standard_normal((3, 3))
    V2 = rng.standard_normal((3, 3))
    two = Attention("softmax", A=np.stack([A, A2]), V=np.stack([V, V2]))
    assert two.n_heads == 2
    ref = loop_field(X, "softmax", A=A, V=V) + loop_field(X, "softmax", A=A2, V=V2)
    np.testing.assert_allclose(velocity(X, two), ref, atol=1e-12)
    one = velocity(X, Attention("softmax", A=A, V=V))
    assert np.max(np.abs(velocity(X, two) - one)) > 1e-2  # the second head is really used


def test_multihead_from_per_head_queries_and_keys(data):
    X, _, V, _, rng = data
    Q = rng.standard_normal((2, 1, 3))
    K = rng.standard_normal((2, 1, 3))
    Vs = np.stack([V, 2 * V])
    layer = Attention("l2", Q=Q, K=K, V=Vs)
    ref = sum(loop_field(X, "l2", Q=Q[h], K=K[h], V=Vs[h]) for h in range(2))
    np.testing.assert_allclose(velocity(X, layer), ref, atol=1e-12)


@pytest.mark.claim("variant-fields-match-their-definitions")
@pytest.mark.parametrize("kind", ["softmax", "linear", "unnormalized_softmax", "sigmoid"])
def test_causal_attention_matches_double_loop_and_never_looks_ahead(kind, data):
    """Paper 1 (Castin et al., arXiv 2501.18322): masked (causal) attention, against a double loop; moving later
    tokens changes nothing earlier.
    """
    X, A, V, w, rng = data
    layer = Attention(kind, A=A, V=V, causal=True)
    for ww in (None, w):
        np.testing.assert_allclose(velocity(X, layer, ww), loop_field(X, kind, A=A, V=V, w=ww, causal=True), atol=1e-12)
    # moving tokens 5.. leaves the velocities of tokens 0..4 unchanged
    Y = X.copy()
    Y[5:] += rng.standard_normal(Y[5:].shape)
    np.testing.assert_allclose(velocity(Y, layer)[:5], velocity(X, layer)[:5], atol=1e-14)
    P = attention_matrix(X, layer)
    assert np.all(np.triu(P, 1) == 0)


def test_causal_positions_with_ties_see_each_other(data):
    X, A, V, _, _ = data
    pos = np.array([0.0, 0.0, 0.5, 0.5, 0.5, 1.0, 1.0, 2.0, 3.0])
    for kind in ("softmax", "linear"):
        layer = Attention(kind, A=A, V=V, causal=True)
        got = velocity(X, layer, positions=pos)
        np.testing.assert_allclose(got, loop_field(X, kind, A=A, V=V, causal=True, positions=pos), atol=1e-12)


@pytest.mark.claim("attention-sink-bounds-the-denominators")
def test_causal_first_token_only_sees_itself(data):
    """Paper 1 (Castin et al., arXiv 2501.18322): without a sink the first token of masked attention sees only
    itself, x_1' = V x_1.
    """
    X, A, V, _, _ = data
    out = velocity(X, Attention("softmax", A=A, V=V, causal=True))
    np.testing.assert_allclose(out[0], V @ X[0], atol=1e-14)


@pytest.mark.claim("sinkhorn-attention-is-doubly-stochastic")
def test_sinkhorn_weights_doubly_stochastic_and_match_exponential_domain_scaling(data):
    """Paper 1 (Castin et al., arXiv 2501.18322): Sinkhorn attention is the entropic self-transport plan divided by
    the token masses: doubly stochastic, equal to plain Sinkhorn scaling written with loops.
    """
    X, A, V, w, _ = data
    layer = Attention("sinkhorn", A=A, V=V, eps=0.7)
    for ww in (None, w):
        P, info = attention_matrix(X, layer, ww, return_info=True)
        wv = np.full(len(X), 1 / len(X)) if ww is None else ww
        np.testing.assert_allclose(P.sum(1), 1.0, atol=1e-10)  # rows: conditional laws
        np.testing.assert_allclose(wv @ P, wv, atol=1e-10)  # columns: second marginal is mu
        assert info["marginal_error"] < 1e-10
        np.testing.assert_allclose(P, loop_sinkhorn(X, A, 1.0, wv, 0.7), atol=1e-10)


@pytest.mark.claim("sinkhorn-attention-is-doubly-stochastic")
def test_sinkhorn_plan_matches_pot_log_sinkhorn(data):
    """Paper 1 (Castin et al., arXiv 2501.18322): Sinkhorn attention is n times POT's entropic plan for the cost
    -<x_i, A x_j> (eps = 1).
    """
    ot = pytest.importorskip("ot")
    X, A, V, _, _ = data
    n = len(X)
    a = np.full(n, 1 / n)
    C = -(X @ A @ X.T)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan = ot.sinkhorn(a, a, C, reg=1.0, method="sinkhorn_log", stopThr=1e-13, numItermax=100000)
    P = attention_matrix(X, Attention("sinkhorn", A=A, V=V, eps=1.0))
    np.testing.assert_allclose(P, n * plan, atol=1e-9)


@pytest.mark.claim("sinkhorn-attention-is-doubly-stochastic")
def test_one_sinkhorn_row_normalisation_is_softmax(data):
    """Paper 1 (Castin et al., arXiv 2501.18322): one row normalisation of the Sinkhorn kernel is softmax attention
    with A / eps.
    """
    X, A, V, _, _ = data
    P = attention_matrix(X, Attention("sinkhorn", A=A, V=V, eps=0.5, sinkhorn_iters=1))
    soft = attention_matrix(X, Attention("softmax", A=A / 0.5, V=V))
    np.testing.assert_allclose(P, soft, atol=1e-13)


@pytest.mark.claim("sinkhorn-mean-moves-by-v")
def test_sinkhorn_particle_mean_moves_exactly_by_v(data):
    """Paper 1 (Castin et al., arXiv 2501.18322): Sinkhorn attention is doubly stochastic, so the token mean moves
    by exactly V times the mean.
    """
    X, A, V, w, _ = data
    U = velocity(X, Attention("sinkhorn", A=A, V=V), w)
    np.testing.assert_allclose(w @ U, V @ (w @ X), atol=1e-10)


def test_sinkhorn_that_cannot_converge_raises_instead_of_returning_a_wrong_field(data):
    X, A, V, _, _ = data
    with pytest.raises(ConvergenceError, match="sinkhorn_iters"):
        velocity(X, Attention("sinkhorn", A=A, V=V, eps=0.01, sinkhorn_iters=3))


def test_sinkhorn_warm_start_reduces_iterations(data):
    X, A, V, _, _ = data
    layer = Attention("sinkhorn", A=A, V=V, eps=0.5)
    state: dict = {}
    velocity(X, layer, sinkhorn_state=state)
    _, cold = attention_matrix(X + 1e-3, layer, return_info=True)
    from tokendynamics.transport import sinkhorn_potentials

    S = (X + 1e-3) @ A @ (X + 1e-3).T / 0.5
    logw = np.full(len(X), -np.log(len(X)))
    _, _, warm_it, err = sinkhorn_potentials(S, logw, eps=0.5, max_iter=10000, tol=1e-12, g0=state[0]["g"])
    assert err < 1e-12 and warm_it < cold["iterations"]


def test_linear_attention_second_moment_form_equals_dense_matrix_form(data):
    X, A, V, w, _ = data
    for causal in (False, True):
        layer = Attention("linear", A=A, V=V, beta=1.3, causal=causal)
        for ww in (None, w):
            np.testing.assert_allclose(velocity(X, layer, ww), velocity(X, layer, ww, backend="dense"), atol=1e-13)


def test_dense_path_in_row_blocks_equals_single_block(monkeypatch, data):
    X, A, V, w, _ = data
    from tokendynamics import attention as att

    for kind in ("softmax", "sigmoid"):
        layer = Attention(kind, A=A, V=V, causal=True)
        full = velocity(X, layer, w)
        monkeypatch.setattr(att, "BLOCK_ENTRIES", 20)  # blocks of 2 rows
        np.testing.assert_allclose(velocity(X, layer, w), full, atol=1e-14)
        monkeypatch.undo()


@pytest.mark.claim("rotation-equivariance")
@pytest.mark.parametrize("kind", KINDS_A + ["l2"])
def test_field_is_rotation_equivariant(kind, data):
    """Paper 2 (Li et al., 2026): x -> Ux with A -> U A U^T, V -> U V U^T (and Q -> Q U^T, K -> K U^T) rotates the
    field.
    """
    X, A, V, w, rng = data
    U, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    if kind == "l2":
        Q, K = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
        layer = Attention(kind, Q=Q, K=K, V=V)
        rotated = Attention(kind, Q=Q @ U.T, K=K @ U.T, V=U @ V @ U.T)
    else:
        layer = Attention(kind, A=A, V=V)
        rotated = Attention(kind, A=U @ A @ U.T, V=U @ V @ U.T)
    np.testing.assert_allclose(velocity(X @ U.T, rotated, w), velocity(X, layer, w) @ U.T, atol=1e-11)


@pytest.mark.claim("particles-are-the-pde")
@pytest.mark.parametrize("kind", KINDS_A)
def test_duplicated_tokens_equal_doubled_weights(kind, data):
    """Paper 1 (Castin et al., arXiv 2501.18322): the particle system is the Transformer PDE with empirical data;
    the field depends on the measure only, so a repeated token is the same as a heavier one.
    """
    X, A, V, _, _ = data
    layer = Attention(kind, A=A, V=V)
    Xdup = np.vstack([X, X[:1]])
    w = np.full(len(X), 1.0)
    w[0] = 2.0
    w /= w.sum()
    np.testing.assert_allclose(velocity(Xdup, layer)[:-1], velocity(X, layer, w), atol=1e-11)


def test_unnormalised_overflow_raises_non_finite_error():
    X = np.array([[30.0, 0.0], [29.0, 1.0]])
    with pytest.raises(NonFiniteError, match="unnormalized_softmax"):
        velocity(X, Attention("unnormalized_softmax", A=np.eye(2), V=np.eye(2)))


def test_inputs_are_copied_and_layers_are_immutable(data):
    X, A, V, _, _ = data
    A0 = A.copy()
    layer = Attention("softmax", A=A, V=V)
    A[0, 0] += 1.0
    np.testing.assert_array_equal(layer.A[0], A0)
    with pytest.raises(ValueError):
        layer.A[0, 0, 0] = 3.0  # read-only
    with pytest.raises(AttributeError):
        layer.beta = 2.0
    X0 = X.copy()
    velocity(X, layer)
    np.testing.assert_array_equal(X, X0)
    assert layer.with_(beta=2.0).beta == 2.0 and layer.beta == 1.0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(kind="softmaxx", A=np.eye(2), V=np.eye(2)), "kind must be one of"),
        (dict(kind="softmax", A=np.eye(2)), "V .*required"),
        (dict(kind="softmax", V=np.eye(2)), "give A or"),
        (dict(kind="softmax", A=np.ones((2, 3)), V=np.eye(2)), "A must be square"),
        (dict(kind="softmax", A=np.eye(3), V=np.eye(2)), "V must be 3 x 3"),
        (dict(kind="softmax", A=np.eye(2), V=np.eye(2), beta=0.0), "beta must be a finite positive"),
        (dict(kind="softmax", A=np.eye(2), V=np.eye(2), beta=-1.0), "beta"),
        (dict(kind="softmax", A=np.eye(2), V=np.eye(2), beta=np.nan), "beta"),
        (dict(kind="softmax", A=[[np.inf, 0], [0, 1]], V=np.eye(2)), "A contains non-finite"),
        (dict(kind="softmax", A=np.eye(2), V=[[np.nan, 0], [0, 1]]), "V contains non-finite"),
        (dict(kind="softmax", A=np.eye(2), Q=np.eye(2), K=np.eye(2), V=np.eye(2)), "either A or"),
        (dict(kind="softmax", Q=np.eye(2), V=np.eye(2)), "Q and K must be given together"),
        (dict(kind="softmax", Q=np.ones((1, 2)), K=np.ones((2, 2)), V=np.eye(2)), "same shape"),
        (dict(kind="l2", A=np.eye(2), V=np.eye(2)), "needs Q and K"),
        (dict(kind="sinkhorn", A=np.eye(2), V=np.eye(2), eps=0), "eps must be"),
        (dict(kind="sinkhorn", A=np.eye(2), V=np.eye(2), causal=True), "causal"),
        (dict(kind="softmax", A=np.eye(2), V=np.eye(2), bias=1.0), "bias is a parameter of sigmoid"),
        (dict(kind="softmax", A=np.stack([np.eye(2)] * 2), V=np.eye(2)), "2 head"),
        (dict(kind="softmax", A=np.ones((2, 2, 2, 2)), V=np.eye(2)), "one per layer of the batch"),
    ],
)
def test_bad_layer_arguments_raise_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Attention(**kwargs)


def test_bad_tokens_and_weights_raise_clear_errors():
    layer = Attention("softmax", A=np.eye(2), V=np.eye(2))
    X = np.zeros((4, 2))
    with pytest.raises(ValueError, match="2-D array of tokens"):
        velocity(np.zeros(4), layer)
    with pytest.raises(ValueError, match="dimension 3 but the layer has d = 2"):
        velocity(np.zeros((4, 3)), layer)
    with pytest.raises(ValueError, match="non-finite"):
        velocity(np.array([[np.nan, 0.0], [0.0, 1.0]]), layer)
    with pytest.raises(ValueError, match="weights must have shape"):
        velocity(X, layer, np.ones(3) / 3)
    with pytest.raises(ValueError, match="non-negative"):
        velocity(X, layer, np.array([0.5, 0.7, -0.2, 0.0]))
    with pytest.raises(ValueError, match="sum to 1"):
        velocity(X, layer, np.ones(4))
    with pytest.raises(ValueError, match="positions must have shape"):
        velocity(X, layer.with_(causal=True), positions=np.arange(3))
    with pytest.raises(ValueError, match="backend"):
        velocity(X, layer, backend="gpu")
    with pytest.raises(ValueError, match="backend"):
        velocity(X, layer, backend="numba")  # the batch kernel is compiled, not the field of one layer


def test_library_runs_without_numba(monkeypatch):
    """numba is an accelerator, not a requirement (e.g. for a Pyodide kernel): without it the compiled
    kernels are never chosen, simulate_batch and projected_euler run on numpy, and asking for them raises."""
    import importlib
    import sys

    from tokendynamics import _batch_kernels, _gaussian_kernels
    from tokendynamics.ensembles import sample_clouds, simulate_batch
    from tokendynamics.gaussian import projected_euler

    rng = np.random.default_rng(0)
    X0 = sample_clouds(4, 8, 2, rng)
    layer = Attention("softmax", A=np.eye(2), V=np.eye(2))
    ref = simulate_batch(X0, layer, 1.0, dt=0.1, method="euler", sphere=True, backend="numpy")
    monkeypatch.setitem(sys.modules, "numba", None)  # makes `import numba` fail
    try:
        for module in (_batch_kernels, _gaussian_kernels):
            assert not importlib.reload(module).HAVE_NUMBA
        assert not _batch_kernels.prefer_kernel(8, 2)
        auto = simulate_batch(X0, layer, 1.0, dt=0.1, method="euler", sphere=True)
        np.testing.assert_allclose(auto.X, ref.X, atol=1e-13)
        with pytest.raises(ValueError, match="needs numba"):
            simulate_batch(X0, layer, 1.0, dt=0.1, method="euler", sphere=True, backend="numba")
        runs = projected_euler(np.eye(2)[None] / 2, layer, step=0.3, save="final")
        assert np.all(np.isfinite(runs.cov_last))
        with pytest.raises(ValueError, match="needs numba"):
            projected_euler(np.eye(2)[None] / 2, layer, step=0.3, save="final", backend="numba")
    finally:
        monkeypatch.undo()
        for module in (_batch_kernels, _gaussian_kernels):
            importlib.reload(module)


@pytest.mark.claim("l2-is-softmax-on-a-reweighted-measure")
def test_velocity_l2_equals_softmax_with_2_qt_k_on_the_reweighted_measure():
    """Paper 1 (Castin et al., arXiv 2501.18322): l2 attention is softmax attention with score matrix 2 beta Q^T K
    on the reweighted measure exp(-beta |K y|^2) mu (the x-only factor cancels).
    """
    rng = np.random.default_rng(8)
    n, d, beta = 15, 3, 0.7
    X = rng.standard_normal((n, d))
    Q, K, V = rng.standard_normal((2, d)), rng.standard_normal((2, d)), rng.standard_normal((d, d))
    w = rng.random(n)
    w /= w.sum()
    l2 = velocity(X, Attention("l2", Q=Q, K=K, V=V, beta=beta), w)
    tilt = w * np.exp(-beta * np.sum((X @ K.T) ** 2, axis=1))
    soft = velocity(X, Attention("softmax", A=2 * beta * Q.T @ K, V=V), tilt / tilt.sum())
    np.testing.assert_allclose(l2, soft, atol=1e-12, rtol=1e-12)


@pytest.mark.claim("sinkhorn-attention-is-doubly-stochastic")
@pytest.mark.parametrize("tol", [1e-4, 1e-8, 1e-12])
def test_attention_matrix_sinkhorn_is_doubly_stochastic_to_its_tolerance_along_a_trajectory(tol):
    """Paper 1 (Castin et al., arXiv 2501.18322): Sinkhorn attention is doubly stochastic; along a trajectory the
    rows sum to one exactly and the columns to the requested tolerance, also when warm-started from the previous
    frame.
    """
    rng = np.random.default_rng(11)
    X0 = rng.uniform(-1, 1, (40, 2))
    w = rng.random(40) + 0.2
    w /= w.sum()
    layer = Attention("sinkhorn", A=[[1.0, 0.5], [-0.5, 1.5]], V=np.eye(2), eps=0.5, sinkhorn_tol=tol)
    traj = simulate(X0, layer, 1.0, dt=0.1, weights=w)
    g = None
    for X in traj.X:
        P, info = attention_matrix(X, layer, w, return_info=True)
        np.testing.assert_allclose(P.sum(1), 1.0, atol=1e-13)  # rows exactly
        assert np.max(np.abs(w @ P - w) / w) <= tol  # columns to the tolerance
        S = (X @ layer.A[0]) @ X.T / layer.eps
        _, g, it, err = sinkhorn_potentials(S, np.log(w), eps=layer.eps, max_iter=10_000, tol=tol, g0=g)
        assert err <= tol and info["marginal_error"] <= tol  # warm-started from the previous frame, too


@pytest.mark.claim("sinkhorn-attention-is-doubly-stochastic")
def test_attention_matrix_sinkhorn_is_doubly_stochastic_and_one_row_normalisation_is_softmax():
    """Paper 1 (Castin et al., arXiv 2501.18322): Sinkhorn attention is doubly stochastic, and one row
    normalisation is softmax with A / eps.
    """
    rng = np.random.default_rng(5)
    X = rng.standard_normal((60, 2))
    A = rng.standard_normal((2, 2))
    P = attention_matrix(X, Attention("sinkhorn", A=A, V=np.eye(2), eps=0.7))
    assert np.abs(P.sum(1) - 1).max() < 1e-10 and np.abs(P.sum(0) - 1).max() < 1e-10
    P1 = attention_matrix(X, Attention("sinkhorn", A=A, V=np.eye(2), eps=0.7, sinkhorn_iters=1))
    assert np.abs(P1 - attention_matrix(X, Attention("softmax", A=A / 0.7, V=np.eye(2)))).max() < 1e-12
