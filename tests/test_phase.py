"""Phase-diagram statistics: Wilson intervals, crossings, ensemble runs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokendynamics.phase import cluster_statistics, crossing, wilson_interval


def test_wilson_interval_known_values():
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(1.959964**2 / (10 + 1.959964**2), rel=1e-6)  # 0.2775
    lo, hi = wilson_interval(5, 10)
    assert (lo, hi) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    lo, hi = wilson_interval(10, 10)
    assert hi == pytest.approx(1.0, abs=1e-15) and lo == pytest.approx(1 - 0.2775, abs=1e-4)
    lo, hi = wilson_interval(np.array([0, 5, 10]), np.array([10, 10, 10]))
    assert lo.shape == (3,) and np.all(lo <= hi)
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


def test_wilson_interval_covers_the_true_probability_about_95_percent_of_the_time():
    rng = np.random.default_rng(0)
    for p_true, n in ((0.3, 50), (0.05, 100)):
        k = rng.binomial(n, p_true, size=4000)
        lo, hi = wilson_interval(k, np.full(k.shape, n))
        coverage = np.mean((lo <= p_true) & (p_true <= hi))
        assert 0.92 < coverage < 0.985, (p_true, n, coverage)


def test_crossing_interpolates_in_log_x_and_reports_nan_without_a_crossing():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    assert crossing(x, [1, 0.8, 0.3, 0]) == pytest.approx(2 ** (1 + 0.3 / 0.5))
    assert crossing(x, [1, 0.8, 0.3, 0], log=False) == pytest.approx(2 + 2 * 0.3 / 0.5)
    assert crossing(x, [1, 0.5, 0.3, 0]) == 2.0  # a grid point at the level
    assert crossing(x, [0.0, 0.2, 0.6, 1.0]) == pytest.approx(2 ** (1 + 0.3 / 0.4))  # upwards too
    assert math.isnan(crossing(x, [0.6, 0.7, 0.8, 0.9]))
    many = crossing(x, np.array([[1, 0.8, 0.3, 0], [0.6, 0.7, 0.8, 0.9]]))
    assert many[0] == pytest.approx(2**1.6) and math.isnan(many[1])


def test_cluster_statistics_shapes_common_clouds_and_easy_outcomes():
    r = cluster_statistics("softmax", "identity", [0.25, 64.0], [0.5, 24.0], n=8, d=3, clouds=6, dt=0.5)
    assert r["single"].shape == (2, 2, 6) and r["clusters"].shape == (2, 2, 6)
    np.testing.assert_allclose(r["depths"], [0.5, 24.0])
    assert r["single"][-1, 0].all()  # small beta: one cluster by depth 24
    assert not r["single"][0].any()  # nobody is one cluster at depth 0.5
    assert not r["antipodal"].any() and not r["blowup"].any()
    rep = cluster_statistics("linear", "identity", [1.0], [24.0], n=8, d=3, clouds=6, dt=0.5)
    assert rep["antipodal"].all() and not rep["single"].any()  # linear attention: antipodal pairs
    res = cluster_statistics("softmax", "gaussian", [1.0], [4.0], n=8, d=3, clouds=3, dt=0.5, resample_every=1.0)
    assert res["single"].shape == (1, 1, 3)
