"""The compiled batch kernel of softmax attention: equal to a plain numpy loop and to `simulate_batch`.

Every comparison is to 1e-10: the kernel computes the same scheme as the references, in another
order (blocks, shared exponentials of symmetric scores, no max-shift for bounded scores, its own
vectorised exponential), so the results differ by round-off only (about 1e-14 measured).
"""

from __future__ import annotations

import numpy as np
import pytest

from tokendynamics import Attention
from tokendynamics import _batch_kernels as bk
from tokendynamics.ensembles import sample_clouds, simulate_batch

TOL = 1e-10  # round-off (see the module docstring)
pytestmark = pytest.mark.skipif(not bk.HAVE_NUMBA, reason="the compiled kernel needs numba")


def _reference(X0, A, V, beta, h, steps, scheme, sphere):
    """The plain numpy loop: einsum scores, max-shifted exp, row normalisation, projection, retraction.

    Each stage is evaluated at its retracted point (on the sphere), as `simulate_batch` does."""
    B, n, d = X0.shape
    A = np.broadcast_to(A, (B, d, d))
    V = np.broadcast_to(V, (B, d, d))
    beta = np.broadcast_to(np.asarray(beta, float), (B,))

    def unit(Y):
        return Y / np.linalg.norm(Y, axis=-1, keepdims=True)

    def field(Y):
        Y = unit(Y) if sphere else Y
        S = beta[:, None, None] * np.einsum("bia,bac,bjc->bij", Y, A, Y)
        P = np.exp(S - S.max(axis=-1, keepdims=True))
        P /= P.sum(axis=-1, keepdims=True)
        F = np.einsum("bij,bcd,bjd->bic", P, V, Y)
        return F - np.sum(F * Y, axis=-1, keepdims=True) * Y if sphere else F

    X = X0.copy()
    frames = [X.copy()]
    for _ in range(steps):
        k1 = field(X)
        if scheme == "rk4":
            k2 = field(X + h / 2 * k1)
            k3 = field(X + h / 2 * k2)
            k4 = field(X + h * k3)
            X = X + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        else:
            X = X + h * k1
        X = unit(X) if sphere else X
        frames.append(X.copy())
    return np.array(frames)


def _matrices(d, B, *, shared, symmetric, seed=0):
    rng = np.random.default_rng(seed)
    shape = (d, d) if shared else (B, d, d)
    A = np.eye(d) + 0.5 * rng.standard_normal(shape)
    if symmetric:
        A = (A + np.swapaxes(A, -1, -2)) / 2
    V = np.eye(d) + 0.3 * rng.standard_normal(shape)
    return A, V


@pytest.mark.parametrize("scheme", ["euler", "rk4"])
@pytest.mark.parametrize("sphere", [True, False])
@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("symmetric", [True, False])
def test_run_batch_equals_the_plain_numpy_loop(scheme, sphere, d, shared, symmetric):
    """Every frame equals the plain loop, for both schemes, on and off the sphere, shared or
    per-system matrices, symmetric A (half the exponentials) or not."""
    B, n, steps, h = 5, 7, 15, 0.1
    X0 = sample_clouds(B, n, d, 1) if sphere else 0.7 * np.random.default_rng(2).standard_normal((B, n, d))
    A, V = _matrices(d, B, shared=shared, symmetric=symmetric)
    beta = np.array([0.5, 1.0, 2.0, 4.0, 8.0])
    run = bk.run_batch(X0, A, V, beta, h, steps, scheme=scheme, sphere=sphere)
    ref = _reference(X0, A, V, beta, h, steps, scheme, sphere)
    assert run.frames.shape == ref.shape
    np.testing.assert_array_equal(run.saved, np.arange(steps + 1))
    np.testing.assert_allclose(run.frames, ref, rtol=0, atol=TOL)
    assert np.all(run.status == bk.OK) and np.all(run.flagged_step == -1)


@pytest.mark.parametrize("symmetric", [True, False])
def test_run_batch_takes_the_shifted_exponentials_when_scores_are_large(symmetric):
    """Scores beyond EXP_SAFE (beta |A| = 600 here) go through the log-sum-exp shift, and still equal the loop."""
    B, n, d = 3, 9, 3
    X0 = sample_clouds(B, n, d, 4)
    A, V = _matrices(d, B, shared=True, symmetric=symmetric, seed=5)
    beta = 600.0 / np.linalg.norm(A)
    assert beta * np.linalg.norm(A) > bk.EXP_SAFE
    run = bk.run_batch(X0, A, V, beta, 0.002, 10, scheme="rk4")
    np.testing.assert_allclose(run.frames, _reference(X0, A, V, beta, 0.002, 10, "rk4", True), rtol=0, atol=TOL)


