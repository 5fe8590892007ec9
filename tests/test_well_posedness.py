"""Paper 1 §2–3: the variants as particle systems, masked attention with a sink, stability, mean field.

Claims C20–C25 of the spec (§7) and the acceptance items of issue 3. Double loops below evaluate
the spec's formulas literally, in the paper's own convention where it differs from the library's
(paper score <A1 x, y> with A1 = K^T Q, library score <x, A y> with A = Q^T K = A1^T).
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from tokendynamics import Attention, BlowUpError, attention_matrix, simulate, velocity
from tokendynamics.attention import sinkhorn_potentials
from tokendynamics.masked import causal_log_partition, prefix_mass, sink_attention, with_sink
from tokendynamics.meanfield import (
    blowup_time_1d,
    fit_power_law,
    gaussian_1d_flow_map,
    gaussian_1d_solution,
    masked_meanfield_study,
    meanfield_study_1d,
    meanfield_study_reference,
)
from tokendynamics.particles import particle_field
from tokendynamics.stability import (
    lipschitz_constants,
    log_stability_bound,
    perturb_in_ball,
    stability_study,
    support_speed,
)
from tokendynamics.transport import conditional_wasserstein, wasserstein, wasserstein_gaussian_1d
from tokendynamics.variants import VARIANT_NAMES, multihead_from_rows, paper1_variants, sigmoid_layer


def sig(u):
    return 1.0 / (1.0 + math.exp(-u))


# ---------------------------------------------------------------------------------------------
# double loops of the spec's formulas (paper 1 §2), one token pair at a time
# ---------------------------------------------------------------------------------------------


def loop_normalised(X, w, kernel, value):
    """x_i -> sum_j w_j k(x_i, x_j) value(x_j) / sum_j w_j k(x_i, x_j), with loops."""
    n, d = X.shape
    out = np.zeros((n, d))
    for i in range(n):
        num, den = np.zeros(d), 0.0
        for j in range(n):
            k = w[j] * kernel(i, j)
            num += k * value(X[j])
            den += k
        out[i] = num / den
    return out


def loop_sum(X, w, kernel, value):
    n, d = X.shape
    out = np.zeros((n, d))
    for i in range(n):
        for j in range(n):
            out[i] += w[j] * kernel(i, j) * value(X[j])
    return out


def loop_sinkhorn_plan(X, A1, eps, w, iters=4000):
    """Exponential-domain Sinkhorn on K_ij = exp(<A1 x_i, x_j>/eps), P = diag(u) K diag(v w)."""
    n = X.shape[0]
    K = np.array([[math.exp(float((A1 @ X[i]) @ X[j]) / eps) for j in range(n)] for i in range(n)])
    u, v = np.ones(n), np.ones(n)
    for _ in range(iters):
        u = 1.0 / (K @ (v * w))
        v = 1.0 / (K.T @ (u * w))
    u = 1.0 / (K @ (v * w))
    return u[:, None] * K * (v * w)[None, :]


def spec_variant_field(name, X, A, V, beta, *, m0=0.1):
    """The field of each gallery variant, from the spec's formulas in the paper's convention A1 = A^T."""
    n, d = X.shape
    A1 = beta * A.T  # paper 1: score <A1 x, y>
    w = np.full(n, 1.0 / n)
    score = lambda i, j: float((A1 @ X[i]) @ X[j])  # noqa: E731
    Vy = lambda y: V @ y  # noqa: E731
    if name == "softmax":
        return loop_normalised(X, w, lambda i, j: math.exp(score(i, j)), Vy)
    if name == "multihead":  # Q = I, K = A (library), one row per head: A1_h = K_h^T Q_h, C_h = e_h e_h^T V
        out = np.zeros((n, d))
        for h in range(d):
            Qh, Kh = np.eye(d)[h : h + 1], A[h : h + 1]
            A1h = beta * Kh.T @ Qh
            Ch = np.outer(np.eye(d)[h], np.eye(d)[h]) @ V
            out += loop_normalised(
                X, w, lambda i, j, A1h=A1h: math.exp(float((A1h @ X[i]) @ X[j])), lambda y, Ch=Ch: Ch @ y
            )
        return out
    if name == "l2":  # exp(-beta |Qx - Ky|^2) with Q = I, K = A
        return loop_normalised(X, w, lambda i, j: math.exp(-beta * float(np.sum((X[i] - A @ X[j]) ** 2))), Vy)
    if name == "sinkhorn":
        P = loop_sinkhorn_plan(X, A1, 1.0, w)
        return np.array([sum(P[i, j] * (V @ X[j]) for j in range(n)) for i in range(n)])
    if name == "sigmoid":
        return loop_sum(X, w, lambda i, j: sig(score(i, j)), Vy)
    if name == "linear":
        return loop_sum(X, w, score, Vy)
    if name == "unnormalized_softmax":
        return loop_sum(X, w, lambda i, j: math.exp(score(i, j)), Vy)
    if name == "masked":  # spec §2.6, one sink token x0 = 0 of mass m0, tokens at s_i = i/n
        x0 = np.zeros(d)
        out = np.zeros((n + 1, d))
        out[0] = V @ x0
        for i in range(n):
            e0 = m0 * math.exp(float((A1 @ X[i]) @ x0))
            num, den = e0 * (V @ x0), e0
            for j in range(i + 1):
                e = (1 - m0) / n * math.exp(score(i, j))
                num = num + e * (V @ X[j])
                den += e
            out[i + 1] = num / den
        return out
    raise KeyError(name)


@pytest.fixture
def tokens():
    rng = np.random.default_rng(2024)
    X = rng.uniform(-1, 1, (11, 2))
    A = np.array([[-1.0, 0.5], [-0.5, -0.5]]) + 0.3 * rng.standard_normal((2, 2))
    V = np.eye(2) + 0.4 * rng.standard_normal((2, 2))
    return X, A, V, rng


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_each_gallery_variant_velocity_matches_double_loop_of_its_definition_to_1e12(name, tokens):
    X, A, V, _ = tokens
    var = paper1_variants(A, V, beta=0.9, sink_mass=0.1, names=[name])[name]
    if name == "sinkhorn":
        var = paper1_variants(A, V, beta=0.9, names=[name])[name]
        var = type(var)(name, var.layer.with_(sinkhorn_tol=1e-14))
    system = var.system(X)
    got = particle_field(system.X, var.layer, **system.simulate_kwargs())
    ref = spec_variant_field(name, X, A, V, 0.9, m0=0.1)
    np.testing.assert_allclose(got, ref, atol=1e-12, rtol=1e-12)


def test_library_convention_is_the_transpose_of_paper_one(tokens):
    """A non-symmetric A: the paper's formula with A1 = A (instead of A^T) gives a visibly different field."""
    X, A, V, _ = tokens
    ours = velocity(X, Attention("softmax", A=A, V=V))
    wrong = spec_variant_field("softmax", X, A.T, V, 1.0)
    assert np.max(np.abs(ours - wrong)) > 1e-2


