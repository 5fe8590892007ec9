"""Tests of ``tokendynamics.variants``: multi-head layers cut by row blocks, sigmoid attention and its
normalisations, and the score convention.

The double loops below evaluate the definitions literally, in paper 1's own convention where it
differs from the library's (paper score <A1 x, y> with A1 = K^T Q; library score <x, A y> with
A = Q^T K = A1^T).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.helpers import loop_normalised, loop_sum, paper1_tokens, sigmoid
from tokendynamics import Attention, velocity
from tokendynamics.variants import multihead_from_rows, sigmoid_layer


@pytest.fixture
def tokens():
    return paper1_tokens()


@pytest.mark.claim("score-convention")
def test_library_convention_is_the_transpose_of_paper_one(tokens):
    """Paper 1 (Castin et al., arXiv 2501.18322) writes the score <A1 x, y>: its A1 is the book's A^T. With A1 = A
    instead (a non-symmetric A) the paper's formula gives a visibly different field.
    """
    X, A, V, _ = tokens
    ours = velocity(X, Attention("softmax", A=A, V=V))
    # the paper's formula with A1 = A: scores <A x_i, x_j>
    wrong = loop_normalised(X, np.full(len(X), 1 / len(X)), lambda i, j: math.exp(float((A @ X[i]) @ X[j])), V.dot)
    assert np.max(np.abs(ours - wrong)) > 1e-2


@pytest.mark.claim("multihead-heads-by-row-blocks")
def test_multihead_from_rows_matches_the_official_formula_with_scale_and_output_matrix():
    """Paper 1 (Castin et al., arXiv 2501.18322), the authors' code: heads are row blocks of Q, K, V, with A_h =
    K_h^T Q_h / sqrt(k) and C_h = W_h^T V_h.
    """
    rng = np.random.default_rng(3)
    d, H = 4, 2
    k = d // H
    Q, K, V, W = (rng.standard_normal((d, d)) for _ in range(4))
    X = rng.standard_normal((9, d))
    layer = multihead_from_rows(Q, K, V, H, W=W, scale=1 / math.sqrt(k))
    n = X.shape[0]
    ref = np.zeros((n, d))
    for h in range(H):
        b = slice(h * k, (h + 1) * k)
        A1h = K[b].T @ Q[b] / math.sqrt(k)  # official code: A_h = K_h^T Q_h / sqrt(k)
        Ch = W[b].T @ V[b]
        ref += loop_normalised(
            X, np.full(n, 1 / n), lambda i, j, A1h=A1h: math.exp(float((A1h @ X[i]) @ X[j])), lambda y, Ch=Ch: Ch @ y
        )
    np.testing.assert_allclose(velocity(X, layer), ref, atol=1e-12)
    assert layer.n_heads == H


@pytest.mark.claim("multihead-heads-by-row-blocks")
def test_multihead_from_rows_with_fewer_rows_has_an_empty_head_that_adds_the_mean_only():
    """Paper 1 (Castin et al., arXiv 2501.18322), the authors' code: a 1 x 2 query with two heads leaves head 1
    empty (A_1 = 0); it adds C_1 times the mean (the setting of the convergence-to-a-plane cone figure).
    """
    q = np.array([[0.406324, 0.913729]])
    layer = multihead_from_rows(q, -q, np.eye(2), 2)
    np.testing.assert_allclose(layer.A[1], 0.0)
    np.testing.assert_allclose(layer.A[0], -q.T @ q)
    np.testing.assert_allclose(layer.V[1], np.diag([0.0, 1.0]))
    X = np.random.default_rng(0).standard_normal((7, 2))
    head0 = velocity(X, Attention("softmax", A=layer.A[0], V=layer.V[0]))
    np.testing.assert_allclose(velocity(X, layer) - head0, np.tile(np.diag([0.0, 1.0]) @ X.mean(0), (7, 1)), atol=1e-14)


def test_multihead_from_rows_rejects_bad_arguments():
    with pytest.raises(ValueError, match="must divide d"):
        multihead_from_rows(np.eye(3), np.eye(3), np.eye(3), 2)
    with pytest.raises(ValueError, match="same r"):
        multihead_from_rows(np.eye(2), np.eye(2)[:1], np.eye(2), 2)
    with pytest.raises(ValueError, match="needs k rows"):
        multihead_from_rows(np.ones((1, 2)), np.ones((1, 2)), np.eye(2), 2, kind="l2")


@pytest.mark.claim("sigmoid-tends-to-unnormalised-softmax")
def test_sigmoid_layer_summed_with_bias_minus_log_n_matches_a_double_loop(tokens):
    """Paper 1 (Castin et al., arXiv 2501.18322): sigmoid attention as Ramapuram et al. write it, sum_j
    sigmoid(s_ij - log n) V x_j, without 1/n.
    """
    X, A, V, _ = tokens
    n = X.shape[0]
    layer = sigmoid_layer(A, V, bias="-log n", normalization="sum", n=n, beta=0.7)
    ref = loop_sum(X, np.ones(n), lambda i, j: sigmoid(0.7 * float(X[i] @ A @ X[j]) - math.log(n)), lambda y: V @ y)
    np.testing.assert_allclose(velocity(X, layer), ref, atol=1e-12)
    with pytest.raises(ValueError, match="needs the number of tokens"):
        sigmoid_layer(A, V, normalization="sum")
    with pytest.raises(ValueError, match="normalization"):
        sigmoid_layer(A, V, normalization="max")


@pytest.mark.claim("sigmoid-tends-to-unnormalised-softmax")
def test_sigmoid_layer_with_bias_minus_log_n_tends_to_unnormalised_softmax_at_rate_one_over_n():
    """Paper 1 (Castin et al., arXiv 2501.18322): sigmoid attention with bias -log n tends to unnormalised softmax
    attention as n grows.

    Fixed measure mu (m atoms, each repeated r times, n = m r tokens): the gap is O(e^{2aR^2} v R / n).
    """
    rng = np.random.default_rng(5)
    m, d = 12, 2
    Y = rng.uniform(-1, 1, (m, d))
    A, V = 0.8 * rng.standard_normal((d, d)), rng.standard_normal((d, d))
    exact = velocity(Y, Attention("unnormalized_softmax", A=A, V=V))
    a, v = np.linalg.norm(A, 2), np.linalg.norm(V, 2)
    R = np.max(np.linalg.norm(Y, axis=1))
    # first-order term: n (sigmoid - exponential) -> -int e^{2 s(x, y)} V y dmu(y), up to O(e^{3aR^2} v R / n)
    first = -np.array([np.mean([math.exp(2 * float(x @ A @ y)) * (V @ y) for y in Y], axis=0) for x in Y])
    for r in (1, 10, 100, 300):
        n = m * r
        X = np.repeat(Y, r, axis=0)
        got = velocity(X, sigmoid_layer(A, V, bias="-log n", normalization="sum", n=n))[::r]
        gap = np.max(np.linalg.norm(got - exact, axis=1))
        assert gap <= math.exp(2 * a * R * R) * v * R / n
        assert np.max(np.linalg.norm(n * (got - exact) - first, axis=1)) <= math.exp(3 * a * R * R) * v * R / n
    assert gap > 0.5 * np.max(np.linalg.norm(first, axis=1)) / n  # the gap is really of order 1/n
