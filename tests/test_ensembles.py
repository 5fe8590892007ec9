"""Batched ensembles: a batch of systems is the loop over `simulate`, to round-off, for every kind."""

from __future__ import annotations

import numpy as np
import pytest

from tokendynamics import KINDS, Attention, Trajectory, simulate, velocity
from tokendynamics.attention import FIELD_NONFINITE, FIELD_OK, velocity_batch
from tokendynamics.ensembles import (
    RECIPES,
    Schedule,
    recipe_matrices,
    recipe_stack,
    sample_clouds,
    simulate_batch,
)

B, N, D = 4, 9, 3
TOL = 1e-12  # round-off: the batch runs the same formulas as the loop


def _stack(kind, heads=1, seed=0, betas=(0.6, 1.0, 1.3, 0.8)):
    """One random layer per system (multi-head when heads > 1), of the given kind."""
    rng = np.random.default_rng(seed)
    shared = {"bias": 0.3} if kind == "sigmoid" else {"eps": 1.0, "sinkhorn_tol": 1e-12} if kind == "sinkhorn" else {}
    layers = []
    for b in range(B):
        V = np.eye(D) + 0.3 * rng.standard_normal((heads, D, D))
        if kind == "l2":
            Q = rng.standard_normal((heads, D, D)) / np.sqrt(D)
            K = rng.standard_normal((heads, D, D)) / np.sqrt(D)
            layers.append(Attention(kind, Q=Q, K=K, V=V, beta=betas[b], **shared))
        else:
            A = np.eye(D) + 0.4 * rng.standard_normal((heads, D, D))
            layers.append(Attention(kind, A=A, V=V, beta=betas[b], **shared))
    return layers


def _off_sphere_start(seed=1):
    rng = np.random.default_rng(seed)
    return 0.3 * rng.standard_normal((B, N, D))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("sphere", [True, False])
def test_batch_equals_the_loop_over_simulate_for_every_kind(kind, sphere):
    layers = _stack(kind)
    X0 = sample_clouds(B, N, D, 3) if sphere else _off_sphere_start()
    T = 1.5 if sphere else 0.6  # off the sphere some kinds grow fast: a short run
    batch = simulate_batch(X0, layers, T, dt=0.1, sphere=sphere, save_every=2)
    assert isinstance(batch, Trajectory) and batch.X.shape[1:] == (B, N, D)
    assert batch.blew_up.sum() <= 1  # (off the sphere, unnormalised kinds can blow up: compared below too)
    for b in range(B):
        ref = simulate(X0[b], layers[b], T, dt=0.1, sphere=sphere, save_every=2, on_blowup="stop")
        got = batch.system(b)
        assert got.blowup_time == ref.blowup_time
        np.testing.assert_array_equal(got.t, ref.t)
        assert np.max(np.abs(got.X - ref.X)) <= TOL * max(1.0, np.abs(ref.X).max()), kind


@pytest.mark.parametrize("kind", KINDS)
def test_one_shared_layer_multi_head_and_euler_equal_the_loop(kind):
    lay = _stack(kind, heads=2)[0]
    X0 = sample_clouds(B, N, D, 4)
    batch = simulate_batch(X0, lay, 1.0, dt=0.05, method="euler", sphere=True)
    for b in range(B):
        ref = simulate(X0[b], lay, 1.0, dt=0.05, method="euler", sphere=True)
        assert np.max(np.abs(batch.system(b).X - ref.X)) <= TOL


@pytest.mark.parametrize("kind", KINDS)
def test_velocity_batch_is_velocity_of_each_system(kind):
    layers = _stack(kind, heads=2, seed=5)
    stack = Attention.stack(layers)
    X = sample_clouds(B, N, D, 6)
    U, status = velocity_batch(X, stack)
    assert np.all(status == FIELD_OK)
    for b in range(B):
        assert np.max(np.abs(U[b] - velocity(X[b], layers[b]))) <= 1e-13


def test_linear_attention_goes_through_the_second_moment_in_a_batch():
    layers = _stack("linear")
    X = sample_clouds(B, N, D, 7)
    U, _ = velocity_batch(X, Attention.stack(layers))
    for b in range(B):
        lay = layers[b]
        M2 = X[b].T @ X[b] / N
        np.testing.assert_allclose(U[b], lay.beta * X[b] @ lay.A[0] @ M2 @ lay.V[0].T, atol=1e-14)