# ---------------------------------------------------------------------------------------------
# multi-head by row blocks (paper 1 §2.2, official code)
# ---------------------------------------------------------------------------------------------


def test_multihead_row_blocks_match_official_formula_with_scale_and_output_matrix():
    rng = np.random.default_rng(3)
    d, H = 4, 2
    k = d // H
    Q, K, V, W = (rng.standard_normal((d, d)) for _ in range(4))
    X = rng.standard_normal((9, d))
    layer = multihead_from_rows(Q, K, V, H, W=W, scale=1 / math.sqrt(k))
    n = X.shape[0]
    ref = np.zeros((n, d))
    for h in range(H):
        b = slice(h * k, (h + 1) * k)
        A1h = K[b].T @ Q[b] / math.sqrt(k)  # official code: A_h = K_h^T Q_h / sqrt(k)
        Ch = W[b].T @ V[b]
        ref += loop_normalised(
            X, np.full(n, 1 / n), lambda i, j, A1h=A1h: math.exp(float((A1h @ X[i]) @ X[j])), lambda y, Ch=Ch: Ch @ y
        )
    np.testing.assert_allclose(velocity(X, layer), ref, atol=1e-12)
    assert layer.n_heads == H


def test_multihead_with_fewer_rows_has_an_empty_head_that_adds_the_mean_only():
    """Figure F2c: Q is 1 x 2, H = 2: head 1 has A_1 = 0 and contributes C_1 times the mean."""
    q = np.array([[0.406324, 0.913729]])
    layer = multihead_from_rows(q, -q, np.eye(2), 2)
    np.testing.assert_allclose(layer.A[1], 0.0)
    np.testing.assert_allclose(layer.A[0], -q.T @ q)
    np.testing.assert_allclose(layer.V[1], np.diag([0.0, 1.0]))
    X = np.random.default_rng(0).standard_normal((7, 2))
    head0 = velocity(X, Attention("softmax", A=layer.A[0], V=layer.V[0]))
    np.testing.assert_allclose(velocity(X, layer) - head0, np.tile(np.diag([0.0, 1.0]) @ X.mean(0), (7, 1)), atol=1e-14)


