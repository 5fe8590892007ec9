"""Tests of ``tokendynamics.book.studies.highdim``: the matrix recipes, the planar predictions, the
high-dimensional runs; and of ``tokendynamics.sweeps`` on these runs.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from tokendynamics import Attention, metrics, sample_sphere, simulate
from tokendynamics.book.studies import highdim as hd
from tokendynamics.kuramoto import order_parameter
from tokendynamics.sweeps import grid, sweep


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


@pytest.mark.claim("matrix-recipes")
@pytest.mark.parametrize("spectrum", ["positive", "mixed", "negative"])
def test_case1_symmetric_part_has_the_promised_spectrum_and_V_is_identity(spectrum):
    """Paper 2 (Li et al., 2026), the authors' app: Case 1 (V = I) has a symmetric part with the promised spectrum
    and a skew part.
    """
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


@pytest.mark.claim("matrix-recipes")
@pytest.mark.parametrize("top", [2.0, 0.3, 0.0, -0.5])
def test_case2_V_is_symmetric_with_the_chosen_top_eigenvalue(top):
    """Paper 2 (Li et al., 2026), the authors' app: Case 2 (A = I) has a symmetric V with the chosen top eigenvalue."""
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


@pytest.mark.claim("matrix-recipes")
@pytest.mark.parametrize("d", [6, 7])
def test_cases_3_and_4_have_the_spectrum_of_their_block(d):
    """Paper 2 (Li et al., 2026), the authors' app: Cases 3 and 4 are block-diagonal copies of their 2 x 2 block."""
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


@pytest.mark.claim("matrix-recipes")
def test_random_case_has_entries_of_variance_sigma_squared_over_d_and_seeds_reproduce():
    """Paper 2 (Li et al., 2026), the authors' app: the random case has entries of variance sigma^2/d."""
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
        hd.make_case("case9", 4)
    with pytest.raises(ValueError, match="sigma"):
        hd.random_case(4, sigma=0)