def test_a_blown_up_system_is_flagged_and_frozen_and_the_others_go_on():
    # unnormalised softmax off the sphere blows up in finite depth at beta = 1.5 (here at t = 0.6),
    # not at the small betas
    lay = [Attention("unnormalized_softmax", A=np.eye(D), V=np.eye(D), beta=b) for b in (0.2, 1.5, 0.3, 0.25)]
    X0 = _off_sphere_start(8)
    batch = simulate_batch(X0, lay, 1.0, dt=0.05)
    assert batch.blew_up.tolist() == [False, True, False, False]
    assert 0.3 < batch.blowup_time[1] < 1.0
    assert "non-finite" in batch.reasons[1] or "blowup_threshold" in batch.reasons[1]
    assert np.all(np.isfinite(batch.X))  # never silent NaNs: the frozen state is the last good one
    frozen = batch.system(1)
    ref = simulate(X0[1], lay[1], 1.0, dt=0.05, on_blowup="stop")
    assert frozen.blowup_time == pytest.approx(ref.blowup_time)
    np.testing.assert_array_equal(frozen.t, ref.t)
    assert np.max(np.abs(frozen.X - ref.X)) <= TOL * np.abs(ref.X).max()
    i = int(np.argmin(np.abs(batch.t - frozen.t[-1])))
    assert np.all(batch.X[i + 1 :, 1] == batch.X[i, 1])  # frozen afterwards
    for b in (0, 2, 3):  # the others go on, exactly as alone
        ref = simulate(X0[b], lay[b], 1.0, dt=0.05)
        assert np.max(np.abs(batch.system(b).X - ref.X)) <= TOL * np.abs(ref.X).max()


def test_velocity_batch_reports_overflow_per_system():
    lay = Attention.stack([Attention("unnormalized_softmax", A=np.eye(D), V=np.eye(D), beta=b) for b in (1.0, 900.0)])
    X = np.stack([np.full((N, D), 0.5), np.full((N, D), 2.0)])
    U, status = velocity_batch(X, lay)
    assert status.tolist() == [FIELD_OK, FIELD_NONFINITE]
    assert np.all(U[1] == 0) and np.all(np.isfinite(U))


def test_sinkhorn_batch_matches_the_loop_potentials_and_flags_non_convergence():
    from tokendynamics.transport import sinkhorn_potentials

    rng = np.random.default_rng(9)
    S = rng.standard_normal((3, N, N))
    logw = np.full(N, -np.log(N))
    f, g, it, err = sinkhorn_potentials(S, logw, eps=0.7, max_iter=5000, tol=1e-12)
    for b in range(3):
        fb, gb, itb, errb = sinkhorn_potentials(S[b], logw, eps=0.7, max_iter=5000, tol=1e-12)
        assert it[b] == itb and np.max(np.abs(f[b] - fb)) <= 1e-13 and np.max(np.abs(g[b] - gb)) <= 1e-13
    lay = Attention.stack(
        [Attention("sinkhorn", A=np.eye(D), V=np.eye(D), beta=b, sinkhorn_iters=20) for b in (0.1, 30.0)]
    )
    X = sample_clouds(2, N, D, 10)
    _, status = velocity_batch(X, lay)
    assert status[0] == FIELD_OK and status[1] != FIELD_OK


def test_schedule_resamples_layers_every_period_and_equals_chained_runs():
    pieces = np.random.SeedSequence(11).spawn(3)
    sched = Schedule(tuple(recipe_stack("softmax", "gaussian", D, 1.5, B, rng=c) for c in pieces), every=0.5)
    assert len(sched.layers) == 3 and sched.index(0.0) == 0 and sched.index(0.5) == 1 and sched.index(1.49) == 2
    X0 = sample_clouds(B, N, D, 12)
    batch = simulate_batch(X0, sched, 1.5, dt=0.1, sphere=True)
    for b in range(B):
        X = X0[b]
        for k, stack in enumerate(sched.layers):  # piece by piece, the layer of the piece
            X = simulate(X, stack.member(b), (0.5 * k, 0.5 * (k + 1)), dt=0.1, sphere=True).final
        assert np.max(np.abs(batch.final[b] - X)) <= 1e-12
    with pytest.raises(ValueError, match="divide"):
        simulate_batch(X0, sched, 1.5, dt=0.3, sphere=True)


def test_recipes_are_seeded_and_have_the_promised_structure():
    for recipe in RECIPES:
        a, b = recipe_matrices(recipe, 4, 3, 0), recipe_matrices(recipe, 4, 3, 0)
        assert all(np.array_equal(a[k], b[k]) for k in a)
    eye = np.eye(4)
    assert np.all(recipe_matrices("identity", 4, 2)["V"] == eye)
    assert np.all(recipe_matrices("minus_identity", 4, 2)["V"] == -eye)
    goe = recipe_matrices("goe", 200, 1, 1)["K"][0]
    assert np.array_equal(goe, goe.T)
    lam = np.linalg.eigvalsh(goe)
    assert -2.3 < lam[0] < -1.7 and 1.7 < lam[-1] < 2.3  # semicircle on [-2, 2]
    st = recipe_stack("softmax", "gaussian", 4, [0.5, 1.0, 2.0], rng=2)
    M = recipe_matrices("gaussian", 4, 3, 2)
    np.testing.assert_allclose(st.A[:, 0], np.einsum("bkd,bke->bde", M["Q"], M["K"]))
    assert st.member(2).beta == 2.0
    l2 = recipe_stack("l2", "identity", 4, 1.0, size=2)
    assert l2.Q is not None and len(l2) == 2