def test_multihead_bad_arguments_raise():
    with pytest.raises(ValueError, match="must divide d"):
        multihead_from_rows(np.eye(3), np.eye(3), np.eye(3), 2)
    with pytest.raises(ValueError, match="same r"):
        multihead_from_rows(np.eye(2), np.eye(2)[:1], np.eye(2), 2)
    with pytest.raises(ValueError, match="needs k rows"):
        multihead_from_rows(np.ones((1, 2)), np.ones((1, 2)), np.eye(2), 2, kind="l2")


# ---------------------------------------------------------------------------------------------
# sigmoid (§2.5), C24
# ---------------------------------------------------------------------------------------------


def test_sigmoid_summed_with_bias_minus_log_n_matches_ramapuram_double_loop(tokens):
    X, A, V, _ = tokens
    n = X.shape[0]
    layer = sigmoid_layer(A, V, bias="-log n", normalization="sum", n=n, beta=0.7)
    ref = loop_sum(X, np.ones(n), lambda i, j: sig(0.7 * float(X[i] @ A @ X[j]) - math.log(n)), lambda y: V @ y)
    np.testing.assert_allclose(velocity(X, layer), ref, atol=1e-12)
    with pytest.raises(ValueError, match="needs the number of tokens"):
        sigmoid_layer(A, V, normalization="sum")
    with pytest.raises(ValueError, match="normalization"):
        sigmoid_layer(A, V, normalization="max")


def test_c24_sigmoid_minus_log_n_tends_to_unnormalised_exponential_at_rate_one_over_n():
    """Fixed measure mu (m atoms, each repeated r times, n = m r tokens): the gap is O(e^{2aR^2} v R / n)."""
    rng = np.random.default_rng(5)
    m, d = 12, 2
    Y = rng.uniform(-1, 1, (m, d))
    A, V = 0.8 * rng.standard_normal((d, d)), rng.standard_normal((d, d))
    exact = velocity(Y, Attention("unnormalized_softmax", A=A, V=V))
    a, v = np.linalg.norm(A, 2), np.linalg.norm(V, 2)
    R = np.max(np.linalg.norm(Y, axis=1))
    # first-order term: n (sigmoid - exponential) -> -int e^{2 s(x, y)} V y dmu(y), up to O(e^{3aR^2} v R / n)
    first = -np.array([np.mean([math.exp(2 * float(x @ A @ y)) * (V @ y) for y in Y], axis=0) for x in Y])
    for r in (1, 10, 100, 300):
        n = m * r
        X = np.repeat(Y, r, axis=0)
        got = velocity(X, sigmoid_layer(A, V, bias="-log n", normalization="sum", n=n))[::r]
        gap = np.max(np.linalg.norm(got - exact, axis=1))
        assert gap <= math.exp(2 * a * R * R) * v * R / n
        assert np.max(np.linalg.norm(n * (got - exact) - first, axis=1)) <= math.exp(3 * a * R * R) * v * R / n
    assert gap > 0.5 * np.max(np.linalg.norm(first, axis=1)) / n  # the gap is really of order 1/n


# ---------------------------------------------------------------------------------------------
# L2 (§2.3), C25
# ---------------------------------------------------------------------------------------------


def test_c25_l2_equals_softmax_with_2_qt_k_on_the_reweighted_measure():
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


# ---------------------------------------------------------------------------------------------
# Sinkhorn (§2.4), C4 extended: doubly stochastic to its tolerance, along a warm-started trajectory
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tol", [1e-4, 1e-8, 1e-12])
def test_c4_sinkhorn_weights_are_doubly_stochastic_to_their_tolerance_along_a_trajectory(tol):
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


