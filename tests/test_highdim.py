"""High-dimensional experiments (paper 2 §1.1, §5, §7.5; spec §8 items 5, 7, 17).

Named after the claims they check: the projective reduction of linear attention, the closed forms of
the order parameters, the spectra the matrix recipes promise, the 2D predictor against the §5 table
and against 2D particle runs, the clustering detector, the high-dimensional smoke test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from tokendynamics import Attention, metrics, particle_field, projective, sample_sphere, simulate
from tokendynamics import highdim as hd
from tokendynamics.book import highdim_plots
from tokendynamics.book.explorers import highdim_update
from tokendynamics.kuramoto import order_parameter
from tokendynamics.sweeps import grid, sweep

# ---------------------------------------------------------------------------------------------
# the exact projective reduction (spec §1.1, §8 item 5)
# ---------------------------------------------------------------------------------------------


def test_projective_reduction_matches_the_particle_system_to_1e8_in_d5():
    """Spec §8 item 5: d = 5, n = 40, random A, V, on [0, 3]: max token error < 1e-8."""
    rng = np.random.default_rng(5)
    d, n = 5, 40
    layer = Attention("linear", A=rng.standard_normal((d, d)), V=rng.standard_normal((d, d)), beta=1.3)
    X0 = sample_sphere(n, d, rng)
    t_eval = np.linspace(0, 3, 31)
    ref = simulate(X0, layer, 3.0, method="adaptive", sphere=True, rtol=1e-12, atol=1e-13, t_eval=t_eval)
    red = projective.projective_flow(X0, layer, 3.0, t_eval=t_eval, rtol=1e-12, atol=1e-13)
    err = np.max(np.abs(red.X - ref.X))
    assert err < 1e-8, err
    assert np.max(np.abs(red.X[-1] - X0)) > 0.1  # the tokens did move


def test_projective_reduction_agrees_with_particles_to_1e6_across_the_clustering_transition_at_d100():
    mc = hd.case2(100, 2.0)
    X0 = sample_sphere(200, 100, 0)
    a = hd.run_variant(mc, "linear", X0, 30.0, engine="projective", solver="DOP853", rtol=1e-9, atol=1e-11, n_eval=31)
    b = hd.run_variant(mc, "linear", X0, 30.0, engine="particles", solver="DOP853", rtol=1e-9, atol=1e-11, n_eval=31)
    assert np.max(np.abs(a.XT - b.XT)) < 1e-6
    assert np.max(np.abs(a.R2 - b.R2)) < 1e-8
    assert a.R2[-1] > 0.99  # clustered by t = 30, so the comparison covers the whole transition


def test_projective_reduction_uses_the_library_convention_score_x_dot_A_y():
    """The authors' app scores <A x_k, x_j> (i.e. A^T); the library scores <x_k, A x_j>."""
    mc = hd.case1(6, "positive", skew_scale=3.0, seed=3)
    X0 = sample_sphere(30, 6, 2)
    ours = projective.projective_flow(X0, mc.layer("linear"), 2.0, t_eval=[0, 2.0])
    parts = simulate(X0, mc.layer("linear"), 2.0, method="adaptive", sphere=True, t_eval=[0, 2.0])
    transposed = simulate(
        X0, Attention("linear", A=mc.A.T, V=mc.V), 2.0, method="adaptive", sphere=True, t_eval=[0, 2.0]
    )
    assert np.max(np.abs(ours.final - parts.final)) < 1e-7
    assert np.max(np.abs(ours.final - transposed.final)) > 1e-2


def test_beta_only_rescales_time_for_linear_attention():
    mc = hd.case4(8, 1.0, 0.5)
    X0 = sample_sphere(50, 8, 1)
    slow = projective.projective_flow(X0, mc.layer("linear", 1.0), 6.0, t_eval=[0, 6.0], rtol=1e-11, atol=1e-12)
    fast = projective.projective_flow(X0, mc.layer("linear", 3.0), 2.0, t_eval=[0, 2.0], rtol=1e-11, atol=1e-12)
    assert np.max(np.abs(slow.final - fast.final)) < 1e-8


