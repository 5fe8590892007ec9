"""Tests of ``tokendynamics.transformer``: L residual blocks of step T/L against the ODE they discretise.

References for the statements checked: Paper 1 (Castin et al., arXiv 2501.18322), the particle
system and its Gaussian closure; Paper 2 (Li et al., 2026), tokens on the sphere; the book's chapter
``chapters/08_transformer.md``, where each statement is derived [D].
"""

from __future__ import annotations

import numpy as np
import pytest

from tokendynamics import Attention, metrics, normalize_rows, sample_gaussian, sample_sphere, simulate, velocity
from tokendynamics.ensembles import recipe_matrices
from tokendynamics.errors import BlowUpError
from tokendynamics.gaussian import covariance_eigenvalues, empirical_moments, isotropic_covariance
from tokendynamics.transformer import LAYER_NORM_EPS, MLP, forward, layer_norm

EYE3 = np.eye(3)


def _ln_reference(X, eps=LAYER_NORM_EPS):
    """LayerNorm written token by token: (x - mean) / sqrt(population variance + eps)."""
    out = np.empty_like(X)
    for i, x in enumerate(X):
        m = sum(x) / len(x)
        var = sum((a - m) ** 2 for a in x) / len(x)
        out[i] = [(a - m) / np.sqrt(var + eps) for a in x]
    return out


def _mlp_reference(X, W1, W2, s, activation):
    H = np.einsum("ka,ia->ik", W1, X)
    H = np.where(H > 0, H, 0.0) if activation == "relu" else np.tanh(H)
    return s * np.einsum("ak,ik->ia", W2, H)


def _centred(n, d, seed):
    U = sample_sphere(n, d, seed)
    return normalize_rows(U - U.mean(axis=1, keepdims=True))


def _gaussian_layers(d, beta, count, seed):
    M = recipe_matrices("gaussian", d, count, seed)
    return [Attention("softmax", Q=M["Q"][k], K=M["K"][k], V=M["V"][k], beta=beta) for k in range(count)]


def _projection_layer(d, r, rng, beta=1.0):
    Q = np.linalg.qr(rng.standard_normal((d, r)))[0]
    return Attention("softmax", A=-Q @ Q.T, V=np.eye(d), beta=beta)


# --------------------------------------------------------------------------------------------------
# the blocks themselves


def test_layer_norm_matches_the_reference_formula_and_lands_on_the_sphere_of_radius_root_d(rng):
    X = rng.standard_normal((7, 5)) * 3 + 1
    Y = layer_norm(X)
    np.testing.assert_allclose(Y, _ln_reference(X), rtol=0, atol=1e-14)
    np.testing.assert_allclose(Y.mean(axis=1), 0, atol=1e-14)
    var = X.var(axis=1)
    np.testing.assert_allclose(np.linalg.norm(Y, axis=1), np.sqrt(5 * var / (var + LAYER_NORM_EPS)), rtol=1e-14)
    np.testing.assert_allclose(layer_norm(X[None], eps=0.5)[0], _ln_reference(X, 0.5), atol=1e-14)
    with pytest.raises(ValueError, match="d >= 2"):
        layer_norm(np.ones((3, 1)))


def test_mlp_strength_is_the_size_of_its_output_relative_to_its_input(rng):
    """The ReLU block with He's variances has E|F(x)|^2 = s^2 |x|^2 (for large width), is positively
    homogeneous, and the tanh block is odd."""
    x = rng.standard_normal(6)
    mlp = MLP(64, 0.7)
    ratios = [np.sum(mlp(x[None], mlp.sample(6, seed)) ** 2) / np.sum(x**2) for seed in range(3000)]
    assert np.mean(ratios) == pytest.approx(0.7**2, rel=0.05)  # sampling error of 3000 draws: about 1.5 %
    w = mlp.sample(6, 1)
    np.testing.assert_allclose(mlp(3.0 * x[None], w), 3.0 * mlp(x[None], w), rtol=1e-14)
    odd = MLP(16, 1.0, "tanh")
    w = odd.sample(6, 2)
    np.testing.assert_allclose(odd(-x[None], w), -odd(x[None], w), rtol=1e-14)
    W1, W2 = odd.sample(6, 3)
    assert W1.shape == (16, 6) and W2.shape == (6, 16)
    np.testing.assert_array_equal(odd.sample(6, 3)[0], W1)  # seeded