@pytest.mark.parametrize("method", ["euler", "rk4"])
@pytest.mark.parametrize("per_system", [False, True])
def test_run_batch_equals_simulate_batch_on_the_sphere(method, per_system):
    """The kernel is `simulate_batch` (softmax, sphere) to round-off: same frames, same stored times."""
    B, n, d, h, steps = 6, 11, 3, 0.1, 30
    X0 = sample_clouds(B, n, d, 7)
    A, V = _matrices(d, B, shared=not per_system, symmetric=False, seed=8)
    beta = np.linspace(0.5, 5.0, B)
    layers = [
        Attention("softmax", A=A[b] if per_system else A, V=V[b] if per_system else V, beta=beta[b]) for b in range(B)
    ]
    batch = simulate_batch(X0, layers, (0.0, steps * h), dt=h, method=method, sphere=True, save_every=4)
    run = bk.run_batch(X0, A, V, beta, h, steps, scheme=method, save_every=4)
    np.testing.assert_allclose(run.saved * h, batch.t, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.frames, batch.X, rtol=0, atol=TOL)


def test_run_batch_equals_simulate_batch_with_token_masses():
    """Shared token masses (one of them zero) weight the columns as in `simulate_batch`."""
    B, n, d = 3, 8, 2
    X0 = sample_clouds(B, n, d, 9)
    w = np.random.default_rng(10).uniform(0.2, 1.0, n)
    w[3] = 0.0
    w /= w.sum()
    layer = Attention("softmax", A=np.eye(d), V=np.eye(d), beta=3.0)
    batch = simulate_batch(X0, layer, 2.0, dt=0.1, method="rk4", sphere=True, weights=w)
    run = bk.run_batch(X0, np.eye(d), np.eye(d), 3.0, 0.1, 20, scheme="rk4", weights=w)
    np.testing.assert_allclose(run.frames, batch.X, rtol=0, atol=TOL)


def _flag_step(batch, h):
    return np.where(batch.blew_up, np.rint(np.nan_to_num(batch.blowup_time) / h), -1).astype(int)


def test_run_batch_flags_and_freezes_a_system_whose_field_overflows_like_simulate_batch():
    """System 1's scores overflow (beta <x, A x> = inf): flagged at step 1 with a non-finite field and
    frozen at its start; the other systems go on, as in `simulate_batch`."""
    B, n, d, h = 3, 6, 2, 0.1
    X0 = sample_clouds(B, n, d, 11)
    A = np.array([np.eye(d), 1e10 * np.eye(d), np.eye(d)])
    beta = np.array([1.0, 1e300, 2.0])
    layers = [Attention("softmax", A=A[b], V=np.eye(d), beta=beta[b]) for b in range(B)]
    batch = simulate_batch(X0, layers, 1.0, dt=h, method="euler", sphere=True)
    run = bk.run_batch(X0, A, np.eye(d), beta, h, 10)
    np.testing.assert_array_equal(run.status, [bk.OK, bk.FIELD_OVERFLOW, bk.OK])
    np.testing.assert_array_equal(run.flagged_step, _flag_step(batch, h))
    assert "non-finite" in batch.reasons[1]
    np.testing.assert_array_equal(run.frames[:, 1], np.broadcast_to(run.frames[0, 1], run.frames[:, 1].shape))
    np.testing.assert_allclose(run.frames[0, 1], X0[1], rtol=0, atol=1e-15)  # its start (rows divided by their norms)
    np.testing.assert_allclose(run.frames, batch.X, rtol=0, atol=TOL)


def test_run_batch_flags_growing_systems_at_the_step_simulate_batch_does():
    """Off the sphere with V = 5 I the tokens grow geometrically: with ``blowup_threshold = 50`` the
    systems are flagged when a coordinate passes it, and without a threshold when their scores
    overflow; both at the same step and for the same reason as in `simulate_batch`."""
    B, n, d, h = 3, 5, 2, 0.5
    X0 = 0.5 * np.random.default_rng(12).standard_normal((B, n, d))
    V = 5.0 * np.eye(d)
    beta = np.array([0.5, 1.0, 2.0])
    layers = [Attention("softmax", A=np.eye(d), V=V, beta=b) for b in beta]
    for threshold, code in ((50.0, bk.THRESHOLD), (np.inf, None)):
        steps = 20 if np.isfinite(threshold) else 400
        batch = simulate_batch(X0, layers, steps * h, dt=h, method="euler", blowup_threshold=threshold, save_every=10)
        run = bk.run_batch(X0, np.eye(d), V, beta, h, steps, sphere=False, blowup_threshold=threshold, save_every=10)
        assert batch.blew_up.all()
        np.testing.assert_array_equal(run.flagged_step, _flag_step(batch, h))
        for b in range(B):
            reason = batch.reasons[b]
            expected = (
                bk.THRESHOLD
                if "exceeded" in reason
                else bk.FIELD_OVERFLOW
                if "velocity" in reason
                else bk.TOKENS_NONFINITE
            )
            assert run.status[b] == expected
            if code is not None:
                assert expected == code
        np.testing.assert_allclose(run.frames, batch.X, rtol=1e-12, atol=TOL)