def test_projective_flow_stops_at_the_clustering_level_found_by_the_particle_system():
    mc = hd.case2(12, 2.0, seed=1)
    X0 = sample_sphere(60, 12, 3)
    stop = projective.projective_flow(
        X0, mc.layer("linear"), 50.0, t_eval=[0.0, 50.0], until=0.9, rtol=1e-10, atol=1e-12
    )
    ref = simulate(
        X0,
        mc.layer("linear"),
        20.0,
        method="adaptive",
        sphere=True,
        rtol=1e-10,
        atol=1e-12,
        t_eval=np.linspace(0, 20, 4001),
    )
    t_ref = metrics.first_passage_times(ref.t, metrics.order_parameters(ref.X)[1], [0.9])[0]
    assert abs(stop.info["event_time"] - t_ref) < 1e-4 and abs(stop.t[-1] - t_ref) < 1e-4
    assert abs(metrics.order_parameters(stop.final)[1] - 0.9) < 1e-8
    never = projective.projective_flow(X0, hd.case2(12, -0.5).layer("linear"), 5.0, until=0.9)
    assert never.info["event_time"] == math.inf and never.t[-1] == 5.0


def test_projective_flow_rejects_what_it_does_not_reduce():
    X0 = sample_sphere(10, 3, 0)
    with pytest.raises(ValueError, match="linear attention"):
        projective.projective_flow(X0, Attention("softmax", A=np.eye(3), V=np.eye(3)), 1.0)
    with pytest.raises(ValueError, match="unit tokens"):
        projective.projective_flow(2 * X0, Attention("linear", A=np.eye(3), V=np.eye(3)), 1.0)
    with pytest.raises(ValueError, match="non-finite"):
        projective.projective_flow(np.full((4, 3), np.nan), Attention("linear", A=np.eye(3), V=np.eye(3)), 1.0)


# ---------------------------------------------------------------------------------------------
# order parameters and diagnostics (spec §7.5)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n, d", [(50, 7), (6, 40)])
def test_order_parameters_through_sigma_equal_the_pairwise_means(n, d):
    rng = np.random.default_rng(n + d)
    X = rng.standard_normal((3, n, d)) * rng.uniform(0.5, 2.0, (3, n, 1))  # not unit: the general formula
    R1, R2 = metrics.order_parameters(X)
    i, j = np.triu_indices(n, k=1)
    for k in range(3):
        G = X[k] @ X[k].T
        assert abs(R1[k] - G[i, j].mean()) < 1e-12 * max(1, abs(G).max())
        assert abs(R2[k] - (G[i, j] ** 2).mean()) < 1e-12 * max(1, (G**2).max())
    Xu = X[0] / np.linalg.norm(X[0], axis=1, keepdims=True)
    S = metrics.second_moment(Xu)
    r1, r2 = metrics.order_parameters(Xu)
    assert abs(r2 - (n * np.trace(S @ S) - 1) / (n - 1)) < 1e-13
    assert abs(r1 - (n * np.sum(Xu.mean(0) ** 2) - 1) / (n - 1)) < 1e-13


def test_uniform_tokens_give_R2_about_one_over_d_and_R1_about_zero():
    d, n = 20, 3000
    R1, R2 = metrics.order_parameters(sample_sphere(n, d, 0))
    # E<x,y>^2 = 1/d; the pair mean has standard deviation about sqrt(2 (d-1)/(d^2 (d+2)) * 2/n)
    assert abs(R2 - 1 / d) < 0.05 / d
    assert abs(R1) < 5 / math.sqrt(n * d) / math.sqrt(n)