# ---------------------------------------------------------------------------------------------
# masked attention with a sink (§2.6), C22, C23
# ---------------------------------------------------------------------------------------------


def test_with_sink_builds_the_spec_measure_and_validates():
    X = np.arange(8.0).reshape(4, 2)
    s = with_sink(X, 0.2)
    np.testing.assert_allclose(s.weights, [0.2, 0.2, 0.2, 0.2, 0.2])
    np.testing.assert_allclose(s.positions, [0, 0.25, 0.5, 0.75, 1.0])
    np.testing.assert_array_equal(s.X[0], [0.0, 0.0])
    np.testing.assert_array_equal(s.tokens(s.X), X)
    cloud = with_sink(X, 0.5, sink=np.ones((5, 2)))
    assert cloud.n_sink == 5 and abs(cloud.weights[:5].sum() - 0.5) < 1e-15
    np.testing.assert_allclose(prefix_mass(cloud.weights, cloud.positions)[:5], 0.5)
    for bad, msg in [
        (dict(m0=1.0), "m0 must be in"),
        (dict(m0=0.0, sink=np.ones(2)), "no mass"),
        (dict(m0=0.1, positions=[0, 0.1, 0.2, 0.3]), "reserved for the sink"),
        (dict(m0=0.1, sink=np.ones(3)), "dimension 3"),
    ]:
        with pytest.raises(ValueError, match=msg):
            with_sink(X, **bad)


def test_c23_sink_moves_by_v_and_denominators_are_bounded_below_by_m0_exp_minus_a_r2():
    rng = np.random.default_rng(4)
    n, d, m0 = 60, 2, 0.05
    X = 2 * rng.uniform(-1, 1, (n, d))
    A, V = 1.5 * rng.standard_normal((d, d)), rng.standard_normal((d, d))
    x0 = np.array([0.7, -1.1])
    system = with_sink(X, m0, sink=x0)
    layer = Attention("softmax", A=A, V=V, causal=True)
    U = velocity(system.X, layer, system.weights, positions=system.positions)
    np.testing.assert_allclose(U[0], V @ x0, atol=1e-15)  # the sink only sees itself
    R = np.max(np.linalg.norm(system.X, axis=1))
    logZ = causal_log_partition(system.X, layer, system.weights, system.positions)
    assert np.all(logZ >= math.log(m0) - np.linalg.norm(A, 2) * R * R)
    # without a sink the first token's denominator is w_1 e^{<x1, A x1>} = e^{<x1, A x1>} / n: no
    # bound uniform in n
    plain = with_sink(X, 0.0)
    logZ0 = causal_log_partition(plain.X, layer, plain.weights, plain.positions)
    assert logZ0[0] == pytest.approx(-math.log(n) + X[0] @ A @ X[0], rel=1e-14)
    # with A = 0 the attention on the sink is m0 / lambda([0, s])
    flat = Attention("softmax", A=np.zeros((d, d)), V=V, causal=True)
    np.testing.assert_allclose(
        sink_attention(system.X, flat, system), m0 / prefix_mass(system.weights, system.positions)[1:], atol=1e-14
    )


def test_masked_attention_with_sink_never_looks_ahead():
    rng = np.random.default_rng(6)
    X = rng.standard_normal((20, 2))
    layer = Attention("softmax", A=rng.standard_normal((2, 2)), V=rng.standard_normal((2, 2)), causal=True)
    system = with_sink(X, 0.1, sink=rng.standard_normal((3, 2)))
    base = velocity(system.X, layer, system.weights, positions=system.positions)
    for k in (0, 5, 12):
        Y = system.X.copy()
        Y[system.n_sink + k + 1 :] += rng.standard_normal(Y[system.n_sink + k + 1 :].shape)
        moved = velocity(Y, layer, system.weights, positions=system.positions)
        np.testing.assert_array_equal(moved[: system.n_sink + k + 1], base[: system.n_sink + k + 1])
    P = attention_matrix(system.X, layer, system.weights, positions=system.positions)
    s = system.positions
    assert np.all(P[s[None, :] > s[:, None]] == 0)


