"""Tests of ``tokendynamics.masked``: causal attention with an attention sink."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import logsumexp

from tokendynamics import Attention, attention_matrix, velocity
from tokendynamics.masked import sink_attention, with_sink


@pytest.mark.claim("attention-sink-bounds-the-denominators")
def test_with_sink_builds_the_sink_measure_and_validates():
    """Paper 1 (Castin et al., arXiv 2501.18322): the attention sink is a first token at position 0 with mass m0; n
    tokens at s_i = i/n share the rest.
    """
    X = np.arange(8.0).reshape(4, 2)
    s = with_sink(X, 0.2)
    np.testing.assert_allclose(s.weights, [0.2, 0.2, 0.2, 0.2, 0.2])
    np.testing.assert_allclose(s.positions, [0, 0.25, 0.5, 0.75, 1.0])
    np.testing.assert_array_equal(s.X[0], [0.0, 0.0])
    np.testing.assert_array_equal(s.tokens(s.X), X)
    cloud = with_sink(X, 0.5, sink=np.ones((5, 2)))
    assert cloud.n_sink == 5 and abs(cloud.weights[:5].sum() - 0.5) < 1e-15
    assert cloud.positions[:5].tolist() == [0.0] * 5 and np.all(cloud.positions[5:] > 0)
    for bad, msg in [
        (dict(m0=1.0), "m0 must be in"),
        (dict(m0=0.0, sink=np.ones(2)), "no mass"),
        (dict(m0=0.1, positions=[0, 0.1, 0.2, 0.3]), "reserved for the sink"),
        (dict(m0=0.1, sink=np.ones(3)), "dimension 3"),
    ]:
        with pytest.raises(ValueError, match=msg):
            with_sink(X, **bad)


def causal_log_partition(X, A, w, s):
    """Reference: log Z_i = log sum_{j: s_j <= s_i} w_j exp(<x_i, A x_j>), dense."""
    S = X @ A @ X.T + np.log(w)[None, :]
    S[s[None, :] > s[:, None]] = -np.inf
    return logsumexp(S, axis=1)


@pytest.mark.claim("attention-sink-bounds-the-denominators")
def test_sink_moves_by_v_and_bounds_every_causal_denominator_below():
    """Paper 1 (Castin et al., arXiv 2501.18322): with a sink of mass m0 the sink moves by x_0' = V x_0 and every
    causal denominator is at least m0 exp(-|A| R^2), uniformly in the position; without a sink the first one is
    not.
    """
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
    logZ = causal_log_partition(system.X, A, system.weights, system.positions)
    assert np.all(logZ >= math.log(m0) - np.linalg.norm(A, 2) * R * R)
    # without a sink the first token's denominator is w_1 e^{<x1, A x1>} = e^{<x1, A x1>} / n: no
    # bound uniform in n
    plain = with_sink(X, 0.0)
    logZ0 = causal_log_partition(plain.X, A, plain.weights, plain.positions)
    assert logZ0[0] == pytest.approx(-math.log(n) + X[0] @ A @ X[0], rel=1e-14)
    # with A = 0 the attention on the sink is m0 / lambda([0, s])
    flat = Attention("softmax", A=np.zeros((d, d)), V=V, causal=True)
    np.testing.assert_allclose(sink_attention(system.X, flat, system), m0 / np.cumsum(system.weights)[1:], atol=1e-14)


@pytest.mark.claim("attention-sink-bounds-the-denominators")
def test_masked_attention_with_sink_never_looks_ahead():
    """Paper 1 (Castin et al., arXiv 2501.18322): masked attention only looks at earlier positions, also with a
    sink cloud.
    """
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