def test_antipodal_clusters_give_R2_one_and_R1_minus_one_over_n_minus_one():
    u = sample_sphere(1, 30, 1)[0]
    n = 40
    X = np.array([u] * (n // 2) + [-u] * (n // 2))
    R1, R2 = metrics.order_parameters(X)
    assert abs(R2 - 1) < 1e-14 and abs(R1 + 1 / (n - 1)) < 1e-14
    lam, axis = metrics.top_direction(X)
    assert abs(lam - 1) < 1e-14 and abs(abs(axis @ u) - 1) < 1e-12


def test_one_cluster_gives_both_order_parameters_one():
    X = np.tile(sample_sphere(1, 12, 2), (25, 1))
    R1, R2 = metrics.order_parameters(X)
    assert abs(R1 - 1) < 1e-14 and abs(R2 - 1) < 1e-14


def _noisy(centres, sizes, noise, rng):
    X = np.concatenate([c + noise * rng.standard_normal((s, c.size)) for c, s in zip(centres, sizes)])
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def test_cluster_detector_finds_two_antipodal_clusters_one_cluster_or_none():
    rng = np.random.default_rng(0)
    u = sample_sphere(1, 50, rng)[0]
    two = metrics.detect_clusters(_noisy([u, -u], [30, 20], 1e-4, rng))
    assert (two.n_clusters, two.n_axes, two.antipodal, two.sizes) == (2, 1, True, (30, 20))
    assert two.description == "two antipodal clusters" and two.clustered_pairs == 1.0
    one = metrics.detect_clusters(_noisy([u], [40], 1e-4, rng))
    assert (one.n_clusters, one.antipodal, one.description) == (1, False, "one cluster")
    v = sample_sphere(1, 50, rng)[0]
    three = metrics.detect_clusters(_noisy([u, -u, v], [10, 10, 10], 1e-4, rng))
    assert three.n_clusters == 3 and three.n_axes == 2 and not three.antipodal
    none = metrics.detect_clusters(sample_sphere(60, 50, rng))
    assert none.n_clusters == 60 and none.description == "no clusters" and none.clustered_pairs == 0.0


def test_sorted_gram_shows_two_plus_one_blocks_for_antipodal_clusters():
    rng = np.random.default_rng(1)
    u = sample_sphere(1, 20, rng)[0]
    X = _noisy([u, -u, u], [5, 7, 4], 0.0, rng)
    rng.shuffle(X)
    G, order, split = metrics.sorted_gram(X)
    assert split in (9, 7)
    np.testing.assert_allclose(G[:split, :split], 1, atol=1e-12)
    np.testing.assert_allclose(G[split:, split:], 1, atol=1e-12)
    np.testing.assert_allclose(G[:split, split:], -1, atol=1e-12)
    assert sorted(order) == list(range(16))


def test_first_passage_times_interpolate_and_report_never_as_inf():
    t = np.linspace(0, 10, 11)
    R = t / 10
    np.testing.assert_allclose(metrics.first_passage_times(t, R, [0.05, 0.5, 0.99]), [0.5, 5.0, 9.9], atol=1e-12)
    assert metrics.first_passage_times(t, R, [1.5])[0] == math.inf
    with pytest.raises(ValueError, match="increasing"):
        metrics.first_passage_times(t[::-1], R)


def test_observed_regime_names_static_rotating_oscillating_partial_and_unsettled_signals():
    t = np.linspace(0, 100, 401)
    e1, e2 = np.eye(3)[0], np.eye(3)[1]
    still = np.tile(e1, (t.size, 1))
    turning = np.cos(0.5 * t)[:, None] * e1 + np.sin(0.5 * t)[:, None] * e2
    one = 1 - np.exp(-t)
    assert hd.observed_regime(t, one, still) == "static_clusters"
    assert hd.observed_regime(t, one, turning) == "rotating_clusters"
    wave = 0.012 + 0.002 * np.exp(-t / 200) * np.sin(t / 3)
    assert hd.observed_regime(t, wave, still) == "oscillation"
    settled = 0.006 + 0.004 * np.exp(-t / 5)
    assert hd.observed_regime(t, settled, still) == "partial"
    drifting = 0.01 + 0.005 * t
    assert hd.observed_regime(t, drifting, still) == "not_settled"
    merging = 0.99 - 0.5 / (t + 10)  # clusters merging slowly below the level: not a settled state
    assert hd.observed_regime(t, merging, still) == "not_settled"


# ---------------------------------------------------------------------------------------------
# matrix recipes (spec §7.5)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spectrum", ["positive", "mixed", "negative"])
def test_case1_symmetric_part_has_the_promised_spectrum_and_V_is_identity(spectrum):
    mc = hd.case1(40, spectrum, seed=7)
    sym = 0.5 * (mc.A + mc.A.T)
    np.testing.assert_allclose(np.linalg.eigvalsh(sym)[::-1], mc.spectrum, atol=1e-12)
    np.testing.assert_array_equal(mc.V, np.eye(40))
    assert np.max(np.abs(mc.A - mc.A.T)) > 0.05  # the skew part is there
    lam = mc.spectrum
    if spectrum == "positive":
        assert lam.min() >= 0.5 and lam.max() <= 2.0
    elif spectrum == "negative":
        assert lam.max() <= -0.5 and lam.min() >= -2.0
    else:
        assert np.sum(lam > 0) == 1 and 0.3 <= lam[0] <= 0.8 and np.trace(mc.A) <= 0


@pytest.mark.parametrize("top", [2.0, 0.3, 0.0, -0.5])
def test_case2_V_is_symmetric_with_the_chosen_top_eigenvalue(top):
    mc = hd.case2(30, top, seed=3)
    np.testing.assert_array_equal(mc.A, np.eye(30))
    np.testing.assert_allclose(mc.V, mc.V.T, atol=0)
    lam = np.linalg.eigvalsh(mc.V)
    assert abs(lam[-1] - top) < 1e-12
    assert lam[-2] < top
    if top > 0:
        assert lam[0] >= -0.9 * top - 1e-12
    else:
        assert lam[-2] <= top - 0.01


@pytest.mark.parametrize("d", [6, 7])
def test_cases_3_and_4_have_the_spectrum_of_their_block(d):
    a, b = 0.7, 1.3
    c3 = hd.case3(d, a, b)
    ev = np.sort_complex(np.linalg.eigvals(c3.V))
    expected = [a - 1j * b] * (d // 2) + [a + 1j * b] * (d // 2) + ([a] if d % 2 else [])
    np.testing.assert_allclose(ev, np.sort_complex(np.array(expected, complex)), atol=1e-12)
    c4 = hd.case4(d, a, b)
    w = math.sqrt(b * b - a * a)
    assert np.allclose(np.sort(np.abs(np.linalg.eigvals(c4.V).imag)), np.sort([w] * (2 * (d // 2)) + [0] * (d % 2)))
    assert abs(np.trace(c4.V)) < 1e-14
    rotated = hd.case4(d, a, b, seed=1)
    ev_r, ev_4 = np.linalg.eigvals(rotated.V), np.linalg.eigvals(c4.V)
    np.testing.assert_allclose(np.sort(ev_r.imag), np.sort(ev_4.imag), atol=1e-10)
    np.testing.assert_allclose(ev_r.real, 0, atol=1e-10)
    assert np.max(np.abs(rotated.V - c4.V)) > 0.1


def test_random_case_has_entries_of_variance_sigma_squared_over_d_and_seeds_reproduce():
    mc = hd.random_case(200, 1.5, seed=4)
    for M in (mc.A, mc.V):
        assert abs(M.var() * 200 / 1.5**2 - 1) < 0.02 and abs(M.mean()) < 0.005
    np.testing.assert_array_equal(hd.random_case(200, 1.5, seed=4).A, mc.A)
    assert not np.array_equal(hd.random_case(200, 1.5, seed=5).A, mc.A)
    np.testing.assert_array_equal(hd.case1(10, seed=9).A, hd.case1(10, seed=9).A)


def test_recipes_reject_bad_input_with_clear_messages():
    with pytest.raises(ValueError, match="d must be"):
        hd.case2(1)
    with pytest.raises(ValueError, match="spectrum must be"):
        hd.case1(5, "weird")
    with pytest.raises(ValueError, match="5 finite numbers"):
        hd.case1(5, [1.0, 2.0])
    with pytest.raises(ValueError, match="finite"):
        hd.case3(4, a=np.nan)
    with pytest.raises(ValueError, match="unknown matrix case"):
        hd.matrix_case("case9", 4)
    with pytest.raises(ValueError, match="sigma"):
        hd.random_case(4, sigma=0)


# ---------------------------------------------------------------------------------------------
# the 2D prediction (spec §5)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "case, params, regime",
    [
        # spec §5.7, one row each
        ("case1", {"A": [[1, 2], [-1, 0.5]]}, "static_clusters"),
        ("case1", {"A": np.diag([-1.0, -2.0])}, "partial"),
        ("case1", {"A": [[0.2, 1], [-1, -0.2]]}, "oscillation"),
        ("case1", {"A": np.diag([1.0, -2.0])}, "static_clusters"),
        ("case1", {"A": [[0.8, 2], [-2, -1.2]]}, "bistable"),
        ("case2", {"lambda_max": 2.0}, "static_clusters"),  # V = diag(2, -1)
        ("case2", {"lambda_max": -1.0}, "partial"),  # V = diag(-1, -3)
        ("case4", {"a": 0.5, "b": 1.0}, "oscillation"),
        ("case4", {"a": 1.5, "b": 1.0}, "static_clusters"),
        ("identity_A", {"c": 0.3, "a": 0.5, "b": 1.0}, "rotating_clusters"),  # V = [[0.8, 1], [-1, -0.2]]
        ("case3", {"a": 1.0, "b": 0.5}, "rotating_clusters"),
        ("case3", {"a": 1.0, "b": 0.0}, "static_clusters"),
        ("case3", {"a": -1.0, "b": 0.5}, "partial"),
        ("random", {}, "undetermined"),
    ],
)
def test_2d_prediction_reproduces_the_regime_table_of_spec_section_5(case, params, regime):
    assert hd.predict_2d_regime(case, **params).regime == regime


def test_case1_partial_prediction_quotes_the_interior_level():
    p = hd.predict_2d_regime("case1", A=np.diag([-1.0, -2.0]))
    assert "0.333" in p.criterion and p.section == "§5.1"


def _planar_outcome(V, A=None, T=300.0):
    A = np.eye(2) if A is None else A
    X0 = sample_sphere(300, 2, 1)
    tr = simulate(
        X0,
        Attention("linear", A=A, V=V),
        T,
        method="adaptive",
        sphere=True,
        rtol=1e-9,
        atol=1e-11,
        t_eval=np.linspace(0, T, 601),
    )
    R2 = order_parameter(tr.angles(), 2)[-120:]
    return np.abs(R2), np.ptp(np.unwrap(np.angle(R2)))


@pytest.mark.parametrize(
    "c, a, b",
    [
        (-0.5, 1.0, 0.5),
        (-1.0, 1.0, 0.5),
        (-0.3, 0.5, 1.0),
        (0.3, 0.5, 1.0),
        (0.0, 0.5, 1.0),
        (0.0, 1.0, 0.5),
        (-0.5, 0.0, 0.5),
    ],
)
def test_identity_A_prediction_agrees_with_2d_particle_runs(c, a, b):
    """Includes the derived branch (|a| >= |b|, c < 0): clusters iff c + sqrt(a^2 - b^2) >= 0."""
    V = np.array([[c + a, b], [-b, c - a]])
    regime = hd.predict_2d_regime("identity_A", c=c, a=a, b=b).regime
    mod, winding = _planar_outcome(V)
    if regime == "static_clusters":
        assert mod.min() > 1 - 1e-6 and winding < 1e-3
    elif regime == "rotating_clusters":
        assert mod.min() > 1 - 1e-6 and winding > 2 * np.pi
    elif regime == "partial":
        assert mod.max() < 0.95 and np.ptp(mod) < 0.05
    else:
        assert regime == "oscillation" and np.ptp(mod) > 0.1 and mod.max() < 0.95


def test_predictions_for_the_high_dimensional_recipes():
    d = 20
    assert hd.predict_for_case(hd.case1(d, "positive")).regime == "static_clusters"
    assert hd.predict_for_case(hd.case1(d, "mixed")).regime == "static_clusters"
    assert hd.predict_for_case(hd.case1(d, "negative")).regime == "partial"
    assert hd.predict_for_case(hd.case2(d, 2.0)).regime == "static_clusters"
    assert hd.predict_for_case(hd.case2(d, -0.5)).regime == "partial"
    assert hd.predict_for_case(hd.case3(d, 1.0, 0.5)).regime == "rotating_clusters"
    assert hd.predict_for_case(hd.case4(d, 1.0, 0.5)).regime == "static_clusters"
    assert hd.predict_for_case(hd.case4(d, 0.5, 1.0)).regime == "oscillation"
    assert hd.predict_for_case(hd.random_case(d)).regime == "undetermined"


def test_prediction_rejects_missing_or_degenerate_parameters():
    with pytest.raises(ValueError, match="needs the 2 x 2"):
        hd.predict_2d_regime("case1")
    with pytest.raises(ValueError, match="2 x 2"):
        hd.predict_2d_regime("case1", A=np.eye(3))
    with pytest.raises(ValueError, match="V = 0"):
        hd.predict_2d_regime("case4", a=0.0, b=0.0)
    with pytest.raises(ValueError, match="unknown case"):
        hd.predict_2d_regime("case7")


# ---------------------------------------------------------------------------------------------
# high dimension (spec §8 items 7 and 17)
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["linear", "unnormalized_softmax"])
def test_tokens_stay_on_the_sphere_without_renormalisation_at_d100(kind):
    """Spec §8 item 7: RK45 rtol 1e-6, atol 1e-8, max_step T/200 (the authors' high-dimensional setting,
    spec §7), no retraction after the steps: norm drift < 1e-6 over a run that clusters.

    The right-hand side is the library's tangent field (which reads the tokens' directions); the
    integrator does not renormalise, so any drift of |x_k| is the solver's error.
    """
    mc = hd.case2(100, 2.0)
    layer = mc.layer(kind)
    X0 = sample_sphere(200, 100, 0)
    sol = solve_ivp(
        lambda t, y: particle_field(y.reshape(200, 100), layer, sphere=True).ravel(),
        (0, 30.0),
        X0.ravel(),
        method="RK45",
        rtol=1e-6,
        atol=1e-8,
        max_step=30.0 / 200,
        t_eval=np.linspace(0, 30, 31),
    )
    norms = np.linalg.norm(sol.y.T.reshape(-1, 200, 100), axis=2)
    drift = np.max(np.abs(norms - 1))
    print(f"{kind}: norm drift {drift:.1e}")
    assert drift < 1e-6
    assert metrics.order_parameters(sol.y[:, -1].reshape(200, 100))[1] > 0.5  # and they clustered meanwhile


@pytest.mark.slow
def test_high_dimensional_smoke_test_of_spec_item_17():
    """d = 100, n = 200, beta = 1: LA Case 2 (lambda_1 = 2) clusters antipodally by t = 60; LA with V
    negative definite stays spread; USA Case 2 forms one cluster by t = 10 (particle system)."""
    d, n = 100, 200
    X0 = sample_sphere(n, d, 0)
    la = hd.run_variant(hd.case2(d, 2.0), "linear", X0, 60.0, n_eval=61)
    assert la.R2[-1] > 0.99 and abs(la.R1[-1]) < 0.05
    neg = hd.run_variant(hd.case2(d, -0.5), "linear", X0, 60.0, n_eval=61)
    assert neg.R2.max() < 0.02
    usa = hd.run_variant(hd.case2(d, 2.0), "unnormalized_softmax", X0, 10.0, n_eval=11)
    assert usa.R1[-1] > 0.99
    assert la.clusters().description == "two antipodal clusters"
    assert usa.clusters().description == "one cluster"


def test_case3_clusters_rotate_at_the_2d_rate_beta_b_in_d30():
    """Spec §5.3: in d = 2 the clusters turn at |theta_c'| = beta |b|; the block recipe keeps this rate."""
    mc = hd.case3(30, 1.0, 0.5)
    s = hd.run_variant(
        mc, "linear", sample_sphere(60, 30, 0), 40.0, beta=1.5, engine="projective", n_eval=401, rtol=1e-9, atol=1e-11
    )
    assert s.regime() == "rotating_clusters"
    np.testing.assert_allclose(metrics.axis_speed(s.t[-100:], s.axis[-100:]), 1.5 * 0.5, rtol=1e-5)


def test_run_variant_reports_a_clear_error_for_unknown_variants_or_engines():
    mc = hd.case2(4)
    X0 = sample_sphere(5, 4, 0)
    with pytest.raises(ValueError, match="kind must be"):
        hd.run_variant(mc, "l2", X0, 1.0)
    with pytest.raises(ValueError, match="linear attention only"):
        hd.run_variant(mc, "softmax", X0, 1.0, engine="projective")


# ---------------------------------------------------------------------------------------------
# sweeps and the widget
# ---------------------------------------------------------------------------------------------


def test_sweep_returns_results_in_grid_order_serially_and_in_parallel():
    points = grid(beta=[1.0, 2.0], d=[6, 8])
    assert points[1] == {"beta": 1.0, "d": 8}
    kw = dict(case="case2", kind="linear", n=30, T=40.0, n_eval=201, top=2.0)
    serial = sweep(hd.clustering_time, points, n_jobs=1, progress=False, **kw)
    parallel = sweep(hd.clustering_time, points, n_jobs=2, progress=False, **kw)
    assert [r["t_level"] for r in serial] == [r["t_level"] for r in parallel]
    assert [(r["beta"], r["d"]) for r in serial] == [(p["beta"], p["d"]) for p in points]
    # beta only rescales time for linear attention: t(beta = 2) = t(beta = 1) / 2
    for r1, r2 in zip(serial[:2], serial[2:]):
        assert abs(r2["t_level"] - r1["t_level"] / 2) < 1e-4 * r1["t_level"]
    with pytest.raises(ValueError, match="both in the grid"):
        sweep(hd.clustering_time, points, progress=False, beta=1.0)


def test_widget_update_runs_every_case_and_its_loose_tolerance_is_invisible():
    """The explorer's library call (its speed is measured by `make bench`, not here)."""
    for case in hd.CASES:
        out = highdim_update(case, a=0.5, b=1.0)
        assert set(out) >= {"case", "prediction", "linear", "unnormalized_softmax"}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2)
    highdim_plots.plot_runs(axes, out, d=16)  # one R2 and one R1 curve per variant
    assert [len(ax.get_lines()) for ax in axes] == [3, 2]  # + the dotted 1/d line
    assert axes[0].get_yscale() == "log" and axes[0].get_legend() is not None
    plt.close(fig)
    tight = highdim_update("case4", a=0.5, b=1.0, rtol=1e-8, atol=1e-10)
    for kind in ("linear", "unnormalized_softmax"):
        loose = highdim_update("case4", a=0.5, b=1.0)[kind]
        assert np.max(np.abs(loose.R2 - tight[kind].R2)) < 1e-3


def test_axis_speed_of_a_line_turning_at_a_known_rate_ignores_the_sign_of_the_axis():
    t = np.linspace(0, 4, 81)
    u = np.stack([np.cos(0.7 * t), np.sin(0.7 * t), np.zeros_like(t)], axis=1)
    u[::3] *= -1  # an eigenvector's sign is arbitrary
    np.testing.assert_allclose(metrics.axis_speed(t, u), 0.7, rtol=1e-10)
    with pytest.raises(ValueError, match="increasing"):
        metrics.axis_speed(t[::-1], u)


def test_mean_by_averages_sweep_results_over_seeds_per_parameter_value():
    from tokendynamics.sweeps import mean_by

    rows = [
        {"d": 10, "seed": 0, "t_level": 2.0},
        {"d": 5, "seed": 0, "t_level": 1.0},
        {"d": 10, "seed": 1, "t_level": 4.0},
        {"d": 5, "seed": 1, "t_level": math.inf},
    ]
    xs, means = mean_by(rows, "d")
    np.testing.assert_array_equal(xs, [5.0, 10.0])
    assert means[0] == math.inf and means[1] == 3.0
    with pytest.raises(ValueError, match="entries"):
        mean_by(rows, "beta")


def test_agreement_compares_prediction_and_observation():
    assert hd.agreement("static_clusters", "static_clusters") == "agrees"
    assert hd.agreement("oscillation", "partial") == "differs"
    assert hd.agreement("partial", "not_settled") == "undecided"
    assert hd.agreement("undetermined", "static_clusters") == "no prediction"
    with pytest.raises(ValueError, match="not one of"):
        hd.agreement("clusters", "partial")


def test_make_case_uses_the_seed_only_for_random_recipes():
    np.testing.assert_array_equal(hd.make_case("case4", 6, 1, a=1.0, b=0.5).V, hd.case4(6, 1.0, 0.5).V)
    np.testing.assert_array_equal(hd.make_case("case2", 6, 3).V, hd.case2(6, seed=3).V)
