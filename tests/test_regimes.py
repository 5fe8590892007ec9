"""Tests of ``tokendynamics.regimes``: the closed-form regimes of planar linear attention, the hidden Hamiltonian
and the classifier of the Ott-Antonsen flow.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.helpers import I2
from tokendynamics import sample_sphere
from tokendynamics.book.studies.highdim import clustering_time, make_case
from tokendynamics.book.studies.kuramoto import uniform_start_run
from tokendynamics.kuramoto import J, complex_parts, linear_layers, order_parameter, solve_phases
from tokendynamics.metrics import order_parameters
from tokendynamics.ott_antonsen import ott_antonsen_rhs, solve_ott_antonsen
from tokendynamics.projective import projective_flow
from tokendynamics.regimes import (
    REGIMES,
    case1_region,
    classify_regime,
    hamiltonian,
    hamiltonian_centre,
    predict_regime,
    rotation_period,
    snic_family,
)


def random_case1_matrices(count, seed):
    """Random A ~ N(0,1) with |tr A|, |det A|, |lambda_max(sym A)| >= 0.05 (degenerate neighbourhoods excluded)."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        A = rng.standard_normal((2, 2))
        if min(abs(np.trace(A)), abs(np.linalg.det(A)), abs(np.linalg.eigvalsh(0.5 * (A + A.T))[1])) < 0.05:
            continue
        out.append(A)
    return np.array(out)


@pytest.mark.claim("case1-regimes", "case1-limit-and-bistability")
def test_predict_regime_case1_agrees_with_oa_integration_on_200_random_A():
    """Paper 2 (Li et al., 2026), Case V = I: the (tr, det, sym-part) regions and the closed-form limits agree with the
    Ott-Antonsen flow.

    200 random A (degenerate neighbourhoods excluded) x z0 in {0, 0.5i, -0.6+0.3i}, T = 3000, one
    batched DOP853 run (rtol 1e-9; at T = 300 a few small-trace cases have not converged). Type P
    limits equal -a-/conj(a+) to 1e-6; boundary limits equal the exit point of the affine orbit;
    bistable A give only "boundary" or "z*".
    """
    As = random_case1_matrices(200, 2024)
    z0s = np.array([0.0, 0.5j, -0.6 + 0.3j])
    # one batch of 200 x 3 systems (layer i, datum j), in the order of an (i, j) grid
    layers = linear_layers(np.repeat(As, len(z0s), axis=0), I2)
    got = classify_regime(layers, np.tile(z0s, len(As)), T=3000.0, rtol=1e-9, atol=1e-11, details=True)
    regime, z_final = got.regime.reshape(len(As), len(z0s)), got.z_final.reshape(len(As), len(z0s))
    seen = set()
    for i, A in enumerate(As):
        region = case1_region(A)
        ap, am = complex_parts(A)
        zstar = -am / np.conj(ap)
        for j, z0 in enumerate(z0s):
            oa, zT = regime[i, j], z_final[i, j]
            seen.add((region, oa))
            if region in ("det<=0", "tr>0"):
                assert oa == "static_clusters", (A, z0)
            elif region == "sym_negative_definite":
                assert oa == "partial" and abs(zT - zstar) < 1e-6, (A, z0, zT, zstar)
            else:
                assert region == "bistable"
                assert (oa == "static_clusters") or (oa == "partial" and abs(zT - zstar) < 1e-6), (A, z0)
            pred = predict_regime(linear_layers(A, I2), z0)
            assert pred.case == "case1" and pred.regime == oa, (A, z0, pred, oa)
            assert abs(zT - pred.limit) < 1e-5, (A, z0, zT, pred.limit)
    # the draw covered every region, and both outcomes of the bistable wedge
    assert {
        ("det<=0", "static_clusters"),
        ("tr>0", "static_clusters"),
        ("sym_negative_definite", "partial"),
        ("bistable", "static_clusters"),
        ("bistable", "partial"),
    } <= seen