def test_c22_masked_product_data_follow_the_unmasked_dynamics_as_n_grows():
    """mu_0 = lambda x nu_0 (sink atom m0 = 0.2 at s = 0): the masked solution is lambda x nu_t, nu_t the
    unmasked one (spec §2.6 Fact): masked particles approach both the unmasked particles and the mean field."""
    out = masked_meanfield_study(
        [100, 900],
        range(6),
        [0.2],
        T=1.0,
        a=-0.5,
        v=1.0,
        alpha0=0.5,
        sigma0=1.0,
        dt=0.25,
        against=("unmasked", "meanfield"),
    )
    unmasked, meanfield = out["unmasked_mean"][0].mean(axis=1), out["meanfield_mean"][0].mean(axis=1)
    assert unmasked[1] < 0.5 * unmasked[0], unmasked  # ~ n^{-1/2}: 9 x more tokens, about 3 x smaller
    assert meanfield[1] < meanfield[0] and meanfield[1] < 0.1, meanfield  # noisier: the common sampling error
    assert np.all(out["unmasked_sup"] >= out["unmasked_mean"]) and out["profile_s"].shape == (1, 900)


def test_without_a_sink_the_first_positions_stay_far_from_the_unmasked_dynamics():
    """The first token sees only itself (x' = v x): its error does not shrink with n; a sink fixes that."""
    out = masked_meanfield_study([50, 800], range(6), [0.0, 0.2], T=1.0, a=-0.5, v=1.0, alpha0=0.5, sigma0=1.0, dt=0.5)
    err = out["profile_err"]
    assert np.max(err[0, :4]) > 3 * np.max(err[1, :4]), err[:, :4]
    first = out["unmasked_first"].mean(axis=2)
    assert first[0, 1] > 0.8 * first[0, 0] and first[1, 1] < 0.5 * first[1, 0], first  # stuck without sink only
    np.testing.assert_allclose(out["unmasked_first"][:, -1, 0], err[:, 0])
    with pytest.raises(ValueError, match="against"):
        masked_meanfield_study(
            [10], [0], [0.1], T=1.0, a=-0.5, v=1.0, alpha0=0.0, sigma0=1.0, dt=0.5, against=("exact",)
        )


# ---------------------------------------------------------------------------------------------
# transport: the conditional distance, W2 to a Gaussian
# ---------------------------------------------------------------------------------------------


def test_conditional_wasserstein_equals_lp_over_couplings_that_keep_positions():
    ot = pytest.importorskip("ot")
    rng = np.random.default_rng(9)
    pos = np.repeat([0.0, 0.3, 0.6, 1.0], [5, 3, 1, 4])
    X, Y = rng.standard_normal((13, 2)), rng.standard_normal((13, 2))
    a = rng.random(13) + 0.1
    # the same mass per position group in both measures
    b = a.copy()
    for s in np.unique(pos):
        g = pos == s
        b[g] = rng.random(g.sum()) + 0.1
        b[g] *= a[g].sum() / b[g].sum()
    a, b = a / a.sum(), b / b.sum()
    for p in (1, 2):
        cost = ot.dist(X, Y, metric="euclidean") ** p + 1e6 * (pos[:, None] != pos[None, :])
        ref = float(ot.emd2(a, b, cost)) ** (1 / p)
        got = conditional_wasserstein(X, Y, pos, p=p, weights=(a, b))
        assert got == pytest.approx(ref, rel=1e-9)
        assert got >= wasserstein(X, Y, p=p, weights=(a, b)) - 1e-12
    prof = conditional_wasserstein(X, Y, pos, weights=(a, b), return_profile=True)
    assert prof.distances.shape == (4,) and np.allclose(prof.positions, [0, 0.3, 0.6, 1.0])
    sup = conditional_wasserstein(X, Y, pos, weights=(a, b), reduce="sup")
    assert sup == pytest.approx(prof.distances.max()) and sup >= prof.value


