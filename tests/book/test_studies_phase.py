"""Tests of ``tokendynamics.book.studies.phase``: the bootstrap and inversion bands of a crossing, and the planar
check of linear attention against paper 2's closed forms."""

from __future__ import annotations

import numpy as np

from tokendynamics.book.studies.phase import bootstrap_crossing, inversion_band, planar_linear_check


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