@pytest.mark.claim("case1-oscillation-period")
def test_predict_regime_case1_period_matches_the_measured_oscillation_period():
    """Paper 2 (Li et al., 2026), Case V = I on tr A = 0 < det A: oscillation with period
    4 pi / (beta |Im a+| sqrt((1 - |z*|^2 - r^2)^2 - 4 r^2 |z*|^2)).
    """
    for A, dz, beta in (
        (np.array([[0.2, 1.0], [-1.0, -0.2]]), -0.2j, 1.0),
        (np.array([[0.5, 1.5], [-0.7, -0.5]]), 0.15, 1.7),
    ):
        ap, am = complex_parts(A)
        zstar = -am / np.conj(ap)
        z0 = zstar + dz
        measured = rotation_period(linear_layers(A, I2, beta), z0, T=400.0, centre=zstar, transient=10.0)
        pred = predict_regime(linear_layers(A, I2, beta), z0)
        assert (pred.case, pred.regime) == ("case1", "oscillation")
        assert abs(measured / pred.period - 1) < 1e-3
    assert abs(predict_regime(linear_layers([[0.2, 1.0], [-1.0, -0.2]], I2), 0j).period - 13.711) < 1e-3  # the table
    # V = v I is Case 1 at beta |v| (A -> -A for v < 0)
    A = np.array([[0.2, 1.0], [-1.0, -0.2]])
    period = predict_regime(linear_layers(A, -2 * I2), 0j).period
    assert period == pytest.approx(predict_regime(linear_layers(-A, I2, 2.0), 0j).period)


@pytest.mark.claim("case2-clusters-iff-the-top-eigenvalue-is-nonnegative")
def test_predict_regime_case2_limit_on_197_random_symmetric_V():
    """Paper 2 (Li et al., 2026), Case A = I, V symmetric: |R2(inf)| = 1 iff lambda_max(V) >= 0; the limit is e^{2i
    theta1} or (l1 - l2)/|l1 + l2| e^{2i theta1} (1e-5).

    197 random symmetric V (|lambda_max| >= 0.05), z0 = 0.3+0.2i, T = 400, one batched run.
    """
    rng = np.random.default_rng(10)
    Vs = []
    while len(Vs) < 197:
        M = rng.standard_normal((2, 2))
        V = 0.5 * (M + M.T)
        if abs(np.linalg.eigvalsh(V)[1]) >= 0.05:
            Vs.append(V)
    Vs = np.array(Vs)
    sol = solve_ott_antonsen(0.3 + 0.2j, linear_layers(I2, Vs), (0.0, 400.0), t_eval=[400.0], rtol=1e-10, atol=1e-12)
    zT = sol.final
    mismatches = 0
    for V, z in zip(Vs, zT):
        lam, vec = np.linalg.eigh(V)
        l2, l1 = lam
        theta1 = math.atan2(vec[1, 1], vec[0, 1])
        expected = np.exp(2j * theta1) if l1 >= 0 else (l1 - l2) / abs(l1 + l2) * np.exp(2j * theta1)
        mismatches += abs(z - expected) >= 1e-5
        assert (abs(abs(z) - 1) < 1e-5) == (l1 >= 0)
        assert abs(predict_regime(linear_layers(I2, V)).limit - expected) < 1e-12
    assert mismatches == 0


@pytest.mark.claim("hidden-hamiltonian", "hidden-hamiltonian-energy")
def test_classify_regime_traceless_V_with_negative_det_goes_to_the_boundary_and_stops():
    """Paper 2 (Li et al., 2026), the hidden Hamiltonian: with det V < 0, |z| -> 1 and arg z converges (static
    clusters); the centre of V = [[0.5, 1], [-1, -0.5]] is at y_c = -0.1811.
    """
    for v11, v12 in ((1.5, 1.0), (1.0, 0.4), (-2.0, 0.5)):
        V = np.array([[v11, v12], [-v12, -v11]])
        c = classify_regime(linear_layers(I2, V), 0.3 + 0.2j, T=200.0, details=True)
        assert c.regime == "static_clusters" and c.min_modulus > 1 - 1e-3 and c.arg_range < 1e-3
    zc = hamiltonian_centre(np.array([[0.5, 1.0], [-1.0, -0.5]]))
    assert abs(zc - (-0.1811j)) < 1e-4  # y_c = -0.1811
    assert hamiltonian_centre(np.array([[1.5, 1.0], [-1.0, -1.5]])) is None


