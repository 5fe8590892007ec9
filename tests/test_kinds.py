"""Attention kinds as objects: a kind made outside the library works everywhere no capability is needed,
and a function that needs a capability the kind lacks raises, naming both.

Paper 1 (Castin et al., arXiv:2501.18322): every attention variant has the field
Gamma(x_i) = sum_j P_ij V x_j and the variants differ only in the weights P_ij they form from the scores
s_ij = beta <x_i, A x_j>. The two built-in kinds added through the registry alone are ReLU attention
(Wortsman et al., arXiv:2309.08586) and hardmax, the beta -> infinity limit of softmax (Alcalde,
Geshkovski, Ruiz-Balet, arXiv:2508.09628).
"""

from __future__ import annotations

import numpy as np
import pytest

from tokendynamics import Attention, AttentionKind, CapabilityError, simulate, velocity
from tokendynamics.ensembles import sample_clouds, simulate_batch
from tokendynamics.gaussian import gaussian_velocity, solve_covariance_batch, solve_gaussian
from tokendynamics.kinds import KINDS, get_kind, register
from tokendynamics.particles import normalize_rows, sample_sphere
from tokendynamics.phase import cluster_statistics
from tokendynamics.stability import lipschitz_constants, support_speed

D = 3


def _cubic(scores):
    """A kind of one's own: P_ij = s_ij^3 / n (odd, so antipodal symmetric, and not in the library)."""
    return scores**3 / scores.shape[-1]


CUBIC = AttentionKind("cubic", _cubic)


def _reference_field(X, A, V, beta):
    """The field written out with loops over tokens (independent of the library's vectorised code)."""
    n = len(X)
    out = np.zeros_like(X)
    for i in range(n):
        for j in range(n):
            s = beta * X[i] @ A @ X[j]
            out[i] += s**3 / n * (V @ X[j])
    return out


def _reference_run(X0, A, V, beta, T, dt, *, sphere, scheme):
    """Euler or RK4 written out for the reference field (retraction after each step on the sphere)."""

    def f(X):
        U = _reference_field(X, A, V, beta)
        return U - np.sum(U * X, axis=1, keepdims=True) * X if sphere else U

    X = X0.copy()
    for _ in range(round(T / dt)):
        if scheme == "euler":
            X = X + dt * f(X)
        else:
            k1 = f(X)
            k2 = f(X + dt / 2 * k1)
            k3 = f(X + dt / 2 * k2)
            k4 = f(X + dt * k3)
            X = X + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        if sphere:
            X = X / np.linalg.norm(X, axis=1, keepdims=True)
    return X


@pytest.fixture
def matrices():
    rng = np.random.default_rng(4)
    return 0.5 * rng.standard_normal((D, D)), np.eye(D) + 0.2 * rng.standard_normal((D, D))


