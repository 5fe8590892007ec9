"""Property-based tests (Hypothesis): invariances of the attention field and of the integrators.

The profile ``ci`` (registered in ``conftest.py``: derandomized, a fixed number of examples, no
deadline) makes every run draw the same examples, so CI is deterministic.
"""

from __future__ import annotations

import numpy as np
import pytest

from tokendynamics import Attention, attention_matrix, simulate, velocity
from tokendynamics.particles import normalize_rows

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

KINDS = ("softmax", "unnormalized_softmax", "linear", "l2", "sinkhorn", "sigmoid")
coord = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False, width=64)
entry = st.floats(-1.2, 1.2, allow_nan=False, allow_infinity=False, width=64)


@st.composite
def problems(draw, kinds=KINDS, causal=False, max_n=10, max_d=4, weighted=True):
    """(X, layer, weights): tokens, a layer of one of ``kinds`` with matching matrices, masses or None."""
    kind = draw(st.sampled_from(kinds))
    n = draw(st.integers(2, max_n))
    d = draw(st.integers(1, max_d))
    X = draw(hnp.arrays(np.float64, (n, d), elements=coord))
    M = lambda: draw(hnp.arrays(np.float64, (d, d), elements=entry))  # noqa: E731
    beta = draw(st.floats(0.1, 2.0))
    extra = {}
    if kind == "l2":
        mats = {"Q": M(), "K": M()}
    else:
        mats = {"A": M()}
    if kind == "sinkhorn":
        extra["eps"] = draw(st.floats(0.5, 2.0))
    if kind == "sigmoid":
        extra["bias"] = draw(st.floats(-1.0, 1.0))
    if causal and kind != "sinkhorn":
        extra["causal"] = True
    layer = Attention(kind, V=M(), beta=beta, **mats, **extra)
    w = None
    if weighted and draw(st.booleans()):
        raw = np.array(draw(st.lists(st.floats(0.05, 1.0), min_size=n, max_size=n)))
        w = raw / raw.sum()
    return X, layer, w


def _orthogonal(d, seed):
    Z = np.random.default_rng(seed).standard_normal((d, d))
    Q, R = np.linalg.qr(Z)
    return Q * np.sign(np.diag(R))


def _rotated(layer: Attention, R: np.ndarray) -> Attention:
    """The same layer acting on rotated tokens x -> R x."""
    V = R @ layer.V[0] @ R.T
    if layer.kind.name == "l2":
        return layer.with_(Q=layer.Q[0] @ R.T, K=layer.K[0] @ R.T, V=V)
    return layer.with_(A=R @ layer.A[0] @ R.T, V=V)


def _close(a, b, scale=None):
    scale = max(1.0, float(np.max(np.abs(b)))) if scale is None else scale
    np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-9 * scale)


@given(problems(), st.integers(0, 2**31 - 1))
def test_rotation_equivariance_of_every_kind(problem, seed):
    r"""velocity(X R^T, layer with R A R^T, R V R^T) = velocity(X) R^T (L2: Q R^T, K R^T)."""
    X, layer, w = problem
    R = _orthogonal(layer.d, seed)
    _close(velocity(X @ R.T, _rotated(layer, R), w), velocity(X, layer, w) @ R.T)


@given(problems(causal=True), st.randoms(use_true_random=False))
def test_permutation_equivariance_of_every_kind(problem, rnd):
    """Relabelling the tokens (with their masses, and positions for causal layers) relabels the field."""
    X, layer, w = problem
    n = len(X)
    perm = np.array(rnd.sample(range(n), n))
    pos = np.arange(n, dtype=float)
    kw = {"positions": pos} if layer.causal else {}
    kw_perm = {"positions": pos[perm]} if layer.causal else {}
    base = velocity(X, layer, w, **kw)
    moved = velocity(X[perm], layer, None if w is None else w[perm], **kw_perm)
    _close(moved, base[perm])


@given(problems(kinds=("sinkhorn",)))
def test_sinkhorn_weights_are_doubly_stochastic_within_the_tolerance(problem):
    X, layer, w = problem
    P, info = attention_matrix(X, layer, w, return_info=True)
    mass = np.full(len(X), 1 / len(X)) if w is None else w
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)  # rows: exact
    assert info["marginal_error"] <= layer.sinkhorn_tol
    np.testing.assert_allclose(mass @ P, mass, rtol=layer.sinkhorn_tol * 1.01, atol=0)  # columns: within tol


@given(problems(kinds=("linear",), causal=True) | problems(kinds=("linear",)))
def test_linear_attention_second_moment_form_equals_the_dense_form(problem):
    X, layer, w = problem
    pos = np.arange(len(X), dtype=float)[::-1] if layer.causal else None  # reversed: not the index order
    fast = velocity(X, layer, w, positions=pos, backend="numpy")
    dense = velocity(X, layer, w, positions=pos, backend="dense")
    _close(fast, dense)