@pytest.mark.claim("rotating-clusters", "rotating-clusters-diagonal-family")
@pytest.mark.parametrize(
    "a1, a2, c, s, expected", [(2, 1, 1, 1, 2.2214415), (3, 0.5, 0.5, 2, 1.2825498), (1, 4, 0.2, -1, 1.5707963)]
)
def test_rotation_period_of_rotating_clusters_is_pi_over_beta_s_sqrt_a1_a2(a1, a2, c, s, expected):
    """Paper 2 (Li et al., 2026), rotating clusters for non-commuting A, V: A = diag(a1, a2) > 0, V = cI + sJ, c > 0:
    |z| -> 1 and period pi / (beta |s| sqrt(a1 a2)) (1e-6).
    """
    A = np.diag([float(a1), float(a2)])
    V = c * I2 + s * J
    # 15 periods after t = 100 (waiting until t = 200 changes nothing: the cycle attracts by a factor
    # exp(-pi c/|s|) per period, so by t = 100 the orbit is on it to round-off)
    P = rotation_period(linear_layers(A, V), 0.3 + 0.2j, T=100.0 + 15 * expected, transient=100.0)
    formula = math.pi / (abs(s) * math.sqrt(a1 * a2))
    assert abs(P / formula - 1) < 1e-6 and abs(formula - expected) < 1e-6
    assert predict_regime(linear_layers(A, V)).period == pytest.approx(formula, rel=1e-12)
    final = solve_ott_antonsen(0.3 + 0.2j, linear_layers(A, V), 100.0, t_eval=[100.0]).final
    assert abs(abs(final) - 1) < 1e-6


@pytest.mark.claim("saddle-node-on-the-circle")
@pytest.mark.parametrize("a", [0.0, 0.5, 0.9])
def test_rotation_period_on_the_snic_family_is_pi_over_sqrt_one_minus_a_squared(a):
    """Paper 2 (Li et al., 2026), the saddle-node on the circle: A = I, V = [[c+a, b], [-b, c-a]], c = 0.3, b = 1:
    period pi / (beta sqrt(1 - a^2)) (1e-6).

    Zero crossings of Im R2 after t = 400; stopping at T = 560 (>= 22 periods) rather than 800 changes nothing
    but the run time.
    """
    V = np.array([[0.3 + a, 1.0], [-1.0, 0.3 - a]])
    P = rotation_period(linear_layers(I2, V), 0.3 + 0.2j, T=560.0, transient=400.0)
    assert abs(P * math.sqrt(1 - a * a) / math.pi - 1) < 1e-6


@pytest.mark.claim("saddle-node-on-the-circle")
def test_classify_regime_beyond_the_saddle_node_is_static():
    """Paper 2 (Li et al., 2026), the saddle-node on the circle: a = 1.5 > b gives static clusters (no rotation:
    infinite period).
    """
    V = np.array([[1.8, 1.0], [-1.0, -1.2]])
    assert classify_regime(linear_layers(I2, V)) == "static_clusters"
    assert rotation_period(linear_layers(I2, V), 0.3 + 0.2j, T=200.0) == math.inf
    assert predict_regime(linear_layers(I2, V)).regime == "static_clusters"