def test_simulate_batch_picks_the_kernel_for_softmax_and_the_numpy_field_otherwise(monkeypatch):
    """``backend="auto"`` runs one-head softmax layers through the kernel (same result as ``"numpy"``),
    other kinds through the numpy field; without numba "auto" falls back and "numba" says what is missing."""
    X0 = sample_clouds(4, 6, 2, 15)
    layer = Attention("softmax", A=np.eye(2), V=np.eye(2), beta=2.0)
    auto = simulate_batch(X0, layer, 0.5, dt=0.1, method="euler", sphere=True)
    plain = simulate_batch(X0, layer, 0.5, dt=0.1, method="euler", sphere=True, backend="numpy")
    assert auto.info["backend"] == "numba" and plain.info["backend"] == "numpy"
    np.testing.assert_allclose(auto.X, plain.X, rtol=0, atol=TOL)
    relu = simulate_batch(X0, Attention("relu", A=np.eye(2), V=np.eye(2)), 0.5, dt=0.1, sphere=True)
    assert relu.info["backend"] == "numpy"
    wide = max(bk.CROSSOVER) + 1  # beyond the measured dimensions the numpy path is kept (it won at d = 100)
    assert bk.prefer_kernel(8, max(bk.CROSSOVER)) and not bk.prefer_kernel(8, wide)
    monkeypatch.setattr(bk, "HAVE_NUMBA", False)
    assert not bk.prefer_kernel(8, 2)
    assert simulate_batch(X0, layer, 0.5, dt=0.1, method="euler", sphere=True).info["backend"] == "numpy"
    with pytest.raises(ValueError, match="numba"):
        simulate_batch(X0, layer, 0.5, dt=0.1, sphere=True, backend="numba")


def test_compiled_exponential_is_within_a_few_ulp_of_numpy():
    """The vectorised exponential of the kernel: relative error <= 4e-16 on [-708, 700], 0 below, NaN kept."""
    x = np.concatenate([np.linspace(-708.0, 700.0, 200_001), [-1e-300, 0.0, 1e-300, np.log(2.0)]])
    y = x.copy()
    bk._exp_inplace(y, y.size, np.empty_like(y))
    assert np.max(np.abs(y / np.exp(x) - 1)) <= 4e-16
    z = np.array([-709.0, -1e10, -np.inf, np.nan])
    bk._exp_inplace(z, z.size, np.empty_like(z))
    assert np.array_equal(z[:3], [0.0, 0.0, 0.0]) and np.isnan(z[3])


def test_run_batch_stores_the_requested_steps():
    """save_every keeps 0, k, 2k, ... and the last step; save_steps exactly the steps asked for."""
    X0 = sample_clouds(2, 5, 2, 16)
    run = bk.run_batch(X0, np.eye(2), np.eye(2), 1.0, 0.1, 10, save_every=4)
    np.testing.assert_array_equal(run.saved, [0, 4, 8, 10])
    every = bk.run_batch(X0, np.eye(2), np.eye(2), 1.0, 0.1, 10)
    np.testing.assert_array_equal(run.frames, every.frames[[0, 4, 8, 10]])
    picked = bk.run_batch(X0, np.eye(2), np.eye(2), 1.0, 0.1, 10, save_steps=[10, 3])
    np.testing.assert_array_equal(picked.saved, [3, 10])
    np.testing.assert_array_equal(picked.frames, every.frames[[3, 10]])


@pytest.mark.parametrize(
    "change, match",
    [
        ({"X0": np.zeros((3, 2))}, "X0 must be a 3-D array"),
        ({"X0": np.zeros((0, 2, 2))}, "X0 must be a batch"),
        ({"X0": 1.1 * sample_clouds(2, 4, 2, 0)}, "unit-norm"),
        ({"A": np.eye(3)}, "A must have shape"),
        ({"V": np.full((2, 2), np.inf)}, "V contains non-finite"),
        ({"beta": np.ones(3)}, "beta must be one number or 2"),
        ({"h": -0.1}, "h"),
        ({"steps": 0}, "steps"),
        ({"scheme": "rk45"}, "scheme"),
        ({"weights": -np.ones(4)}, "weights"),
        ({"save_every": 2, "save_steps": [1]}, "save_every or save_steps"),
        ({"save_steps": [99]}, "save_steps"),
    ],
)
def test_run_batch_rejects_bad_input_naming_the_argument(change, match):
    """Wrong shapes, values or options raise a ValueError that names the argument."""
    args = {"X0": sample_clouds(2, 4, 2, 0), "A": np.eye(2), "V": np.eye(2), "beta": 1.0, "h": 0.1, "steps": 3}
    args.update(change)
    with pytest.raises(ValueError, match=match):
        bk.run_batch(**args)
