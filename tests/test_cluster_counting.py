"""Counting clusters on the sphere, on configurations whose answer is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.sparse.csgraph import connected_components

from tokendynamics.ensembles import sample_clouds
from tokendynamics.metrics import (
    cluster_outcomes,
    count_clusters,
    is_single_cluster,
    ward_clusters,
)

THR = 0.999


def _cluster(centre, m, spread, rng):
    c = np.asarray(centre, float) / np.linalg.norm(centre)
    Y = c + spread * rng.standard_normal((m, len(c)))
    return Y / np.linalg.norm(Y, axis=1, keepdims=True)


def _scipy_components(X, thr):
    """The reference count: scipy's connected components of each cloud's link graph, one cloud at a time."""
    flat = X.reshape(-1, *X.shape[-2:])
    Xn = flat / np.linalg.norm(flat, axis=-1, keepdims=True)
    counts = [connected_components(Y @ Y.T > thr, directed=False)[0] for Y in Xn]
    return np.array(counts).reshape(X.shape[:-2])


def is_two_antipodal_clusters(X, threshold=THR):
    return bool(cluster_outcomes(X, threshold)["antipodal"])


def _all_counts(X):
    comp = count_clusters(X, THR)
    assert comp == _scipy_components(X, THR)  # propagation == scipy's connected components
    return comp, count_clusters(X, THR, method="rank"), ward_clusters(X, THR)


def test_one_tight_cluster():
    X = _cluster([1, 2, 3], 20, 1e-3, np.random.default_rng(0))
    assert _all_counts(X) == (1, 1, 1)
    assert is_single_cluster(X) and not is_two_antipodal_clusters(X)


def test_two_well_separated_clusters():
    rng = np.random.default_rng(1)
    X = np.concatenate([_cluster([1, 0, 0], 16, 1e-3, rng), _cluster([0, 1, 0], 16, 1e-3, rng)])
    assert _all_counts(X) == (2, 2, 2)
    assert not is_single_cluster(X) and not is_two_antipodal_clusters(X)


def test_two_antipodal_clusters_and_two_antipodal_pairs():
    rng = np.random.default_rng(2)
    X = np.concatenate([_cluster([1, 1, 0], 10, 1e-3, rng), _cluster([-1, -1, 0], 22, 1e-3, rng)])
    assert _all_counts(X) == (2, 2, 2)
    assert is_two_antipodal_clusters(X) and not is_single_cluster(X)
    # two antipodal pairs along two axes: four clusters, not "two antipodal clusters"
    Y = np.concatenate([_cluster(c, 8, 1e-3, rng) for c in ([1, 0, 0], [-1, 0, 0], [0, 0, 1], [0, 0, -1])])
    assert _all_counts(Y) == (4, 4, 4)
    assert not is_two_antipodal_clusters(Y)


def test_a_uniform_spread_has_no_clusters():
    X = sample_clouds(1, 32, 3, 3)[0]
    G = X @ X.T
    assert np.max(G[np.triu_indices(32, 1)]) < THR  # no pair within the link angle (2.56 degrees)
    assert _all_counts(X) == (32, 32, 32)
    assert not is_single_cluster(X) and not is_two_antipodal_clusters(X)


def test_ties_at_the_threshold_are_not_links():
    x = np.array([1.0, 0.0, 0.0])
    y = np.array([THR, math.sqrt(1 - THR**2), 0.0])  # <x, y> = THR exactly in floating point
    assert float(x @ y) == THR
    X = np.stack([x, y])
    assert count_clusters(X, THR) == 2 and count_clusters(X, THR, method="rank") == 2
    assert not is_single_cluster(X, THR)
    closer = np.array([np.nextafter(THR, 1.0), math.sqrt(1 - np.nextafter(THR, 1.0) ** 2), 0.0])
    Y = np.stack([x, closer])
    assert float(x @ closer) > THR
    assert count_clusters(Y, THR) == 1 and is_single_cluster(Y, THR)
    assert count_clusters(np.stack([x, -y]), THR) == 2  # the antipodal tie is not a pair either
    assert not is_two_antipodal_clusters(np.stack([x, -y]), THR)


def test_a_chain_is_one_component_but_not_a_clique():
    # tokens along an arc, consecutive ones linked, the ends far apart: components chain them,
    # the rank and Ward do not
    step = 0.8 * math.acos(THR)
    theta = step * np.arange(12)
    X = np.stack([np.cos(theta), np.sin(theta), np.zeros_like(theta)], axis=1)
    comp, rank, ward = _all_counts(X)
    assert comp == 1 and rank > 1 and ward > 1
    assert not is_single_cluster(X)


def test_counts_are_batched_over_leading_axes():
    rng = np.random.default_rng(4)
    clouds = [
        _cluster([1, 0, 0], 12, 1e-4, rng),
        np.concatenate([_cluster([1, 0, 0], 6, 1e-4, rng), _cluster([-1, 0, 0], 6, 1e-4, rng)]),
        sample_clouds(1, 12, 3, 5)[0],
        np.concatenate([_cluster(c, 4, 1e-4, rng) for c in ([1, 0, 0], [0, 1, 0], [0, 0, 1])]),
    ]
    X = np.stack(clouds).reshape(2, 2, 12, 3)
    expected = np.array([1, 2, 12, 3]).reshape(2, 2)
    np.testing.assert_array_equal(count_clusters(X), expected)
    np.testing.assert_array_equal(count_clusters(X, method="rank"), expected)
    np.testing.assert_array_equal(ward_clusters(X), expected)
    np.testing.assert_array_equal(is_single_cluster(X), expected == 1)
    for k, Y in enumerate(clouds):
        assert count_clusters(Y) == expected.flat[k]
    out = cluster_outcomes(X)
    np.testing.assert_array_equal(out["clusters"], expected)
    np.testing.assert_array_equal(out["single"], expected == 1)
    np.testing.assert_array_equal(out["antipodal"], [[False, True], [False, False]])


def test_label_propagation_equals_scipy_connected_components_on_random_graphs():
    X = sample_clouds(300, 16, 3, 7)
    for thr in (0.3, 0.7, 0.9, 0.97):  # from one giant component to many small ones, with chains
        np.testing.assert_array_equal(count_clusters(X, thr), _scipy_components(X, thr))


def test_bad_arguments():
    X = sample_clouds(1, 5, 3, 0)[0]
    with pytest.raises(ValueError, match="threshold"):
        count_clusters(X, 1.0)
    with pytest.raises(ValueError, match="method"):
        count_clusters(X, method="kmeans")
    with pytest.raises(ValueError, match="non-finite"):
        count_clusters(np.full((3, 2), np.nan))