@pytest.mark.claim("four-regimes")
def test_predict_regime_agrees_with_the_classifier_on_random_members_of_each_family():
    """Paper 2 (Li et al., 2026): closed forms (Case 2, hidden Hamiltonian, saddle-node family, rotating family)
    against the Ott-Antonsen classifier; every regime occurs.

    Degenerate neighbourhoods are excluded (|lambda_max|, |det V|, ||a|-|b||, c >= 0.1 away from 0). All 60
    layers are classified in one batched run (T = 200, the classifier's default).
    """
    rng = np.random.default_rng(22)
    layers = []
    while len(layers) < 60:
        family = len(layers) % 4
        if family == 0:  # Case 2
            M = rng.standard_normal((2, 2))
            A, V = I2, 0.5 * (M + M.T)
            if abs(np.linalg.eigvalsh(V)[1]) < 0.1:
                continue
        elif family == 1:  # traceless V
            v11, v12, v21 = rng.standard_normal(3)
            A, V = I2, np.array([[v11, v12], [v21, -v11]])
            if abs(np.linalg.det(V)) < 0.1:
                continue
        elif family == 2:  # SNIC family, rotated
            c = rng.choice([-1, 1]) * rng.uniform(0.1, 1.0)
            a, b = rng.uniform(0, 1.5, 2)
            if abs(abs(a) - abs(b)) < 0.1 or (c < 0 and abs(a) > abs(b)):
                continue
            R, _ = np.linalg.qr(rng.standard_normal((2, 2)))
            A, V = I2, R @ np.array([[c + a, b], [-b, c - a]]) @ R.T
        else:  # rotating family
            R, _ = np.linalg.qr(rng.standard_normal((2, 2)))
            A = R @ np.diag(rng.uniform(0.5, 3, 2)) @ R.T
            V = rng.uniform(0.2, 1.0) * I2 + rng.choice([-1, 1]) * rng.uniform(0.3, 2.0) * J
        layers.append((A, V))
    batch = linear_layers(np.array([a for a, _ in layers]), np.array([v for _, v in layers]))
    got = classify_regime(batch, 0.3 + 0.2j, T=200.0)
    for (A, V), oa in zip(layers, got):
        pred = predict_regime(linear_layers(A, V), 0.3 + 0.2j)
        assert pred is not None and pred.regime == oa, (A, V, pred, oa)
    assert set(got) == set(REGIMES)


@pytest.mark.claim("regime-table")
def test_predict_regime_returns_none_outside_the_families_and_at_degenerate_points():
    """Paper 2 (Li et al., 2026): the closed forms cover their families only; elsewhere the prediction is None."""
    assert predict_regime(linear_layers([[1.0, 2.0], [0.5, -1.0]], [[0.3, 1.0], [2.0, 0.1]])) is None
    assert predict_regime(linear_layers(I2, [[1.0, 1.0], [-1.0, -1.0]])) is None  # det V = 0: SNIC, Hamiltonian family
    with pytest.raises(ValueError, match="disk"):
        predict_regime(linear_layers(I2, I2), 2.0)


@pytest.mark.claim("hidden-hamiltonian", "hidden-hamiltonian-energy")
def test_hamiltonian_is_conserved_orbits_close_and_the_centre_is_an_equilibrium():
    """Paper 2 (Li et al., 2026), the hidden Hamiltonian: A = I, tr V = 0, det V > 0: E(z(t)) is constant (1e-8
    relative), orbits close (1e-3) and the closed-form centre is an equilibrium (1e-12).
    """
    rng = np.random.default_rng(16)
    checked = 0
    while checked < 6:
        v11, v12, v21 = rng.standard_normal(3)
        V = np.array([[v11, v12], [v21, -v11]])
        if np.linalg.det(V) < 0.05:
            continue
        checked += 1
        zc = hamiltonian_centre(V)
        layer = linear_layers(I2, V)
        assert abs(ott_antonsen_rhs(zc, layer)) < 1e-12
        z0 = zc + 0.3 * (1 - abs(zc)) * np.exp(1j * rng.uniform(0, 6))
        period = rotation_period(layer, z0, T=80.0, centre=zc, transient=0.0)
        t = np.linspace(0, 2 * period, 801)
        sol = solve_ott_antonsen(z0, layer, (0.0, 2 * period), t_eval=t, rtol=1e-11, atol=1e-13)
        E = hamiltonian(sol.z, layer)
        assert np.ptp(E) / abs(E[0]) < 1e-8
        back = solve_ott_antonsen(z0, layer, (0.0, period), t_eval=[period], rtol=1e-11, atol=1e-13).final
        assert abs(back - z0) < 1e-3


