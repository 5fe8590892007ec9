"""Tests of ``tokendynamics.book.studies.phase``: the bootstrap and inversion bands of a crossing, the planar
check of linear attention against paper 2's closed forms, and the grid of Geshkovski, Letrouit, Polyanskiy and
Rigollet (arXiv:2312.10794) over beta and time."""

from __future__ import annotations

import numpy as np
import pytest

from tokendynamics.book import phase_figures as pf
from tokendynamics.book.cache import describe
from tokendynamics.book.studies.phase import bootstrap_crossing, glpr_grid, inversion_band, planar_linear_check
from tokendynamics.ensembles import recipe_stack, sample_clouds, simulate_batch
from tokendynamics.metrics import is_single_cluster, pair_overlaps


def test_bootstrap_and_inversion_bands_bracket_the_true_crossing():
    x = np.geomspace(0.5, 8, 9)
    p_true = 1 / (1 + (x / 2.0) ** 3)  # crosses 1/2 at x = 2
    rng = np.random.default_rng(1)
    Y = rng.random((x.size, 400)) < p_true[:, None]
    est, lo, hi, found = bootstrap_crossing(x, Y, reps=500, rng=2)
    assert lo <= est <= hi and found == 1.0
    assert lo < 2.0 < hi and hi - lo < 0.6
    a, b = inversion_band(x, Y.sum(1), Y.shape[1])
    assert a < 2.0 < b
    # paired bootstrap: with outcomes that are deterministic in x, every replicate gives the same crossing
    Z = np.repeat((x < 2.5)[:, None], 50, axis=1)
    est, lo, hi, _ = bootstrap_crossing(x, Z, reps=50, rng=3)
    assert lo == hi == est


def test_planar_check_predicts_partial_clustering_for_repulsive_values():
    r = planar_linear_check("minus_identity", n=8, clouds=5, depths=[20.0])
    assert set(r["predicted"]) == {"partial"} and not r["antipodal"].any()
    r = planar_linear_check("identity", n=8, clouds=5, depths=[40.0])
    assert set(r["predicted"]) == {"static_clusters"} and r["antipodal"].all()


def test_glpr_grid_small_beta_collapses_large_beta_does_not_and_the_counts_never_drop():
    """At the protocol's parameters (softmax, Q = K = V = I, n = 32 on the circle, Euler step 0.1 with
    renormalisation, T = 30; Geshkovski et al., arXiv:2312.10794) a small beta has collapsed every cloud to one
    cluster by t = 30 and beta = 9 almost none (measured on 128 clouds: 1.0 at beta <= 1.3, 0 from beta = 5.4 on;
    the bounds leave room for 24 clouds). The same clouds are followed in time and a cluster of tokens within
    2.6 degrees only contracts under this attractive flow, so at every beta the count of one-cluster clouds never
    decreases (exactly), and at t = 0 none is one cluster."""
    G = glpr_grid([0.5, 9.0], clouds=24)
    P = G["single"] / G["clouds"]
    assert G["times"][0] == 0.0 and G["times"][-1] == pytest.approx(30.0) and len(G["times"]) == 31
    assert P[-1, 0] >= 0.9 and P[-1, 1] <= 0.1
    assert np.all(np.diff(G["single"], axis=0) >= 0) and not G["single"][0].any()
    assert int(G["blowup"]) == 0
    # a cloud that is one cluster links all its pairs: the fraction of linked pairs is at least P
    assert np.all(G["pairs"] >= P - 1e-12) and np.all((G["pairs"] >= 0) & (G["pairs"] <= 1))


def test_glpr_grid_statistics_are_those_of_the_library_metrics_on_the_same_run():
    """The counts are :func:`metrics.is_single_cluster` of the frames of one ``simulate_batch`` run (Euler on the
    sphere) and the pair fractions the mean over clouds of the fraction of ``pair_overlaps`` above the threshold;
    the chunks of beta (here one beta per call) change nothing."""
    betas, clouds, n = np.array([0.3, 1.0, 4.0]), 6, 12
    G = glpr_grid(betas, T=6.0, n=n, clouds=clouds, seed=3, save_every=15)
    run = simulate_batch(
        np.tile(sample_clouds(clouds, n, 2, 3), (3, 1, 1)),
        recipe_stack("softmax", "identity", 2, np.repeat(betas, clouds)),
        6.0,
        dt=0.1,
        method="euler",
        sphere=True,
        save_every=15,
    )
    X = run.X.reshape(len(run.t), 3, clouds, n, 2)
    np.testing.assert_array_equal(G["times"], run.t)
    np.testing.assert_array_equal(G["single"], is_single_cluster(X).sum(axis=-1))
    linked = np.array([[[np.mean(pair_overlaps(c) > 0.999) for c in Xb] for Xb in Xt] for Xt in X])
    np.testing.assert_allclose(G["pairs"], linked.mean(axis=-1), rtol=0, atol=1e-12)
    assert G["single"][-1].sum() > 0 and G["single"][-1].sum() < 3 * clouds  # both outcomes occur
    import tokendynamics.book.studies.phase as study

    old = study.GLPR_CHUNK
    try:
        study.GLPR_CHUNK = clouds  # one beta per call
        chunked = glpr_grid(betas, T=6.0, n=n, clouds=clouds, seed=3, save_every=15)
    finally:
        study.GLPR_CHUNK = old
    for key in ("single", "pairs"):
        np.testing.assert_array_equal(chunked[key], G[key])


def test_glpr_grid_refuses_bad_betas_and_counts():
    """Bad input names its argument."""
    with pytest.raises(ValueError, match="betas"):
        glpr_grid([0.0, 1.0], clouds=2)
    with pytest.raises(ValueError, match="clouds"):
        glpr_grid([1.0], clouds=0)
    with pytest.raises(ValueError, match="dt"):
        glpr_grid([1.0], clouds=2, dt=-0.1)


def test_cached_glpr_grid_carries_its_parameters_and_is_reloaded(tmp_path, monkeypatch):
    """The chapter's cached grid is stored with the parameters that made it (``describe``), and a second call
    with the same parameters loads it instead of recomputing."""
    monkeypatch.setenv("TOKENDYNAMICS_DATA", str(tmp_path))
    params = dict(betas=np.array([0.5, 2.0]), T=3.0, dt=0.1, n=8, d=2, clouds=4, seed=0, save_every=10)
    G = pf.cached_task("glpr", "glpr", **params)
    meta = describe("phase_glpr_c4")["params"]
    assert meta["task"] == "glpr" and meta["clouds"] == 4 and meta["T"] == 3.0
    np.testing.assert_array_equal(np.asarray(meta["betas"]), params["betas"])
    again = pf.cached_task("glpr", "glpr", **params)
    assert float(again["seconds"]) == float(G["seconds"])  # the stored run, not a new one
    np.testing.assert_array_equal(again["single"], G["single"])