def test_conditional_wasserstein_with_one_group_or_bins_and_bad_marginals():
    rng = np.random.default_rng(10)
    X, Y = rng.standard_normal((30, 2)), rng.standard_normal((30, 2))
    assert conditional_wasserstein(X, Y, np.zeros(30)) == pytest.approx(wasserstein(X, Y), rel=1e-12)
    s = np.arange(1, 31) / 30
    # identical positions one token each: the identity coupling's L2 gap
    gap = np.sqrt(np.mean(np.sum((X - Y) ** 2, axis=1)))
    assert conditional_wasserstein(X, Y, s) == pytest.approx(gap, rel=1e-12)
    binned = conditional_wasserstein(X, Y, s, bins=3)  # three groups of ten
    manual = np.sqrt(np.mean([wasserstein(X[k : k + 10], Y[k : k + 10]) ** 2 for k in (0, 10, 20)]))
    assert binned == pytest.approx(manual, rel=1e-10) and binned <= gap + 1e-12
    with pytest.raises(ValueError, match="different position marginals"):
        conditional_wasserstein(X, Y, s, positions_Y=np.r_[s[:-1], 0.5])
    with pytest.raises(ValueError, match="one entry per token"):
        conditional_wasserstein(X, Y, s[:-1])


def test_wasserstein_to_a_gaussian_in_one_dimension_closed_forms():
    assert wasserstein_gaussian_1d([0.3], 0.3, 2.0) == pytest.approx(2.0, rel=1e-14)  # Dirac at the mean
    x = np.array([-1.0, 0.5, 2.0])
    assert wasserstein_gaussian_1d(x, 0.1, 0.0) == pytest.approx(np.sqrt(np.mean((x - 0.1) ** 2)), rel=1e-14)
    # against a fine quantile discretisation of the Gaussian (midpoint rule, 2e6 points)
    from scipy.special import ndtri

    rng = np.random.default_rng(1)
    x = rng.standard_normal(50) * 1.3 + 0.2
    u = (np.arange(2_000_000) + 0.5) / 2_000_000
    ref = np.sqrt(np.mean((np.sort(x)[(u * 50).astype(int)] - (0.5 + 1.1 * ndtri(u))) ** 2))
    assert wasserstein_gaussian_1d(x, 0.5, 1.1) == pytest.approx(ref, rel=1e-5)
    assert wasserstein_gaussian_1d(np.repeat(x[:3], 2), 0.0, 1.0) == pytest.approx(
        wasserstein_gaussian_1d(x[:3], 0.0, 1.0), rel=1e-12
    )
    # weights: integer masses are repeated points, and general masses follow the quantile discretisation
    counts = np.array([1, 2, 3, 1, 5])
    assert wasserstein_gaussian_1d(x[:5], 0.3, 0.9, weights=counts / counts.sum()) == pytest.approx(
        wasserstein_gaussian_1d(np.repeat(x[:5], counts), 0.3, 0.9), rel=1e-12
    )
    w = rng.random(50)
    w /= w.sum()
    order = np.argsort(x)
    cum = np.cumsum(w[order])
    quantile = np.sort(x)[np.minimum(np.searchsorted(cum, u, side="right"), 49)]  # F^{-1}(u) of the weighted measure
    ref_w = np.sqrt(np.mean((quantile - (0.5 + 1.1 * ndtri(u))) ** 2))
    assert wasserstein_gaussian_1d(x, 0.5, 1.1, weights=w) == pytest.approx(ref_w, rel=1e-5)
    with pytest.raises(ValueError, match="std"):
        wasserstein_gaussian_1d(x, 0.0, -1.0)


# ---------------------------------------------------------------------------------------------
# the 1-D Gaussian oracle and the mean-field rate (§3.3, §4.3 item 8), C21
# ---------------------------------------------------------------------------------------------