@pytest.mark.claim("hidden-hamiltonian", "hidden-hamiltonian-energy")
def test_hamiltonian_field_identity():
    """Paper 2 (Li et al., 2026), the hidden Hamiltonian: z' = -2i (1 - |z|^2)^3 dE/d conj(z) (central differences)."""
    rng = np.random.default_rng(17)
    for _ in range(5):
        v11, v12, v21 = rng.standard_normal(3)
        V = np.array([[v11, v12], [v21, -v11]])
        beta = rng.uniform(0.5, 2)
        z = 0.7 * np.sqrt(rng.uniform(0, 1, 20)) * np.exp(1j * rng.uniform(0, 7, 20))
        h = 1e-6
        layer = linear_layers(I2, V, beta)
        dEx = (hamiltonian(z + h, layer) - hamiltonian(z - h, layer)) / (2 * h)
        dEy = (hamiltonian(z + 1j * h, layer) - hamiltonian(z - 1j * h, layer)) / (2 * h)
        dE_dzbar = 0.5 * (dEx + 1j * dEy)
        lhs = ott_antonsen_rhs(z, layer)
        rhs = -2j * (1 - np.abs(z) ** 2) ** 3 * dE_dzbar
        assert np.max(np.abs(lhs - rhs)) < 1e-7 * max(1, np.abs(lhs).max())
    with pytest.raises(ValueError, match="tr V = 0"):
        hamiltonian(0.1, linear_layers(I2, I2))
    with pytest.raises(ValueError, match="A = I"):
        hamiltonian(0.1, linear_layers(2 * I2, np.array([[0.5, 1.0], [-1.0, -0.5]])))


@pytest.mark.claim("oscillation-to-clustering-transition")
def test_traceless_period_diverges_like_a_power_at_the_transition():
    """Paper 2 (Li et al., 2026), oscillation -> clustering: A = I, V = [[a, 1], [-1, -a]] from z0 = 0; the period
    of the closed orbit grows monotonically as eps = 1 - a -> 0, like eps^p with a fitted p in (-0.6, -0.4) (about
    -0.46 on eps = 0.02 ... 0.0025), and the amplitude max |R2| increases towards 1.
    """
    eps = np.array([0.02, 0.01, 0.005, 0.0025])
    runs = [uniform_start_run(1 - e, 0.0, 1.0, 8.0 / np.sqrt(e), points=8001) for e in eps]
    P, amp = np.array([r[2] for r in runs]), np.array([r[3] for r in runs])
    slope = np.polyfit(np.log(eps), np.log(P), 1)[0]
    assert np.all(np.diff(P) > 0) and np.all(np.diff(amp) > 0) and amp[-1] > 0.95
    assert -0.6 < slope < -0.4


@pytest.mark.claim("oscillation-to-clustering-transition")
def test_regime_flips_across_the_transition_in_the_closed_forms_and_the_flow():
    """Paper 2 (Li et al., 2026): V = snic_family(a, 1, c) at a = 1 -+ 0.02: c = 0 oscillation -> static, c = 0.3
    rotating -> static (closed forms and the Ott-Antonsen classifier); a = 1 itself is degenerate (no closed form).
    """
    for c, below in ((0.0, "oscillation"), (0.3, "rotating_clusters")):
        for a, expected in ((0.98, below), (1.02, "static_clusters")):
            layer = linear_layers(I2, snic_family(a, 1.0, c))
            assert predict_regime(layer).regime == expected
            assert classify_regime(layer, T=400.0, method="rk4", dt=0.01) == expected
        assert predict_regime(linear_layers(I2, snic_family(1.0, 1.0, c))) is None


@pytest.mark.claim("oscillation-to-clustering-transition")
def test_particles_agree_with_the_reduction_across_the_transition():
    """Paper 2 (Li et al., 2026): 64 equispaced tokens (particle system) against the Ott-Antonsen run from z0 = 0:
    period and amplitude to 1e-4 below the transition; the particles' regime is the closed form's at sampled (a, c).
    """
    for a in (0.5, 0.9):
        oa = uniform_start_run(a, 0.0, 1.0, 40.0)
        part = uniform_start_run(a, 0.0, 1.0, 40.0, n=64, rtol=1e-8, points=1601)
        assert abs(part[2] / oa[2] - 1) < 1e-4 and abs(part[3] - oa[3]) < 1e-4
    for a, c in ((0.5, 0.0), (1.5, 0.0), (0.8, 0.2), (0.3, -0.2), (1.1, -0.8)):
        regime = uniform_start_run(a, c, 1.0, 40.0, n=64, rtol=1e-8, points=801)[4]
        assert regime == predict_regime(linear_layers(I2, snic_family(a, 1.0, c))).regime


