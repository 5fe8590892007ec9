"""Tests of ``tokendynamics.book.transformer_figures``: the studies of chapter 08 on small settings."""

from __future__ import annotations

import numpy as np
import pytest

from tokendynamics import metrics
from tokendynamics.book import transformer_figures as tf
from tokendynamics.book.experiments import settings
from tokendynamics.transformer import MLP, forward


def test_centred_tokens_are_unit_rows_of_the_hyperplane_where_layer_norm_only_scales():
    U = tf.centred_sphere(10, 5, 0)
    np.testing.assert_allclose(np.linalg.norm(U, axis=1), 1, atol=1e-14)
    np.testing.assert_allclose(U.sum(axis=1), 0, atol=1e-14)
    X = tf.antithetic_gaussian(8, 3, 1)
    np.testing.assert_allclose(X.mean(axis=0), 0, atol=1e-15)


def test_network_runs_layer_norm_modes_on_scaled_tokens_with_scaled_scores():
    U0 = tf.centred_sphere(8, 4, 2)
    layer = tf.identity_layer(4, 2.0)
    mlp = MLP(8, 1.0)
    Y = tf.network(U0, layer, 3.0, 6, "pre", mlp, 5)
    ref = forward(2.0 * U0, layer.with_(A=np.eye(4) / 4), 3.0, 6, norm="pre", mlp=mlp, rng=5)
    np.testing.assert_allclose(Y, ref / np.linalg.norm(ref, axis=-1, keepdims=True), atol=1e-14)
    fresh = tf.gaussian_layers(4, 1.0, 6, 0)
    Y = tf.network(U0, fresh, 3.0, 6, "post")
    ref = forward(2.0 * U0, [lay.with_(A=lay.A / 4) for lay in fresh], 3.0, 6, norm="post")
    np.testing.assert_allclose(Y, ref / np.linalg.norm(ref, axis=-1, keepdims=True), atol=1e-14)
    np.testing.assert_array_equal(tf.network(U0, layer, 3.0, 6, "none"), tf.network(U0, layer, 3.0, 6, "none"))


def test_clustering_layers_are_minus_random_projections_with_mean_minus_r_over_d():
    layers = tf.clustering_layers(6, 2, 1.0, 400, 0)
    A = np.array([lay.A[0] for lay in layers])
    np.testing.assert_allclose(A[0] @ A[0], -A[0], atol=1e-12)  # -P with P a projection
    assert np.linalg.matrix_rank(A[0]) == 2
    np.testing.assert_allclose(A.mean(axis=0), -(2 / 6) * np.eye(6), atol=0.03)  # 400 draws


def test_slope_and_first_single():
    x = np.array([1.0, 2.0, 4.0])
    assert tf.slope(x, 3 / x) == pytest.approx(-1.0)
    X = np.array([[[1.0, 0], [0, 1.0]], [[1.0, 0], [1.0, 0]]])
    assert tf.first_single(np.array([0.0, 0.5]), X) == 0.5
    assert tf.first_single(np.array([0.0]), X[:1]) == np.inf


def _small_setting() -> dict:
    p = settings("transformer", "fast")
    p.update(n=12, d=4, T=4.0, depths=[4, 8], fit_depths=[8, 16], clouds=2, norm_L=8, ode_dt=0.1)
    p["euclid"].update(n=16, d=4, rank=2, T_depth=2.0, T=4.0, L=8)
    p["mlp"].update(strengths=[0.0, 1.0], L=8)
    p["weights"].update(n=8, clouds=2, L=8, T=4.0, fluct_depths=[4, 8], pairs=2)
    return p


def test_the_studies_return_what_the_chapter_draws_on_a_small_setting():
    p = _small_setting()
    D = tf.depth_study(p)
    assert list(D["Ls"]) == [4, 8, 16] and D["sphere"].shape == D["euclid"].shape == (3,)
    assert D["euler_gap"] <= 1e-13 and D["sphere"][-1] < D["sphere"][0]
    assert set(D["t_single"]) == {4, 8} and len(D["t_single_ode"]) == 2
    N = tf.norm_study(p)
    assert N["post_sphere_gap"] < 1e-4 and N["tau_curve"].shape == (9,) and N["tau"][-1] >= np.log1p(p["T"])
    M = tf.mlp_study(p)
    assert M["relu"]["clusters"].shape == (2, 2) and M["tanh"]["antipodal"].dtype == bool
    W = tf.weights_study(p)
    assert W["single"]["fresh"].shape == (2, 9) and W["t"].shape == (9,) and W["spread"].shape == (2,)
    K = tf.rank_study(p)
    assert K["tied"].shape == K["mean_ode"].shape == (9, 4) and K["kernel"] == 2
    np.testing.assert_allclose(K["tied"][0], K["tied_ode"][0], rtol=1e-10)  # the same initial covariance
    assert metrics.count_clusters(tf.network(tf.centred_sphere(12, 4, 0), tf.identity_layer(4, 1.0), 4.0, 8)).shape == (
        9,
    )