def test_l2_with_identity_queries_is_softmax_at_twice_beta_on_the_sphere():
    X0 = sample_clouds(B, N, D, 13)
    l2 = simulate_batch(X0, recipe_stack("l2", "identity", D, 0.7, size=B), 2.0, dt=0.1, sphere=True)
    sm = simulate_batch(X0, recipe_stack("softmax", "identity", D, 1.4, size=B), 2.0, dt=0.1, sphere=True)
    assert np.max(np.abs(l2.final - sm.final)) < 1e-12


def test_batch_of_layers_validation():
    with pytest.raises(ValueError, match="differs"):
        Attention.stack([Attention("softmax", A=np.eye(2), V=np.eye(2)), Attention("linear", A=np.eye(2), V=np.eye(2))])
    with pytest.raises(ValueError, match="shape"):
        Attention.stack(
            [Attention("softmax", A=np.eye(2), V=np.eye(2)), Attention("softmax", A=np.eye(3), V=np.eye(3))]
        )
    with pytest.raises(ValueError, match="beta"):
        Attention("softmax", A=np.ones((2, 3, 3)), V=np.ones((2, 3, 3)), beta=[1.0, -1.0])
    with pytest.raises(ValueError, match="needs Q and K"):
        Attention("l2", A=np.ones((2, 3, 3)), V=np.ones((2, 3, 3)), beta=[1.0, 1.0])
    st = Attention("softmax", A=np.ones((2, 3, 3)), V=np.ones((2, 3, 3)), beta=[1.0, 2.0])
    with pytest.raises(ValueError, match="2 layers for 3 systems"):
        simulate_batch(sample_clouds(3, 4, 3, 0), st, 1.0, dt=0.1)
    with pytest.raises(ValueError, match="unit-norm"):
        simulate_batch(2 * sample_clouds(2, 4, 3, 0), st, 1.0, dt=0.1, sphere=True)
    assert st.take([1]).beta.tolist() == [2.0] and len(st) == 2
    with pytest.raises(TypeError):
        Schedule((1, 2), 1.0)


def test_save_at_stores_exactly_the_requested_depths():
    X0 = sample_clouds(2, 5, 3, 0)
    lay = Attention("softmax", A=np.eye(3), V=np.eye(3))
    bt = simulate_batch(X0, lay, 2.0, dt=0.1, sphere=True, save_at=[0.5, 1.0, 2.0])
    np.testing.assert_allclose(bt.t, [0.5, 1.0, 2.0])
    with pytest.raises(ValueError, match="step times"):
        simulate_batch(X0, lay, 2.0, dt=0.1, sphere=True, save_at=[0.55])


def test_require_batch_layer_names_the_layer_in_every_refusal():
    from tokendynamics.attention import require_batch_layer

    st = Attention("softmax", A=np.ones((2, 3, 3)), V=np.ones((2, 3, 3)), beta=[1.0, 1.0])
    assert require_batch_layer(st, 2, 3) is st
    with pytest.raises(TypeError, match="the layer at t = 1 must be an Attention"):
        require_batch_layer("softmax", 2, 3, "the layer at t = 1")
    with pytest.raises(ValueError, match="layer has d = 3, the tokens have d = 2"):
        require_batch_layer(st, 2, 2)
    with pytest.raises(ValueError, match="layer has 2 layers for 4 systems"):
        require_batch_layer(st, 4, 3)


def test_batch_and_single_runs_are_one_trajectory_type():
    from tokendynamics.particles import Trajectory

    run = simulate_batch(sample_clouds(2, 4, 3, 0), Attention("softmax", A=np.eye(3), V=np.eye(3)), 0.2, dt=0.1)
    one = run.system(1)
    assert isinstance(run, Trajectory) and isinstance(one, Trajectory) and (run.size, one.size) == (2, 1)
    assert list(run.blew_up) == [False, False] and one.blew_up is False
    assert (run.n, run.d, one.n, one.d) == (4, 3, 4, 3)
    np.testing.assert_array_equal(run.final[1], one.final)
    np.testing.assert_array_equal(run.at(0.1)[1], one.at(0.1))