@pytest.mark.claim("one-cluster-needs-a-half-plane")
def test_the_same_lines_end_in_one_cluster_from_one_half_plane_and_in_two_from_another():
    """Paper 2 (Li et al., 2026), the sign symmetry of linear attention: A = I, V = diag(2, -1), 40 equispaced
    lines as tokens in x1 > 0 end in one cluster (|R1| -> 1), as tokens in x2 > 0 in two balanced antipodal
    ones (R1 -> 0); both have |R2| -> 1 and the same lines e^{2 i theta} at every time.
    """
    lines = -np.pi / 2 + np.pi * (np.arange(40) + 0.5) / 40
    starts = np.stack([lines, np.where(lines < 0, lines + np.pi, lines)])
    sol = solve_phases(starts, linear_layers(I2, np.diag([2.0, -1.0])), 20.0, t_eval=np.linspace(0, 20, 201))
    R1, R2 = (np.abs(order_parameter(sol.theta[-1], m)) for m in (1, 2))
    assert R1[0] > 0.99 and R1[1] < 0.05 and np.all(R2 > 0.99)
    assert np.max(np.abs(np.exp(2j * sol.theta[:, 0]) - np.exp(2j * sol.theta[:, 1]))) < 1e-8


@pytest.mark.claim("one-cluster-needs-a-half-plane")
def test_flipping_the_tokens_behind_the_hyperplane_of_phi_gives_one_cluster_in_d5():
    """Paper 2 (Li et al., 2026): d = 5, 40 uniform tokens, the Case 2 recipe (top eigenvalue 2): two antipodal
    clusters whose sizes are the split of the start by w^perp (w the top right-singular vector of Phi(T), the
    exact reduction); the same tokens flipped onto w's side end in one cluster (hat R1 = hat R2 = 1).
    """
    layer = make_case("case2", 5, 42).layer("linear")
    X0 = sample_sphere(40, 5, 1)
    traj, Phi = projective_flow(X0, layer, 60.0, return_phi=True)
    side = np.sign(X0 @ np.linalg.svd(Phi[-1])[2][0])
    assert 0 < np.sum(side > 0) < 40 and order_parameters(traj.X[-1])[1] > 0.999
    mean = np.linalg.norm(traj.X[-1].mean(axis=0))
    assert abs(mean - abs(side.sum()) / 40) < 1e-6
    R1, R2 = order_parameters(projective_flow(X0 * side[:, None], layer, 60.0).X[-1])
    assert R1 > 0.999 and R2 > 0.999


@pytest.mark.claim("clustering-slows-down-near-the-boundary-at-high-dimension")
def test_clustering_time_grows_near_the_boundary_at_d30_and_levels_off_in_the_plane():
    """Paper 2 (Li et al., 2026), Case 4 recipe (A = I, traceless blocks, b = 1, a = 1 + eps), 60 uniform tokens,
    3 samples: the time to hat R2 = 0.9 grows in every sample at d = 30 as eps = 0.1, 0.01, 0.001, its median
    by more than 1.6x per decade; at d = 2 the median grows by less than 1.3x over the last decade.
    """
    eps = (0.1, 0.01, 0.001)
    times = {
        d: np.array([[clustering_time("case4", d=d, n=60, T=5000.0, level=0.9, seed=s, a=1 + e, b=1.0)["t_level"]
                      for s in range(3)] for e in eps])
        for d in (30, 2)
    }  # fmt: skip
    assert np.all(np.diff(times[30], axis=0) > 0)
    assert np.all(np.diff(np.log(np.median(times[30], axis=1))) > np.log(1.6))
    assert np.median(times[2][-1]) < 1.3 * np.median(times[2][-2])