@pytest.mark.claim("residual-blocks-are-euler-steps")
@pytest.mark.parametrize("kind", ["softmax", "linear", "sigmoid", "l2"])
def test_forward_without_norm_is_the_euler_scheme_of_simulate(kind, rng):
    """Without normalisation or MLP, L residual blocks of step T/L are the explicit Euler scheme of the
    particle system of Paper 1 (Castin et al., arXiv 2501.18322): the same numbers as
    ``simulate(method="euler", dt=T/L)``, to round-off, one head or two."""
    X0 = 0.5 * rng.standard_normal((9, 3))
    for heads in (1, 2):
        if kind == "l2":
            Q, K, V = (0.5 * rng.standard_normal((heads, 3, 3)) for _ in range(3))
            layer = Attention("l2", Q=Q, K=K, V=V)
        else:
            layer = Attention(
                kind, A=0.5 * rng.standard_normal((heads, 3, 3)), V=0.5 * rng.standard_normal((heads, 3, 3))
            )
        Y = forward(X0, layer, 1.7, 13)
        euler = simulate(X0, layer, 1.7, dt=1.7 / 13, method="euler")
        assert Y.shape == (14, 9, 3)
        assert np.max(np.abs(Y - euler.X)) <= 1e-13


@pytest.mark.claim("residual-blocks-are-euler-steps")
@pytest.mark.parametrize("norm", [None, "pre", "post", "sphere"])
def test_forward_equals_a_plain_residual_loop_for_every_norm(norm, rng):
    """Every block of ``forward`` is the residual update it documents, with tied or fresh weights and
    MLP, on the attention field of Paper 1 (Castin et al., arXiv 2501.18322); written here as a plain
    loop with a LayerNorm and an MLP of its own, to 1e-12."""
    n, d, T, L = 6, 4, 2.0, 5
    X0 = normalize_rows(rng.standard_normal((n, d)))
    fresh = [Attention("softmax", A=rng.standard_normal((d, d)), V=rng.standard_normal((d, d)) / 2) for _ in range(L)]
    mlp = MLP(8, 0.8, "tanh" if norm == "pre" else "relu")
    for layers, with_mlp in ((fresh[0], False), (fresh, True), (fresh[0], True)):
        gen = np.random.default_rng(5)
        k_layers = layers if isinstance(layers, list) else [layers] * L
        draws = len(layers) if isinstance(layers, list) else 1
        weights = []
        for _ in range(draws):
            W1 = gen.standard_normal((8, d)) * np.sqrt((1.0 if mlp.activation == "tanh" else 2.0) / d)
            weights.append((W1, gen.standard_normal((d, 8)) / np.sqrt(8)))
        X, h = X0.copy(), T / L
        for k in range(L):
            Z = _ln_reference(X) if norm == "pre" else X
            U = velocity(Z, k_layers[k])
            if with_mlp:
                W1, W2 = weights[k % draws]
                U = U + _mlp_reference(Z, W1, W2, mlp.strength, mlp.activation)
            Y = X + h * U
            X = (
                _ln_reference(Y)
                if norm == "post"
                else Y / np.linalg.norm(Y, axis=1)[:, None]
                if norm == "sphere"
                else Y
            )
        out = forward(X0, layers, T, L, norm=norm, mlp=mlp if with_mlp else None, rng=5 if with_mlp else None)
        np.testing.assert_allclose(out[-1], X, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(out[0], X0)


@pytest.mark.claim("depth-error-falls-like-one-over-l")
@pytest.mark.parametrize("norm", [None, "sphere"])
def test_forward_error_against_a_fine_ode_solution_falls_like_one_over_L(norm, rng):
    """L blocks approach the ODE of Paper 1 (Castin et al., arXiv 2501.18322) at depth T at order one:
    the distance to a fine fourth-order Runge–Kutta solution has slope -1 +- 0.2 in L, without
    normalisation (Euclidean clustering weights A = -P) and with the sphere retraction (Q = K = V = I)."""
    if norm is None:
        X0, layer = rng.standard_normal((16, 3)), _projection_layer(3, 2, rng)
    else:
        X0, layer = sample_sphere(16, 3, rng), Attention("softmax", A=EYE3, V=EYE3)
    T, Ls = 2.0, np.array([16, 32, 64, 128])
    ref = simulate(X0, layer, T, dt=T / 1024, method="rk4", sphere=norm == "sphere").final
    err = [np.max(np.linalg.norm(forward(X0, layer, T, L, norm=norm)[-1] - ref, axis=1)) for L in Ls]
    slope = np.polyfit(np.log(Ls), np.log(err), 1)[0]
    assert -1.2 <= slope <= -0.8, (slope, err)


@pytest.mark.claim("sphere-blocks-cluster-later")
def test_sphere_blocks_are_the_tangent_retraction_with_a_shorter_step_and_converge_with_simulate(rng):
    """The sphere block normalises x + h Gamma(x): it is the retraction of the tangent step of the
    sphere model of Paper 2 (Li et al., 2026) with the per-token step h / (1 + h <x, Gamma(x)>), exactly,
    and its distance to ``simulate``'s projected Euler falls like 1/L."""
    X0 = sample_sphere(12, 3, rng)
    layer = Attention("softmax", A=EYE3, V=EYE3, beta=2.0)
    h = 0.4
    G = velocity(X0, layer)
    a = np.sum(G * X0, axis=1, keepdims=True)
    tangent = X0 + h / (1 + h * a) * (G - a * X0)
    np.testing.assert_allclose(forward(X0, layer, h, 1, norm="sphere")[1], normalize_rows(tangent), atol=1e-15)
    gaps = []
    for L in (32, 64, 128):
        Y = forward(X0, layer, 3.0, L, norm="sphere")[-1]
        gaps.append(np.max(np.abs(Y - simulate(X0, layer, 3.0, dt=3.0 / L, method="euler", sphere=True).final)))
    assert gaps[-1] < 0.02 and 1.7 < gaps[0] / gaps[1] < 2.3 and 1.7 < gaps[1] / gaps[2] < 2.3, gaps
    with pytest.raises(ValueError, match="unit-norm"):
        forward(2 * X0, layer, 1.0, 2, norm="sphere")


@pytest.mark.claim("sphere-blocks-cluster-later")
def test_sphere_blocks_at_a_large_step_reach_one_cluster_later_than_the_ode():
    """At step 1 (L = 12 blocks over depth 12) the sphere retraction of the model of Paper 2 (Li et
    al., 2026), Q = K = V = I, reaches one cluster later than the ODE, for every cloud tried, and at
    step 1/4 nearly at the ODE's depth."""
    layer = Attention("softmax", A=np.eye(8), V=np.eye(8))
    for seed in range(4):
        U0 = _centred(32, 8, seed)
        ode = simulate(U0, layer, 12.0, dt=0.05, method="rk4", sphere=True)
        first = lambda t, X: t[np.nonzero(metrics.count_clusters(X) == 1)[0][0]]  # noqa: E731
        t_ode = first(ode.t, ode.X)
        t12 = first(np.linspace(0, 12, 13), forward(U0, layer, 12.0, 12, norm="sphere"))
        t48 = first(np.linspace(0, 12, 49), forward(U0, layer, 12.0, 48, norm="sphere"))
        assert t12 >= t_ode + 2.0 and t_ode < t48 <= t_ode + 1.5, (t_ode, t12, t48)


@pytest.mark.claim("post-layer-norm-is-the-sphere-model")
def test_post_layer_norm_is_the_sphere_retraction_on_the_centred_sphere(rng):
    """Post-LN on centred tokens of norm sqrt(d), with Q and K scaled by 1/sqrt(d) (score matrix A/d), is
    the sphere model of Paper 2 (Li et al., 2026) on the unit sphere of the hyperplane orthogonal to
    (1, ..., 1), with V compressed to P V P: its directions are those of the sphere blocks up to
    LayerNorm's eps (measured 2e-6; tolerance 1e-4). With V = I the compression changes nothing; a V
    that leaves the hyperplane makes the plain sphere model differ."""
    d, T, L = 6, 4.0, 16
    U0 = _centred(10, d, 3)
    P = np.eye(d) - np.ones((d, d)) / d
    A, V = rng.standard_normal((d, d)), rng.standard_normal((d, d)) / 2
    for V_ in (np.eye(d), V):
        post = forward(np.sqrt(d) * U0, Attention("softmax", A=A / d, V=V_), T, L, norm="post")
        sphere = forward(U0, Attention("softmax", A=A, V=P @ V_ @ P), T, L, norm="sphere")
        assert np.max(np.abs(normalize_rows(post) - sphere)) < 1e-4
    plain = forward(U0, Attention("softmax", A=A, V=V), T, L, norm="sphere")
    assert np.max(np.abs(normalize_rows(post) - plain)) > 1e-2


@pytest.mark.claim("pre-layer-norm-runs-on-a-slower-clock")
def test_pre_layer_norm_stream_grows_at_most_linearly_and_follows_the_sphere_model_on_its_clock():
    """Pre-LN (Q = K = V = I, scores scaled by 1/d) keeps the sphere model of Paper 2 (Li et al., 2026) in
    its directions but lets the residual stream grow: the radius r = |x|/sqrt(d) obeys r <= 1 + t, so
    the clock tau = sum h / r is at least log(1 + T); on that clock the order parameter follows the
    ODE's at least twice as closely as on the depth clock."""
    d, T, L = 8, 12.0, 48
    U0 = _centred(32, d, 0)
    layer = Attention("softmax", A=np.eye(d), V=np.eye(d))
    Y = forward(np.sqrt(d) * U0, layer.with_(A=np.eye(d) / d), T, L, norm="pre")
    t = np.linspace(0, T, L + 1)
    r = np.linalg.norm(Y, axis=-1) / np.sqrt(d)
    assert np.all(r <= 1 + t[:, None] + 1e-9) and r[-1].min() > 5  # it does grow, and at most linearly
    tau = np.concatenate([[0.0], np.cumsum(T / L * np.mean(1 / r[:-1], axis=1))])
    assert tau[-1] >= np.log(1 + T)
    ode = simulate(U0, layer, T, dt=0.05, method="rk4", sphere=True)
    R_ode = metrics.order_parameters(ode.X)[0]
    R_pre = metrics.order_parameters(normalize_rows(Y))[0]
    on_depth = np.max(np.abs(R_pre - np.interp(t, ode.t, R_ode)))
    on_clock = np.max(np.abs(R_pre - np.interp(tau, ode.t, R_ode)))
    assert on_clock < on_depth / 2, (on_clock, on_depth)


def _first_single(T, Y):
    one = np.nonzero(metrics.count_clusters(normalize_rows(Y)) == 1)[0]
    return one[0] * T / (len(Y) - 1) if one.size else np.inf


@pytest.mark.claim("relu-mlp-speeds-up-clustering", "tanh-mlp-splits-the-cluster")
def test_a_relu_mlp_keeps_one_cluster_sooner_and_a_tanh_mlp_leaves_several():
    """Post-LN blocks with a random MLP at initialisation (tied weights, width 4d): the clustering of
    Paper 1 (Castin et al., arXiv 2501.18322) survives a ReLU MLP of strength 4 and comes sooner (median
    depth of one cluster over 8 clouds), while an odd tanh MLP of strength 4 leaves more than one
    cluster in most clouds."""
    d, T, L = 8, 12.0, 48
    layer = Attention("softmax", A=np.eye(d) / d, V=np.eye(d))
    t1, clusters = {}, {}
    for name, mlp in (("none", None), ("relu", MLP(32, 4.0)), ("tanh", MLP(32, 4.0, "tanh"))):
        seeds = [100 + c if mlp else None for c in range(8)]
        runs = [
            forward(np.sqrt(d) * _centred(32, d, c), layer, T, L, norm="post", mlp=mlp, rng=seeds[c]) for c in range(8)
        ]
        t1[name] = np.median([_first_single(T, Y) for Y in runs])
        clusters[name] = [metrics.count_clusters(normalize_rows(Y[-1])) for Y in runs]
    assert clusters["none"] == [1] * 8 and clusters["relu"] == [1] * 8
    assert t1["relu"] < 0.8 * t1["none"], t1
    assert sum(c > 1 for c in clusters["tanh"]) >= 5, clusters["tanh"]


@pytest.mark.claim("fresh-weights-converge-like-one-over-root-l")
def test_two_draws_of_fresh_weights_differ_like_one_over_root_L():
    """With Gaussian weights drawn afresh in every block, two draws of the network agree better and
    better as L grows, at the rate L^(-1/2) of a law of large numbers (slope -0.5 +- 0.15, 24 pairs): the limit
    is the ODE of the mean layer, not the ODE of Paper 1 (Castin et al., arXiv 2501.18322) for any one
    layer; two tied draws stay apart."""
    X0 = sample_sphere(16, 3, 0)
    Ls, spread, tied = [8, 32, 128], [], []
    for L in Ls:
        sq, sq_tied = [], []
        for k in range(24):  # pairs of draws: the root-mean-square distance over pairs and tokens
            a, b = (_gaussian_layers(3, 1.0, L, [L, k, j]) for j in (0, 1))
            Ya, Yb = (forward(X0, lay, 2.0, L, norm="sphere")[-1] for lay in (a, b))
            sq.append(np.mean(np.sum((Ya - Yb) ** 2, axis=1)))
            Za, Zb = (forward(X0, lay[0], 2.0, L, norm="sphere")[-1] for lay in (a, b))
            sq_tied.append(np.mean(np.sum((Za - Zb) ** 2, axis=1)))
        spread.append(np.sqrt(np.mean(sq)))
        tied.append(np.sqrt(np.mean(sq_tied)))
    slope = np.polyfit(np.log(Ls), np.log(spread), 1)[0]
    assert -0.65 <= slope <= -0.35, (slope, spread)
    assert min(tied) > 3 * spread[-1], (tied, spread)


@pytest.mark.claim("fresh-weights-merge-clusters")
def test_fresh_weights_raise_the_probability_of_one_cluster():
    """Softmax attention on the sphere with the Gaussian recipe (beta = 4, d = 3, n = 32, 48 blocks of
    step 1/2): over 24 clouds, weights drawn afresh in every block end in one cluster more often than
    tied weights at depth 24 — the clustering of Paper 1 (Castin et al., arXiv 2501.18322) with
    weights that depend on depth."""
    single = {"tied": 0, "fresh": 0}
    for c in range(24):
        X0 = sample_sphere(32, 3, c)
        layers = _gaussian_layers(3, 4.0, 49, 10_000 + c)
        for name, lay in (("tied", layers[0]), ("fresh", layers[1:])):
            single[name] += int(metrics.is_single_cluster(forward(X0, lay, 24.0, 48, norm="sphere")[-1]))
    assert single["fresh"] >= 20 and single["fresh"] >= single["tied"] + 6, single


def _antithetic(n, d, seed):
    Z = sample_gaussian(n // 2, np.zeros(d), np.eye(d), rng=seed)
    return np.vstack([Z, -Z])


@pytest.mark.claim("tied-weights-keep-the-gaussian-rank")
def test_tied_clustering_weights_keep_the_rank_of_the_gaussian_limit(rng):
    """Gaussian tokens through tied blocks A = -P (P a random rank-2 projection of R^4, V = I): the
    covariance follows the Gaussian closed form of Paper 1 (Castin et al., arXiv 2501.18322) to within
    sampling error and ends with numerical rank dim ker(A + A^T) = 2 (eigenvalues above 0.1)."""
    X0 = _antithetic(256, 4, 1)
    layer = _projection_layer(4, 2, rng)
    Y = forward(X0, layer, 40.0, 80)
    lam = covariance_eigenvalues(empirical_moments(Y[-1])[1])
    lam_ode = covariance_eigenvalues(isotropic_covariance(empirical_moments(X0)[1], layer, 40.0))
    assert np.sum(lam > 0.1) == np.sum(lam_ode > 0.1) == 2
    np.testing.assert_allclose(lam, lam_ode, rtol=0.25, atol=5e-3)


@pytest.mark.claim("fresh-weights-collapse-the-rank")
def test_fresh_clustering_weights_collapse_the_rank_like_the_mean_layer(rng):
    """The same blocks with a fresh projection in each: the covariance collapses in every direction like
    the Gaussian closed form of Paper 1 (Castin et al., arXiv 2501.18322) for the mean layer
    A = -(r/d) I (rank 0 above 0.1 at depth 40), where tied weights keep rank d - r."""
    X0 = _antithetic(256, 4, 1)
    layers = [_projection_layer(4, 2, rng) for _ in range(80)]
    lam = covariance_eigenvalues(empirical_moments(forward(X0, layers, 40.0, 80)[-1])[1])
    mean = Attention("softmax", A=-0.5 * np.eye(4), V=np.eye(4))
    lam_mean = covariance_eigenvalues(isotropic_covariance(empirical_moments(X0)[1], mean, 40.0))
    assert np.sum(lam > 0.1) == 0 and np.all(lam < 0.1)
    np.testing.assert_allclose(lam, lam_mean, rtol=0.3)


def test_forward_reports_an_overflow_as_a_blow_up_at_the_depth_of_its_block():
    layer = Attention("unnormalized_softmax", A=np.eye(2), V=np.eye(2), beta=50.0)
    with pytest.raises(BlowUpError, match="overflowed in block 2 of 4") as info:
        forward(np.array([[3.0, 0.0], [0.0, 3.0]]), layer, 40.0, 4)
    assert info.value.time == 20.0 and info.value.last_good_time == 10.0