def test_user_kind_field_equals_the_written_out_sum(matrices):
    A, V = matrices
    X = sample_sphere(7, D, rng=1)
    layer = Attention(CUBIC, A=A, V=V, beta=0.8)
    assert layer.kind is CUBIC
    np.testing.assert_allclose(velocity(X, layer), _reference_field(X, A, V, 0.8), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("sphere", [True, False])
@pytest.mark.parametrize("method", ["euler", "rk4", "adaptive"])
def test_user_kind_runs_through_every_integrator(matrices, method, sphere):
    A, V = matrices
    X0 = sample_sphere(6, D, rng=2)
    layer = Attention(CUBIC, A=A, V=V, beta=0.8)
    T, dt = 0.4, 0.01
    if method == "adaptive":
        got = simulate(X0, layer, T, method="adaptive", sphere=sphere, rtol=1e-11, atol=1e-13).final
        ref = _reference_run(X0, A, V, 0.8, T, 0.002, sphere=sphere, scheme="rk4")
        tol = 1e-9  # RK4 at a small step against a tight adaptive solve
    else:
        got = simulate(X0, layer, T, dt=dt, method=method, sphere=sphere).final
        ref = _reference_run(X0, A, V, 0.8, T, dt, sphere=sphere, scheme=method)
        tol = 1e-12  # the same scheme: round-off
    np.testing.assert_allclose(got, ref, atol=tol)


def test_user_kind_runs_in_a_batch_of_layers_equal_to_the_loop(matrices):
    A, V = matrices
    X0 = sample_clouds(3, 5, D, rng=3)
    betas = np.array([0.5, 1.0, 2.0])
    batch = Attention(CUBIC, A=np.stack([A] * 3), V=np.stack([V] * 3), beta=betas)
    run = simulate_batch(X0, batch, 0.3, dt=0.01, method="rk4", sphere=True)
    for b in range(3):
        ref = _reference_run(X0[b], A, V, betas[b], 0.3, 0.01, sphere=True, scheme="rk4")
        np.testing.assert_allclose(run.final[b], ref, atol=1e-12)
        assert run.system(b).layer.kind is CUBIC


def test_user_kind_runs_through_the_phase_diagram_statistics():
    stats = cluster_statistics(CUBIC, "identity", betas=(1.0, 4.0), depths=(2.0, 4.0), n=6, d=2, clouds=3, dt=0.1)
    assert stats["single"].shape == (2, 2, 3) and not stats["blowup"].any()
    # the same run by hand: cloud c at beta, with the recipe's Q = K = V = I
    from tokendynamics.metrics import is_single_cluster

    clouds = sample_clouds(3, 6, 2, 0)
    for k, beta in enumerate((1.0, 4.0)):
        for c in range(3):
            X = simulate(clouds[c], Attention(CUBIC, A=np.eye(2), V=np.eye(2), beta=beta), 4.0, dt=0.1, sphere=True)
            assert bool(is_single_cluster(X.final, 0.999)) == bool(stats["single"][1, k, c])


def test_missing_capabilities_raise_naming_the_kind_and_the_capability(matrices):
    A, V = matrices
    layer = Attention(CUBIC, A=A, V=V)
    with pytest.raises(CapabilityError, match=r"\('speed'\), which 'cubic' attention does not have"):
        support_speed(layer, 1.0)
    with pytest.raises(CapabilityError, match=r"\('lipschitz'\), which 'cubic' attention does not have"):
        lipschitz_constants(layer, 1.0)
    with pytest.raises(CapabilityError, match=r"\('gaussian'\), which 'cubic' attention does not have"):
        gaussian_velocity(np.zeros(D), np.eye(D), layer)
    with pytest.raises(CapabilityError, match="'cubic'"):
        solve_gaussian(np.zeros(D), np.eye(D), layer, 1.0)
    with pytest.raises(CapabilityError, match=r"\('covariance'\), which 'cubic' attention does not have"):
        solve_covariance_batch(np.eye(D), [layer, layer], 1.0)
    with pytest.raises(CapabilityError, match=r"\('masses'\), which 'cubic' attention does not have"):
        velocity(sample_sphere(4, D, rng=0), layer, weights=np.full(4, 0.25))


def test_user_kind_with_a_mass_rule_accepts_weighted_measures(matrices):
    A, V = matrices
    kind = AttentionKind("cubic-weighted", _cubic, masses=lambda s, w: s**3 * w)
    X = sample_sphere(4, D, rng=5)
    # a repeated token weighs like one token of double mass
    doubled = velocity(np.vstack([X, X[:1]]), Attention(kind, A=A, V=V))[:4]
    weighted = velocity(X, Attention(kind, A=A, V=V), weights=np.array([2, 1, 1, 1]) / 5)
    np.testing.assert_allclose(doubled, weighted, atol=1e-14)


def test_kinds_are_found_by_name_and_a_bad_kind_is_refused():
    assert get_kind("softmax") is KINDS["softmax"] and Attention("relu", A=np.eye(2), V=np.eye(2)).kind is KINDS["relu"]
    with pytest.raises(ValueError, match="kind must be one of"):
        Attention("no-such-kind", A=np.eye(2), V=np.eye(2))
    with pytest.raises(TypeError, match="weight rule"):
        AttentionKind("broken", 3.0)
    with pytest.raises(ValueError, match="unknown capabilities"):
        AttentionKind("broken", _cubic, capabilities={"telepathy": True})
    with pytest.raises(ValueError, match="already registered"):
        register(AttentionKind("softmax", _cubic))


def test_a_registered_user_kind_is_found_by_name():
    kind = register(AttentionKind("cubic-registered", _cubic))
    try:
        assert Attention("cubic-registered", A=np.eye(2), V=np.eye(2)).kind is kind
    finally:
        del KINDS["cubic-registered"]


# -- the two kinds added through the registry ------------------------------------------------------------


def test_relu_attention_weighs_positive_scores_only(matrices):
    """ReLU attention (Wortsman et al., arXiv:2309.08586): P_ij = max(s_ij, 0) / n."""
    A, V = matrices
    X = sample_sphere(6, D, rng=6)
    S = 1.3 * X @ A @ X.T
    expected = (np.maximum(S, 0) / 6) @ X @ V.T
    np.testing.assert_allclose(velocity(X, Attention("relu", A=A, V=V, beta=1.3)), expected, atol=1e-14)
    # causal: token i sees j <= i only
    causal = velocity(X, Attention("relu", A=A, V=V, beta=1.3, causal=True))
    np.testing.assert_allclose(causal, (np.tril(np.maximum(S, 0)) / 6) @ X @ V.T, atol=1e-14)


def test_relu_speed_bound_holds_on_random_clouds(matrices):
    A, V = matrices
    layer = Attention("relu", A=A, V=V, beta=1.3)
    rng = np.random.default_rng(0)
    for _ in range(5):
        X = rng.standard_normal((8, D))
        R = np.max(np.linalg.norm(X, axis=1))
        assert np.max(np.linalg.norm(velocity(X, layer), axis=1)) <= support_speed(layer, R)


def test_hardmax_is_the_large_beta_limit_of_softmax(matrices):
    """Hardmax (Alcalde, Geshkovski, Ruiz-Balet, arXiv:2508.09628): uniform weights on each row's argmax set,
    the limit of softmax as beta grows (away from ties)."""
    A, V = matrices
    X = sample_sphere(6, D, rng=7)
    hard = velocity(X, Attention("hardmax", A=A, V=V))
    soft = velocity(X, Attention("softmax", A=A, V=V, beta=2000.0))
    np.testing.assert_allclose(hard, soft, atol=1e-6)
    S = X @ A @ X.T
    np.testing.assert_allclose(hard, X[np.argmax(S, axis=1)] @ V.T, atol=1e-14)


def test_hardmax_splits_its_weight_over_tied_keys():
    X = normalize_rows(np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))  # the first two tokens tie
    A = np.eye(2)
    field = velocity(X, Attention("hardmax", A=A, V=np.eye(2)))
    np.testing.assert_allclose(field, [[1, 0], [1, 0], [0, 1]], atol=1e-15)
    tie = Attention("hardmax", A=np.array([[0.0, 1.0], [0.0, 0.0]]), V=np.eye(2))
    # token 3 scores 0 against every key: uniform over all three
    np.testing.assert_allclose(velocity(X, tie)[2], X.mean(axis=0), atol=1e-15)


def test_new_kinds_have_no_gaussian_closure_and_hardmax_no_lipschitz_constant(matrices):
    A, V = matrices
    for name in ("relu", "hardmax"):
        with pytest.raises(CapabilityError, match=f"'{name}' attention does not have"):
            gaussian_velocity(np.zeros(D), np.eye(D), Attention(name, A=A, V=V))
    with pytest.raises(CapabilityError, match="'hardmax' attention does not have"):
        lipschitz_constants(Attention("hardmax", A=A, V=V), 1.0)
    assert support_speed(Attention("hardmax", A=A, V=V), 2.0) == pytest.approx(2.0 * np.linalg.norm(V, 2))


def test_the_contributing_guide_example_of_a_new_kind_runs():
    """CONTRIBUTING, "Add an attention variant": the example in the reader's own code runs as written."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = text.split("## Add an attention variant", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section, flags=re.S)[0]
    scope = {"X0": sample_sphere(8, 2, rng=0)}
    exec(code, scope)
    assert scope["traj"].X.shape == (501, 8, 2) and scope["layer"].kind.name == "cubic"