def test_gaussian_1d_solution_solves_the_moment_odes_and_its_flow_map_pushes_gaussians():
    alpha0, sigma0, a, v = 0.5, 0.8, -0.7, 0.9
    t = np.linspace(0, 2, 2001)
    alpha, sigma = gaussian_1d_solution(t, alpha0, sigma0, a, v)
    h = t[1] - t[0]
    # alpha' = v (1 + a sigma^2) alpha, (sigma^2)' = 2 v a sigma^4 (paper 1 §4.2.1 in d = 1)
    np.testing.assert_allclose(
        np.gradient(alpha, h)[1:-1], (v * (1 + a * sigma**2) * alpha)[1:-1], rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(np.gradient(sigma**2, h)[1:-1], (2 * v * a * sigma**4)[1:-1], rtol=1e-5, atol=1e-6)
    # one particle-system step of the mean field: a large sample follows the flow map
    x0 = alpha0 + sigma0 * np.random.default_rng(0).standard_normal((1000, 1))
    traj = simulate(x0, Attention("softmax", A=[[a]], V=[[v]]), 0.5, dt=0.25)
    err = np.sqrt(np.mean((traj.final[:, 0] - gaussian_1d_flow_map(x0[:, 0], 0.5, alpha0, sigma0, a, v)) ** 2))
    assert err < 0.06
    assert blowup_time_1d(1.0, 0.5, 1.0) == pytest.approx(1.0)
    assert blowup_time_1d(1.0, -0.5, 1.0) == math.inf
    with pytest.raises(BlowUpError, match="blows up"):
        gaussian_1d_solution(1.5, 0.0, 1.0, 0.5, 1.0)


def test_fit_power_law_recovers_an_exact_slope():
    ns = np.array([10, 100, 1000])
    gamma, c, se = fit_power_law(ns, 3.0 * ns**-0.5)
    assert gamma == pytest.approx(-0.5, abs=1e-12) and c == pytest.approx(math.log(3.0)) and se < 1e-10
    with pytest.raises(ValueError, match="positive"):
        fit_power_law(ns, [1.0, 0.0, 1.0])
    # bootstrap over seeds: noisy seeds give a visible uncertainty, identical seeds none
    noisy = 3.0 * ns[:, None] ** -0.5 * np.random.default_rng(0).lognormal(0, 0.5, (3, 20))
    g, _, se_boot = fit_power_law(ns, noisy, bootstrap=400, rng=1)
    assert 0.02 < se_boot < 0.2 and abs(g + 0.5) < 4 * se_boot
    assert fit_power_law(ns, np.repeat((ns**-0.5)[:, None], 5, axis=1), bootstrap=50, rng=1)[2] < 1e-12


@pytest.mark.slow
def test_c21_meanfield_rate_in_one_dimension_is_about_n_to_the_minus_one_half():
    """Spec §3.3 item 2 with a = -0.5 (see the chapter: a^2 sigma0^4 < 1/2 keeps the importance weights of
    the Gaussian tails square-integrable; at the spec's a = -1 the measured slope is flatter). 30 seeds,
    n = 100..1600 (the spec's 6400 is the chapter's full setting)."""
    out = meanfield_study_1d([100, 400, 1600], range(30), T=2.0, a=-0.5, v=1.0, alpha0=0.5, sigma0=1.0, dt=0.5)
    slope, _, _ = fit_power_law(out["n"], out["wT"])
    assert -0.65 <= slope <= -0.35, slope
    lag, _, _ = fit_power_law(out["n"], out["lagrangian"])
    assert -0.65 <= lag <= -0.35, lag


def test_meanfield_against_a_reference_run_shrinks_with_n():
    layer = Attention("softmax", A=[[-1.0, 0.5], [-0.5, -0.5]], V=np.eye(2))
    sample = lambda n, rng: rng.uniform(-1, 1, (n, 2))  # noqa: E731
    out = meanfield_study_reference(layer, sample, [20, 320], range(3), N_ref=1000, ref_seed=99, T=1.0, dt=0.1)
    assert out["wT"].shape == (2, 3)
    assert out["wT"][1].mean() < 0.6 * out["wT"][0].mean()
    assert out["ref_self"].shape == (2,) and out["ref_self"][1] < out["wT"][1].mean()
    with pytest.raises(ValueError, match="reference seeds"):
        meanfield_study_reference(layer, sample, [20], [100], N_ref=50, ref_seed=99, T=1.0, dt=0.1)


# ---------------------------------------------------------------------------------------------
# stability (§3.1–3.2), C20
# ---------------------------------------------------------------------------------------------


def test_stability_bound_integrates_the_support_radius_and_the_constant():
    layer = Attention("softmax", A=[[0.5, 0.2], [-0.1, -0.3]], V=1.3 * np.eye(2))
    t = np.linspace(0, 1, 11)
    logC, R = log_stability_bound(layer, t, 1.5)
    np.testing.assert_allclose(R, 1.5 * np.exp(1.3 * t), rtol=1e-9)  # R' = |V| R
    lx, lm = lipschitz_constants(layer, 1.5)
    a, v = np.linalg.norm(layer.A[0], 2), 1.3
    assert lx == pytest.approx(a * v * 1.5**2) and lm == pytest.approx(v * (1 + 2 * a * 2.25) * math.exp(4.5 * a))
    start, _ = log_stability_bound(layer, [0.0, 1e-5], 1.5)
    assert start[1] / 1e-5 == pytest.approx(lx + lm, rel=1e-3)  # d/dt log C = L(R_0) at t = 0
    # time-dependent parameters: a constant callable gives the same bound, V(t) = cos(t) V shrinks it
    same, _ = log_stability_bound(lambda s: layer, t, 1.5)
    np.testing.assert_allclose(same, logC, rtol=1e-12)
    slower, R2 = log_stability_bound(lambda s: layer.with_(V=math.cos(s) * 1.3 * np.eye(2)), t, 1.5)
    np.testing.assert_allclose(R2, 1.5 * np.exp(1.3 * np.sin(t)), rtol=1e-8)
    assert np.all(slower[1:] < logC[1:])
    # linear attention: R' = a v R^3 blows up in finite time, and so does the bound
    lin = Attention("linear", A=np.eye(2), V=np.eye(2))
    logC_lin, R_lin = log_stability_bound(lin, np.linspace(0, 1, 11), 1.0)
    assert R_lin[4] == pytest.approx(1 / math.sqrt(1 - 2 * 0.4), rel=1e-6) and np.isinf(logC_lin[-1])


def test_stability_constants_refuse_sinkhorn_and_a_causal_layer_without_sink():
    with pytest.raises(ValueError, match="Sinkhorn"):
        lipschitz_constants(Attention("sinkhorn", A=np.eye(2), V=np.eye(2)), 1.0)
    causal = Attention("softmax", A=np.eye(2), V=np.eye(2), causal=True)
    with pytest.raises(ValueError, match="sink"):
        lipschitz_constants(causal, 1.0)
    free = lipschitz_constants(causal.with_(causal=False), 1.0)
    sunk = lipschitz_constants(causal, 1.0, m0=0.25)
    assert sunk[0] == free[0] and sunk[1] == pytest.approx(4 * free[1])
    assert support_speed(Attention("linear", A=2 * np.eye(2), V=np.eye(2)), 2.0) == pytest.approx(16.0)


def test_perturbation_is_uniform_in_the_ball_of_radius_delta():
    X = np.zeros((20000, 2))
    Y = perturb_in_ball(X, 0.1, rng=0)
    r = np.linalg.norm(Y, axis=1)
    assert r.max() <= 0.1 and abs(np.mean(r**2) - 0.1**2 / 2) < 1e-4  # E|xi|^2 = 1/2 in the disc


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_c20_measured_growth_factor_stays_below_the_explicit_bound(name):
    rng = np.random.default_rng(12)
    X0 = rng.uniform(-1, 1, (60, 2))
    var = paper1_variants(np.array([[0.5, 0.2], [-0.1, -0.3]]), np.eye(2), names=[name])[name]
    out = stability_study(var, X0, [1e-3, 1e-1], T=1.0, dt=0.05, save_every=5, rng=1)
    assert np.all(np.isfinite(out["ratio"])) and np.all(np.isnan(out["blowup"]))
    assert np.all(out["ratio"][:, 0] == 1.0) and np.max(np.abs(out["ratio"] - 1)) > 1e-3
    if name == "sinkhorn":
        assert np.all(np.isnan(out["log_bound"]))  # no explicit constant: measured only
    else:
        assert np.all(np.log(out["ratio"]) <= out["log_bound"][None, :] + 1e-12)


# ---------------------------------------------------------------------------------------------
# the widget: one update is a library call, well under 0.2 s
# ---------------------------------------------------------------------------------------------


def test_widget_update_runs_every_variant_in_well_under_0_2_seconds():
    from tokendynamics.book.experiments import settings

    p = settings("p1_widget")
    X0 = np.random.default_rng(p["seed"]).uniform(-1, 1, (p["n"], 2))
    times = []
    for name in VARIANT_NAMES:
        var = paper1_variants(np.array(p["A"]), np.array(p["V"]), beta=p["beta"], names=[name])[name]
        var.run(X0, p["T"], dt=p["dt"])  # warm-up
        start = time.perf_counter()
        for _ in range(3):
            var.run(X0, p["T"], dt=p["dt"])
        times.append((time.perf_counter() - start) / 3)
    assert float(np.median(times)) < 0.1 and max(times) < 0.2, dict(zip(VARIANT_NAMES, times))
