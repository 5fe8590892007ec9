"""Tests of ``tokendynamics.metrics``: order parameters, cluster detection and passage times."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokendynamics import metrics, sample_sphere


def _noisy(centres, sizes, noise, rng):
    X = np.concatenate([c + noise * rng.standard_normal((s, c.size)) for c, s in zip(centres, sizes)])
    return X / np.linalg.norm(X, axis=1, keepdims=True)


@pytest.mark.claim("order-parameters-through-sigma")
@pytest.mark.parametrize("n, d", [(50, 7), (6, 40)])
def test_order_parameters_through_sigma_equal_the_pairwise_means(n, d):
    """Paper 2 (Li et al., 2026): the pair means R1 = mean_{i<j} <x_i, x_j> and R2 = mean_{i<j} <x_i, x_j>^2
    through Sigma: (n |x_bar|^2 - 1)/(n - 1) and (n tr Sigma^2 - 1)/(n - 1) for unit tokens.
    """
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


@pytest.mark.claim("order-parameters-through-sigma")
def test_order_parameters_of_uniform_tokens_are_about_zero_and_one_over_d():
    """Paper 2 (Li et al., 2026): uniform tokens give R2 about 1/d and R1 about 0."""
    d, n = 20, 3000
    R1, R2 = metrics.order_parameters(sample_sphere(n, d, 0))
    # E<x,y>^2 = 1/d; the pair mean has standard deviation about sqrt(2 (d-1)/(d^2 (d+2)) * 2/n)
    assert abs(R2 - 1 / d) < 0.05 / d
    assert abs(R1) < 5 / math.sqrt(n * d) / math.sqrt(n)


@pytest.mark.claim("order-parameters-through-sigma")
def test_order_parameters_of_antipodal_clusters_are_minus_one_over_n_minus_one_and_one():
    """Paper 2 (Li et al., 2026): two antipodal clusters give R2 = 1 and R1 = -1/(n - 1)."""
    u = sample_sphere(1, 30, 1)[0]
    n = 40
    X = np.array([u] * (n // 2) + [-u] * (n // 2))
    R1, R2 = metrics.order_parameters(X)
    assert abs(R2 - 1) < 1e-14 and abs(R1 + 1 / (n - 1)) < 1e-14
    lam, axis = metrics.top_direction(X)
    assert abs(lam - 1) < 1e-14 and abs(abs(axis @ u) - 1) < 1e-12


@pytest.mark.claim("order-parameters-through-sigma")
def test_order_parameters_of_one_cluster_are_both_one():
    """Paper 2 (Li et al., 2026): one cluster gives R1 = R2 = 1."""
    X = np.tile(sample_sphere(1, 12, 2), (25, 1))
    R1, R2 = metrics.order_parameters(X)
    assert abs(R1 - 1) < 1e-14 and abs(R2 - 1) < 1e-14


def test_detect_clusters_finds_two_antipodal_clusters_one_cluster_or_none():
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


def test_axis_speed_of_a_line_turning_at_a_known_rate_ignores_the_sign_of_the_axis():
    t = np.linspace(0, 4, 81)
    u = np.stack([np.cos(0.7 * t), np.sin(0.7 * t), np.zeros_like(t)], axis=1)
    u[::3] *= -1  # an eigenvector's sign is arbitrary
    np.testing.assert_allclose(metrics.axis_speed(t, u), 0.7, rtol=1e-10)
    with pytest.raises(ValueError, match="increasing"):
        metrics.axis_speed(t[::-1], u)


# ---------------------------------------------------------------------------------------------
# oscillations in high dimension
# ---------------------------------------------------------------------------------------------


def test_coordinate_means_are_the_token_average_per_coordinate():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((3, 20, 5))
    np.testing.assert_allclose(metrics.coordinate_means(X), X.mean(axis=1))
    assert metrics.coordinate_means(X[0]).shape == (5,)


def test_plane_order_parameters_are_the_planar_r2_for_tokens_in_the_plane_and_the_block_anisotropy():
    from tokendynamics.kuramoto import order_parameter

    rng = np.random.default_rng(5)
    theta = rng.uniform(0, 2 * np.pi, 40)
    X = np.zeros((40, 4))
    X[:, 2], X[:, 3] = np.cos(theta), np.sin(theta)
    z = metrics.plane_order_parameters(X, [(2, 3)])
    assert z[0] == pytest.approx(order_parameter(theta, 2), abs=1e-14)
    Y = sample_sphere(300, 6, 1)
    zs = metrics.plane_order_parameters(Y)  # default planes (0, 1), (2, 3), (4, 5)
    assert zs.shape == (3,)
    S = Y[:, :2].T @ Y[:, :2]
    lam = np.linalg.eigvalsh(S)
    assert abs(zs[0]) == pytest.approx((lam[1] - lam[0]) / (lam[1] + lam[0]), abs=1e-12)
    with pytest.raises(ValueError, match="pairs of coordinates"):
        metrics.plane_order_parameters(Y, [(0, 6)])


def test_window_ranges_shrink_for_a_damped_oscillation_and_not_for_a_persistent_one():
    t = np.linspace(0, 100, 2001)
    y = np.c_[np.exp(-t / 20) * np.sin(t), np.sin(t)]
    starts, ranges = metrics.window_ranges(t, y, 25.0)
    assert starts.tolist() == [0.0, 25.0, 50.0, 75.0]
    assert ranges[-1, 0] < 0.05 * ranges[0, 0] and ranges[-1, 1] == pytest.approx(ranges[0, 1], rel=1e-3)
    with pytest.raises(ValueError, match="window"):
        metrics.window_ranges(t, y, 0.0)