@given(
    problems(kinds=("softmax", "linear", "l2", "sigmoid"), max_n=8, max_d=3, weighted=False),
    st.sampled_from(["rk4", "euler", "adaptive"]),
)
def test_simulate_on_the_sphere_keeps_unit_norms(problem, method):
    X, layer, _ = problem
    X = X.copy()
    X[np.linalg.norm(X, axis=1) < 1e-3] = 1.0  # a token at the origin has no direction
    U = normalize_rows(X)
    kw = {"dt": 0.05} if method != "adaptive" else {"rtol": 1e-6, "atol": 1e-9}
    traj = simulate(U, layer, 0.5, method=method, sphere=True, **kw)
    np.testing.assert_allclose(np.linalg.norm(traj.X, axis=2), 1.0, atol=1e-12)


# ---- the validators and the batch layer (reliability): property-based ---------------------------------------------

from tokendynamics.ensembles import sample_clouds, simulate_batch  # noqa: E402
from tokendynamics.validation import validate_count, validate_flag, validate_rng  # noqa: E402


@given(st.integers(-(10**30), 10**30), st.integers(0, 5))
def test_validate_count_takes_exactly_the_integers_at_least_the_minimum(n, minimum):
    """An int (or a float with that integer value) >= minimum comes back as that int; anything below is refused."""
    if n >= minimum:
        assert validate_count(n, "n", minimum=minimum) == n
        if abs(n) < 2**52:
            assert validate_count(float(n), "n", minimum=minimum) == n
    else:
        with pytest.raises(ValueError, match="n must be an integer"):
            validate_count(n, "n", minimum=minimum)


@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=3), st.booleans(), st.none()))
def test_validate_count_refuses_non_integers_naming_the_argument(x):
    """A non-integral float, NaN, inf, a string, a bool or None is refused with the argument's name."""
    if isinstance(x, float) and np.isfinite(x) and float(x).is_integer() and x >= 1:
        return  # an integral float is a count
    with pytest.raises(ValueError, match="clouds must be an integer"):
        validate_count(x, "clouds")


@given(st.one_of(st.integers(), st.floats(), st.text(max_size=3), st.none(), st.lists(st.integers(0, 1), max_size=2)))
def test_validate_flag_takes_only_booleans(x):
    """Only True and False are flags: 0, 1, "yes", None, [] are refused (a truthy value is not True)."""
    with pytest.raises(ValueError, match="causal must be True or False"):
        validate_flag(x, "causal")


@given(st.one_of(st.floats(), st.text(max_size=4), st.booleans(), st.integers(-(2**40), -1)))
def test_validate_rng_refuses_what_is_not_a_seed_naming_rng(x):
    """Floats, strings, booleans and negative integers are not seeds: a TypeError naming ``rng``."""
    with pytest.raises(TypeError, match="rng must be None, an int seed"):
        validate_rng(x)


@given(st.integers(0, 2**63))
def test_validate_rng_equals_default_rng_on_seeds(seed):
    """A seed gives the generator ``numpy.random.default_rng(seed)`` gives."""
    assert validate_rng(seed).random() == np.random.default_rng(seed).random()


@given(
    st.sampled_from(("softmax", "linear", "l2", "sigmoid")),
    st.integers(2, 4),
    st.integers(2, 6),
    st.sampled_from(("euler", "rk4")),
    st.booleans(),
    st.integers(0, 2**31 - 1),
)
def test_member_b_of_a_batch_equals_its_own_run(kind, B, n, method, sphere, seed):
    """System b of ``simulate_batch`` equals ``simulate`` of that system alone (same scheme and step), to
    round-off, for every kind, on and off the sphere (there with a contracting flow); on the sphere every stored
    token has unit norm."""
    rng = np.random.default_rng(seed)
    X0 = sample_clouds(B, n, 2, rng)
    A = rng.uniform(-1, 1, (2, 2)) if sphere else -0.5 * np.eye(2)  # off the sphere: a contracting flow
    V = rng.uniform(-1, 1, (2, 2)) if sphere else (np.eye(2) if kind == "linear" else -np.eye(2))
    mats = {"Q": np.eye(2), "K": 0.5 * np.eye(2)} if kind == "l2" else {"A": A}
    layer = Attention(kind, V=V, beta=1.5, **mats)
    batch = simulate_batch(X0, layer, 1.0, dt=0.1, method=method, sphere=sphere, backend="numpy")
    b = int(rng.integers(B))
    alone = simulate(X0[b], layer, 1.0, dt=0.1, method=method, sphere=sphere)
    _close(batch.X[:, b], alone.X)
    if sphere:
        np.testing.assert_allclose(np.linalg.norm(batch.X, axis=-1), 1.0, atol=1e-12)