@pytest.mark.claim("case1-regimes", "case1-limit-and-bistability")
@pytest.mark.parametrize(
    "case, params, regime",
    [
        # the table of example regimes of chapter 4, one row each
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
def test_predict_2d_regime_reproduces_the_planar_regime_table(case, params, regime):
    """Paper 2 (Li et al., 2026): the planar criteria behind the high-dimensional predictions give the regimes of
    the table of example regimes, one row each, and of the conformal case.
    """
    assert hd.predict_2d_regime(case, **params).regime == regime


def test_predict_2d_regime_case1_partial_quotes_the_interior_level():
    p = hd.predict_2d_regime("case1", A=np.diag([-1.0, -2.0]))
    assert "0.333" in p.criterion and p.family == "Case 1 (V = I)" and p.chapter == "05_kuramoto_regimes"


INTERNAL_LABEL = re.compile(r"\u00a7|\bC\d+\b|\$|\\")  # section signs (U+00A7), claim labels, TeX


@pytest.mark.parametrize(
    "spec",
    [{"case": "case1", "spectrum": s} for s in ("positive", "mixed", "negative")]
    + [{"case": "case2", "top": 2.0}, {"case": "case3"}, {"case": "case4", "a": 0.5, "b": 1.0}, {"case": "random"}],
)
def test_recipe_labels_and_predictions_are_reader_facing_plain_text(spec):
    """What a reader sees (labels in figure titles and tables, the planar family of a prediction) names the case in
    words: "Case 2, λ₁ = 2", "Case 1 (V = I)" — no section signs, internal claim labels or TeX."""
    spec = dict(spec)
    mc = hd.make_case(spec.pop("case"), 10, **spec)
    pred = hd.predict_for_case(mc)
    for text in (mc.label, mc.description, pred.family):
        assert text and not INTERNAL_LABEL.search(text), text
    assert mc.label.startswith("Case") or mc.label.startswith("Random")
    assert pred.family in hd.FAMILIES.values()


@pytest.mark.claim("planar-regimes-persist-in-high-dimension")
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
def test_predict_2d_regime_identity_A_agrees_with_2d_particle_runs(c, a, b):
    """Paper 2 (Li et al., 2026): the planar prediction for A = I against 2D particle runs.

    Includes the derived branch (|a| >= |b|, c < 0): clusters iff c + sqrt(a^2 - b^2) >= 0.
    """
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


@pytest.mark.claim("planar-regimes-persist-in-high-dimension")
def test_predict_for_case_on_the_high_dimensional_recipes():
    """Paper 2 (Li et al., 2026): the planar classification applied to each high-dimensional recipe."""
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


def test_predict_2d_regime_rejects_missing_or_degenerate_parameters():
    with pytest.raises(ValueError, match="needs the 2 x 2"):
        hd.predict_2d_regime("case1")
    with pytest.raises(ValueError, match="2 x 2"):
        hd.predict_2d_regime("case1", A=np.eye(3))
    with pytest.raises(ValueError, match="V = 0"):
        hd.predict_2d_regime("case4", a=0.0, b=0.0)
    with pytest.raises(ValueError, match="unknown case"):
        hd.predict_2d_regime("case7")


@pytest.mark.claim(
    "linear-attention-clusters-antipodally-in-high-dimension",
    "softmax-variants-form-one-cluster-faster",
    "planar-regimes-persist-in-high-dimension",
)
@pytest.mark.slow
def test_run_variant_at_d100_linear_clusters_antipodally_and_usa_into_one_cluster():
    """Paper 2 (Li et al., 2026), the high-dimensional experiments: d = 100, n = 200, beta = 1. Linear attention, Case 2
    (lambda_1 = 2), clusters antipodally by t = 60; with V negative definite it stays spread; unnormalised
    softmax forms one cluster by t = 10 (particle system).
    """
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


@pytest.mark.claim("rotating-clusters-in-high-dimension")
def test_run_variant_case3_clusters_rotate_at_the_2d_rate_beta_b_in_d30():
    """Paper 2 (Li et al., 2026): in d = 2 the clusters of the conformal case turn at |theta_c'| = beta |b|; the
    block recipe keeps this rate in d = 30.
    """
    mc = hd.case3(30, 1.0, 0.5)
    s = hd.run_variant(
        mc, "linear", sample_sphere(60, 30, 0), 40.0, beta=1.5, engine="projective", n_eval=401, rtol=1e-9, atol=1e-11
    )
    assert s.regime() == "rotating_clusters"
    np.testing.assert_allclose(metrics.axis_speed(s.t[-100:], s.axis[-100:]), 1.5 * 0.5, rtol=1e-5)


@pytest.mark.claim("oscillation-is-damped-in-high-dimension")
def test_run_variant_case4_oscillation_is_damped_in_high_dimension():
    """Paper 2 (Li et al., 2026)'s summary says the oscillations persist in high dimension; in R2 the book finds
    them damped for uniform data. Case 4 with |a| < |b| oscillates in the plane (hidden Hamiltonian); its block
    recipe in d = 30 (rotated by a random orthogonal matrix) keeps R2 near 1/d while the range of R2 shrinks
    along the run (measured at d = 100 in chapter 6, with the reason: the rotation planes drift out of step).
    """
    mc = hd.case4(30, 0.5, 1.0, seed=42)
    assert hd.predict_for_case(mc).regime == "oscillation"
    r = hd.run_variant(mc, "linear", sample_sphere(100, 30, 0), 400.0, n_eval=201, engine="projective")
    early = (r.t > 0.05 * r.T) & (r.t < 0.3 * r.T)
    late = r.t > 0.75 * r.T
    assert np.ptp(r.R2[late]) < 0.6 * np.ptp(r.R2[early]), (np.ptp(r.R2[early]), np.ptp(r.R2[late]))
    assert r.R2.max() < 0.1  # no clustering


def test_swing_half_time_of_a_damped_cosine():
    t = np.linspace(0.0, 100.0, 2001)
    y = np.exp(-t / 20.0) * np.cos(t)  # the range over a window of ~ one period halves after about 20 ln 2
    assert hd.swing_half_time(t, y, 2 * np.pi) == pytest.approx(2 * np.pi * np.ceil(20 * np.log(2) / (2 * np.pi)))
    assert hd.swing_half_time(t, np.cos(t), 2 * np.pi) == math.inf


@pytest.mark.claim("oscillation-damping-time-against-n")
def test_desync_times_of_linear_attention_grow_weakly_with_n():
    """Paper 2 (Li et al., 2026), Case 4 (a = 0.5, b = 1) with uniform data, as in chapter 6's fast setting (d = 20,
    T = 120, windows of 20, five seeds): the median time at which the swing of R2 has halved is 40 at n = 50 and 60
    at n = 400 (linear attention): more tokens delay the drift out of step, weakly (exponent 0.2 over this range).
    """
    th = hd.desync_times("linear", (50, 400), range(5), d=20, T=120.0, window=20.0, n_eval=481)
    med = np.median(th, axis=1)
    np.testing.assert_array_equal(med, [40.0, 60.0])
    assert 0.1 < np.log(med[1] / med[0]) / np.log(8) < 0.5


def test_near_plane_tokens_lie_close_to_the_first_plane_and_case4_dominant_scales_the_first_block():
    X = hd.near_plane_tokens(500, 12, 0.05, rng=0)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, atol=1e-14)
    off = np.sum(X[:, 2:] ** 2, axis=1).mean()
    assert off == pytest.approx(10 * 0.05**2, rel=0.2)
    assert np.allclose(hd.near_plane_tokens(5, 12, 0.0, rng=1)[:, 2:], 0.0)
    plain, dom = hd.case4(6, 0.5, 1.0), hd.case4(6, 0.5, 1.0, dominant=5.0)
    np.testing.assert_allclose(dom.V[:2, :2], 5 * plain.V[:2, :2])
    np.testing.assert_allclose(dom.V[2:, 2:], plain.V[2:, 2:])
    assert "first plane ×5" in dom.label and "×" not in plain.label
    r = hd.run_variant(plain, "linear", sample_sphere(20, 6, 0), 2.0, n_eval=5)
    assert r.means.shape == (5, 6) and r.planes.shape == (5, 3)
    np.testing.assert_allclose(r.means[0], r.X0.mean(axis=0))


def _window_ratio(t, y, T):
    """Range of y over the last quarter of [0, T] over its range in [0.05 T, 0.3 T]."""
    early = (t > 0.05 * T) & (t < 0.3 * T)
    late = t > 0.75 * T
    return np.ptp(y[late], axis=0) / np.ptp(y[early], axis=0)


@pytest.mark.claim("plane-diagnostic-separates-rotation-clustering-and-oscillation")
def test_plane_motion_separates_rigid_rotation_clustering_and_oscillation():
    """Paper 2 (Li et al., 2026), Cases 3 and 4 in d = 30 (n = 100, T = 300, linear attention). The range ratio of the
    coordinate means cannot tell rotation from oscillation: Case 3 with a = -0.5 (planar: R2 -> 0, rigid rotation)
    keeps its means' range (ratio above 0.7). The per-plane diagnostic names each control: rigid rotation, static
    clusters (Case 4, a = 1, b = 0.5), rotating clusters (Case 3, a = 1) and oscillation (Case 4, a = 0.5, b = 1).
    """
    X0 = sample_sphere(100, 30, 0)
    controls = {
        "rotation": hd.case3(30, -0.5, 0.5),
        "static_clusters": hd.case4(30, 1.0, 0.5),
        "rotating_clusters": hd.case3(30, 1.0, 0.5),
        "oscillation": hd.case4(30, 0.5, 1.0),
    }
    for expected, mc in controls.items():
        r = hd.run_variant(mc, "linear", X0, 300.0, n_eval=301)
        assert hd.plane_motion(r) == expected, (mc.label, hd.plane_motion(r))
        if expected == "rotation":
            assert float(np.mean(_window_ratio(r.t, r.means, 300.0))) > 0.7  # the means' ratio passes a rotation


@pytest.mark.claim("oscillations-persist-in-the-coordinate-means", "coordinate-means-keep-oscillating")
def test_case4_oscillation_persists_in_the_coordinate_means_for_linear_and_softmax_attention():
    """Paper 2 (Li et al., 2026)'s summary: in high dimension the oscillations of Case 4 (|a| < |b|) persist, for
    linear and for softmax attention. In the plane means mu_p (the coordinate means, plane by plane of V) they do:
    :func:`plane_motion` finds the modulus still swinging over the second half of the run, not a rigid rotation,
    for linear and unnormalised softmax attention (d = 30, n = 100), while the range of R2 shrinks.
    """
    mc = hd.case4(30, 0.5, 1.0)
    X0 = sample_sphere(100, 30, 0)
    for kind, T in (("linear", 300.0), ("unnormalized_softmax", 100.0)):
        r = hd.run_variant(mc, kind, X0, T, n_eval=301)
        assert hd.plane_motion(r) == "oscillation", kind
        assert r.R2.max() < 0.2  # no clustering
    la = hd.run_variant(mc, "linear", X0, 300.0, n_eval=301)
    assert _window_ratio(la.t, la.R2, 300.0) < 0.6


@pytest.mark.claim("planar-regimes-persist-in-high-dimension")
def test_planar_prediction_agrees_with_linear_attention_in_every_predicted_chapter_case():
    """Paper 2 (Li et al., 2026): the chapter's agreement table. For each recipe of the chapter that has a planar
    prediction (all but the random one), linear attention from n = 100 uniform tokens in d = 30 (T = 300, projective
    flow) shows the predicted regime (:func:`observed_regime`).
    """
    from tokendynamics.book.experiments import settings

    p = settings("highdim_cases", "fast")
    X0 = sample_sphere(100, 30, 0)
    n_pred = 0
    for spec in p["cases"]:
        spec = dict(spec)
        mc = hd.make_case(spec.pop("case"), 30, p["matrix_seed"], **spec)
        pred = hd.predict_for_case(mc).regime
        if pred in ("undetermined", "bistable"):
            continue
        r = hd.run_variant(mc, "linear", X0, 300.0, n_eval=301, engine="projective")
        assert hd.agreement(pred, r.regime()) == "agrees", (mc.label, pred, r.regime())
        n_pred += 1
    assert n_pred == 8


@pytest.mark.claim("oscillation-persists-near-one-plane", "oscillation-is-damped-in-high-dimension")
def test_case4_r2_oscillation_persists_with_data_near_a_plane_and_in_a_dominant_plane():
    """Paper 2 (Li et al., 2026): the planar oscillation of Case 4 (|a| < |b|). In d = 30 (n = 100, T = 300) it
    survives in R2 when the data lie near one rotation plane (late range at least 0.7 times the early range), and
    in the order parameter of the plane whose block dominates V (first block times 5; late range at least 0.7
    times the early one), while generic uniform data damp both (late range of R2 below 0.6 times the early one).
    """
    d, n, T = 30, 100, 300.0
    X0 = sample_sphere(n, d, 0)
    near = hd.run_variant(hd.case4(d, 0.5, 1.0), "linear", hd.near_plane_tokens(n, d, 0.05, rng=1), T, n_eval=601)
    assert _window_ratio(near.t, near.R2, T) > 0.7
    dom = hd.run_variant(hd.case4(d, 0.5, 1.0, dominant=5.0), "linear", X0, T, n_eval=601)
    assert _window_ratio(dom.t, np.abs(dom.planes[:, 0]), T) > 0.7
    generic = hd.run_variant(hd.case4(d, 0.5, 1.0), "linear", X0, T, n_eval=601)
    assert _window_ratio(generic.t, generic.R2, T) < 0.6


def test_run_variant_reports_a_clear_error_for_unknown_variants_or_engines():
    mc = hd.case2(4)
    X0 = sample_sphere(5, 4, 0)
    with pytest.raises(ValueError, match="kind must be"):
        hd.run_variant(mc, "l2", X0, 1.0)
    with pytest.raises(ValueError, match="projective reduction .it holds for linear attention"):
        hd.run_variant(mc, "softmax", X0, 1.0, engine="projective")


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


@pytest.mark.claim("beta-only-rescales-time")
def test_sweep_returns_results_in_grid_order_serially_and_in_parallel():
    """Sweeps keep the grid order serially and in parallel; and, Paper 2 (Li et al., 2026): beta only rescales time for
    linear attention, t(beta = 2) = t(beta = 1) / 2.
    """
    points = grid(beta=[1.0, 2.0], d=[6, 8])
    assert points[1] == {"beta": 1.0, "d": 8}
    kw = dict(case="case2", kind="linear", n=30, T=40.0, top=2.0)
    serial = sweep(hd.clustering_time, points, n_jobs=1, progress=False, **kw)
    parallel = sweep(hd.clustering_time, points, n_jobs=2, progress=False, **kw)
    assert [r["t_level"] for r in serial] == [r["t_level"] for r in parallel]
    assert [(r["beta"], r["d"]) for r in serial] == [(p["beta"], p["d"]) for p in points]
    # beta only rescales time for linear attention: t(beta = 2) = t(beta = 1) / 2
    for r1, r2 in zip(serial[:2], serial[2:]):
        assert abs(r2["t_level"] - r1["t_level"] / 2) < 1e-4 * r1["t_level"]
    with pytest.raises(ValueError, match="both in the grid"):
        sweep(hd.clustering_time, points, progress=False, beta=1.0)


def test_clustering_time_through_particles_and_projective_flow_agree_and_stop_at_the_level():
    """The particle path (an event on the tokens) and the d x d reduction locate the same clustering time."""
    kw = dict(case="case2", kind="linear", d=8, n=40, T=60.0, top=2.0, seed=1)
    proj = hd.clustering_time(engine="projective", **kw)
    part = hd.clustering_time(engine="particles", **kw)
    assert abs(proj["t_level"] - part["t_level"]) < 1e-4 * proj["t_level"]
    assert proj["R2_final"] == pytest.approx(0.99, abs=1e-6) and part["R2_final"] == pytest.approx(0.99, abs=1e-6)
    usa = hd.clustering_time(case="case2", kind="unnormalized_softmax", d=8, n=40, T=30.0, top=2.0)
    assert usa["engine"] == "particles" and np.isfinite(usa["t_level"])
    assert hd.clustering_time(case="case2", kind="linear", d=50, n=20, T=5.0)["engine"] == "particles"  # d > n


def test_run_many_gives_the_same_runs_serially_and_in_parallel():
    X0 = sample_sphere(20, 6, 0)
    jobs = {("c2", k): (hd.case2(6, 2.0), k, 5.0) for k in ("linear", "unnormalized_softmax")}
    serial = hd.run_many(jobs, X0, n_jobs=1, n_eval=11)
    parallel = hd.run_many(jobs, X0, n_jobs=2, n_eval=11)
    assert list(serial) == list(jobs)
    for k in jobs:
        np.testing.assert_array_equal(serial[k].R2, parallel[k].R2)


U = sample_sphere(6, 4, 0)
T_GRID = np.linspace(0.0, 1.0, 11)


@pytest.mark.parametrize(
    "exc, call, words",
    [
        (ValueError, lambda: hd.case1(1), "d"),
        (ValueError, lambda: hd.case1(4, seed=-1), "seed"),
        (ValueError, lambda: hd.case2(4, spread=-1.0), "spread"),
        (ValueError, lambda: hd.predict_2d_regime("case7"), "case"),
        (ValueError, lambda: hd.predict_2d_regime("case1", A=np.eye(3)), "A"),
        (ValueError, lambda: hd.run_variant(hd.case2(4), "sigmoid", U, 1.0), "kind"),
        (ValueError, lambda: hd.run_variant(hd.case2(4), "linear", U, 1.0, engine="x"), "engine"),
        (TypeError, lambda: hd.run_variant("mc", "linear", U, 1.0), "mc"),
        (ValueError, lambda: hd.observed_regime(T_GRID, T_GRID[:3], np.ones((11, 2))), "t, R2 and axis"),
        (ValueError, lambda: hd.agreement("foo", "static_clusters"), "predicted"),
        (TypeError, lambda: hd.summarize("traj"), "traj"),
        (ValueError, lambda: hd.clustering_time(kind="x"), "kind"),
        (ValueError, lambda: hd.case_parameters("case9"), "case"),
        (ValueError, lambda: hd.make_case("case9", 4), "case"),
    ],
)
def test_studies_refuse_bad_input_with_an_error_naming_the_argument(exc, call, words):
    with pytest.raises(exc, match=words):
        call()
