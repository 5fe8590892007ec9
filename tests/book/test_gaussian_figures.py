"""Tests of ``tokendynamics.book.gaussian_figures``: paper 1's cone figures and rank histograms,
regenerated with the authors' protocol (faithful mode).
"""

from __future__ import annotations

import numpy as np
import pytest

from tokendynamics.book.gaussian_figures import (
    cached_rank_histograms,
    figure_setup,
    legacy_rng,
    official_layer,
    rank_histogram,
    run_figure,
)
from tokendynamics.gaussian import (
    blowup_time,
    covariance_eigenvalues,
    gaussian_rhs,
    projected_euler,
    rank_one_stationary_angles,
    solve_gaussian,
)

PAPER_F6 = {
    "softmax-identity": {3: [3, 48, 49, 0], 4: [11, 47, 42, 0, 0], 5: [0, 5, 54, 41, 0, 0]},
    "l2-identity": {3: [0, 32, 68, 0], 4: [0, 31, 69, 0, 0], 5: [0, 0, 46, 54, 0, 0]},
    "softmax-random": {3: [4, 64, 31, 0], 4: [21, 68, 11, 0, 0], 5: [0, 25, 64, 11, 0, 0]},
    "l2-random": {3: [0, 50, 50, 0], 4: [4, 64, 32, 0, 0], 5: [0, 22, 68, 10, 0, 0]},
}
PAPER_F6_ATTEMPTS = {
    ("softmax-identity", 5): 103,
    ("softmax-random", 3): 113,
    ("softmax-random", 4): 592,
    ("softmax-random", 5): 247,
    ("l2-random", 3): 101,
    ("l2-random", 4): 102,
    ("l2-random", 5): 107,
}


def rhs_softmax(S, Q, K, V):
    A1 = K.T @ Q / np.sqrt(S.shape[0])
    R = V @ S @ A1 @ S
    return R + R.T


def rhs_l2(S, Q, K, V):
    d = S.shape[0]
    A1 = K.T @ Q / np.sqrt(d)
    R = 2 * V @ S @ np.linalg.inv(np.eye(d) + 2 * K.T @ K @ S) @ A1 @ S
    return R + R.T


def rhs_multihead(S, Q, K, V, H):
    d = S.shape[0]
    k = d // H
    R = np.zeros((d, d))
    for h in range(H):
        rows = slice(k * h, k * (h + 1))
        A1 = K[rows].T @ Q[rows] / np.sqrt(k)
        C = np.eye(d)[rows].T @ V[rows]
        R += C @ S @ A1 @ S
    return R + R.T


@pytest.mark.claim("convergence-to-two-lines-figure")
def test_run_figure_two_lines_limits_are_rank_one_where_u_A_u_vanishes():
    """Paper 1 (Castin et al., arXiv 2501.18322), the convergence-to-two-lines cone figure (A + A^T indefinite):
    the softmax limits are rank one, on the two lines u^T A u = 0 (at -58.1 and -7.6 degrees).
    """
    setup = figure_setup("F3")
    layer = setup.layers["softmax"]
    angles = np.degrees(rank_one_stationary_angles(layer))
    assert np.allclose(np.sort(angles), [-58.1, -7.6], atol=0.05)
    runs = run_figure(setup, ["softmax"], save="final")["softmax"]
    ok = runs.status == "converged"
    assert ok.sum() == 263
    ratio = (lambda lam: lam[:, 1] / lam[:, 0])(covariance_eigenvalues(runs.cov_last[ok]))
    assert ratio.max() < 1e-4 and np.median(ratio) < 1e-6  # rank one, up to the stopping rule
    top = np.linalg.eigh(runs.cov_last[ok])[1][:, :, 1]
    ang = np.degrees(np.arctan(top[:, 1] / top[:, 0]))
    dist = np.min(np.abs(ang[:, None] - angles[None, :]), axis=1)
    assert np.all(dist < 0.01)
    assert min(int(np.sum(np.abs(ang - a) < 0.01)) for a in angles) > 100  # both lines are reached


@pytest.mark.claim("convergence-to-a-plane-figure")
def test_run_figure_multihead_conserves_sigma22_and_stops_on_the_plane():
    """Paper 1 (Castin et al., arXiv 2501.18322), the convergence-to-a-plane cone figure (two heads, one empty):
    Sigma_22 is conserved and the limits satisfy q1 Sigma_11 + q2 Sigma_12 = 0.
    """
    setup = figure_setup("F2")
    runs = run_figure(setup, ["multihead"], save="all")["multihead"]
    q = setup.matrices["q"]
    assert np.all(runs.status == "converged")
    for k in range(len(runs)):
        S = runs.saved_cov[k]
        assert np.abs(S[:, 1, 1] - S[0, 1, 1]).max() < 1e-12
    last = runs.cov_last
    # stationary points: the first row of Sigma q vanishes, q1 S11 + q2 S12 = 0 (to the stopping tolerance)
    assert np.abs(q[0] * last[:, 0, 0] + q[1] * last[:, 0, 1]).max() < 1e-3
    ode = solve_gaussian(np.zeros(2), setup.inits[3], setup.layers["multihead"], 200.0)
    assert abs(q[0] * ode.final_cov[0, 0] + q[1] * ode.final_cov[0, 1]) < 1e-8
    assert abs(ode.final_cov[1, 1] - setup.inits[3][1, 1]) < 1e-12


@pytest.mark.claim("official-figure-parameters")
def test_official_layer_reproduces_the_official_right_hand_sides():
    """Paper 1 (Castin et al., arXiv 2501.18322), the authors' code: its softmax, l2 and multi-head right-hand
    sides (paper convention A1 = K^T Q / sqrt(d)) are those of the layers the book builds for the figures.
    """
    rng = np.random.default_rng(0)
    for d in (2, 3, 4):
        for _ in range(3):
            L = rng.standard_normal((d, d))
            S = L @ L.T
            Q, K, V = (rng.standard_normal((d, d)) for _ in range(3))
            z = np.zeros(d)
            assert np.allclose(
                gaussian_rhs(z, S, official_layer("softmax", Q, K, V))[1],
                rhs_softmax(S, Q, K, V),
                rtol=1e-12,
                atol=1e-12,
            )
            assert np.allclose(
                gaussian_rhs(z, S, official_layer("l2", Q, K, V))[1], rhs_l2(S, Q, K, V), rtol=1e-10, atol=1e-10
            )
            if d % 2 == 0:
                assert np.allclose(
                    gaussian_rhs(z, S, official_layer("multihead", Q, K, V, H=2))[1],
                    rhs_multihead(S, Q, K, V, 2),
                    rtol=1e-12,
                    atol=1e-12,
                )
    # a one-row Q with two heads leaves the second head empty (the convergence-to-a-plane figure)
    q = np.array([[0.6, 0.8]])
    layer = official_layer("multihead", q, -q, np.eye(2), H=2)
    assert layer.n_heads == 2 and np.all(layer.A[1] == 0) and np.allclose(layer.A[0], -q.T @ q)


@pytest.mark.claim("official-figure-parameters")
def test_figure_setup_redraws_the_official_matrices_from_the_legacy_rng():
    """Paper 1 (Castin et al., arXiv 2501.18322), the authors' code: the matrices of every cone figure, redrawn
    from its seeds with NumPy's legacy generator, to the six printed decimals.
    """
    F1 = figure_setup("F1").matrices
    assert np.allclose(F1["Q"], [[0.458055, 0.308350], [0.231487, 0.277425]], atol=1e-6)
    assert np.allclose(F1["V"]["softmax"], [[2.669378, -0.691530], [-0.691530, 2.687446]], atol=1e-6)
    assert np.allclose(
        figure_setup("F1").layers["softmax"].A[0].T, [[-0.186252, -0.145283], [-0.145283, -0.121653]], atol=1e-6
    )
    F2 = figure_setup("F2").matrices
    assert np.allclose(F2["q"], [0.406324, 0.913729], atol=1e-6)
    assert np.allclose(F2["line"], [0.473622, -0.525055, 0.707107], atol=1e-6)
    F3 = figure_setup("F3")
    assert np.allclose(F3.matrices["Q"], [[0.676413, 1.521099], [-0.511876, 1.150195]], atol=1e-6)
    assert np.allclose(F3.matrices["K"], [[-0.590717, -0.768765], [-0.335009, 0.092999]], atol=1e-6)
    # paper 1's A = K^T Q / sqrt 2 is the transpose of the library's score matrix
    assert np.allclose(F3.layers["softmax"].A[0].T, [[-0.161281, -0.907829], [-0.401359, -0.751231]], atol=1e-6)
    assert np.allclose(F3.matrices["V"]["softmax"], [[-0.348894, 0.983703], [0.580923, 0.070284]], atol=1e-6)
    F4 = figure_setup("F4")
    assert np.allclose(F4.layers["softmax"].A[0].T, [[0.174072, 0.484521], [0.280218, 1.306821]], atol=1e-6)
    F5 = figure_setup("F5")
    assert np.allclose(F5.matrices["V"]["softmax"], [[1.831753, -0.376888], [0.348112, -0.116282]], atol=1e-6)
    assert legacy_rng(3).randn() == np.random.RandomState(3).randn()


@pytest.mark.claim("convergence-to-zero-figure")
def test_run_figure_convergence_to_zero_iteration_counts_within_one_and_final_traces():
    """Paper 1 (Castin et al., arXiv 2501.18322), the convergence-to-zero cone figure: the authors' iteration
    counts within one step, and every run of the grid ends near zero (final traces 0.0174-0.0176 for softmax).
    """
    setup = figure_setup("F1")
    expected = {
        "softmax": (5416, 0.01745),
        "l2": (3879, 0.01233),
        "multihead": (6173, 0.01983),
        "sinkhorn": (2749, 0.01467),
    }
    for variant, (iterations, trace) in expected.items():
        run = projected_euler(setup.inits[5], setup.layers[variant], save="final", **setup.solver[variant])
        assert run.status[0] == "converged"
        assert abs(int(run.iterations[0]) - iterations) <= 1
        assert abs(np.trace(run.cov_last[0]) - trace) < 1e-5
    # the whole grid converges towards zero (the authors' final traces: 0.0174-0.0175 for softmax)
    runs = run_figure(setup, ["softmax"], save="final")["softmax"]
    assert np.all(runs.status == "converged")
    traces = np.trace(runs.cov_last, axis1=1, axis2=2)
    assert 0.0174 < traces.min() and traces.max() < 0.0176


@pytest.mark.claim("blowup-figure")
@pytest.mark.slow
def test_run_figure_blowup_every_run_exits_and_exit_time_medians_match_the_paper():
    """Paper 1 (Castin et al., arXiv 2501.18322), the blow-up cone figure (A + A^T > 0, V = I): all 1184 runs exit,
    with the exit-time medians and ranges of the authors' runs; the closed-form T* has range [0.353, 8.94] and
    median 0.694.
    """
    setup = figure_setup("F4")
    assert len(setup.inits) == 1184
    runs = run_figure(setup, save="final")
    medians = {"softmax": 0.75, "multihead": 0.69, "l2": 19.3, "sinkhorn": 5.1}
    ranges = {"softmax": (0.40, 8.99), "multihead": (0.34, 19.6), "l2": (13.6, 32.6), "sinkhorn": (4.8, 9.9)}
    for variant, med in medians.items():
        r = runs[variant]
        assert np.all(r.status == "blowup"), variant
        assert abs(np.median(r.exit_time) - med) < 0.006 * max(1.0, med), (variant, np.median(r.exit_time))
        lo, hi = ranges[variant]
        assert abs(r.exit_time.min() - lo) < 0.01 * max(1, lo) and abs(r.exit_time.max() - hi) < 0.01 * hi
    # the closed-form blow-up time of the softmax panel (range [0.353, 8.94], median 0.694)
    Tstar = np.array([blowup_time(S, setup.layers["softmax"]) for S in setup.inits])
    assert abs(Tstar.min() - 0.353) < 1e-3 and abs(Tstar.max() - 8.94) < 1e-2 and abs(np.median(Tstar) - 0.694) < 1e-3
    # Euler exits late: every measured exit time is above T* (first-order lag)
    assert np.all(runs["softmax"].exit_time > Tstar - runs["softmax"].step)


@pytest.mark.claim("blowup-profile-is-rank-one")
def test_blowup_figure_normalised_endpoints_approach_rank_one():
    """Paper 1 (Castin et al., arXiv 2501.18322), the blow-up cone figure (A + A^T > 0, V = I): as the covariances
    blow up (softmax, two heads) or grow exponentially (l2, Sinkhorn) they become rank one: the normalised
    endpoints lie on the circle of the disc. Every 37th initial covariance of the official grid, with the
    official steps and thresholds.
    """
    setup = figure_setup("F4")
    for variant in ("softmax", "multihead", "l2", "sinkhorn"):
        runs = projected_euler(setup.inits[::37], setup.layers[variant], save="final", **setup.solver[variant])
        assert np.all(runs.status == "blowup"), variant
        lam = covariance_eigenvalues(runs.cov_last)
        ratio = lam[:, 1] / lam[:, 0]
        if variant in ("softmax", "multihead"):  # finite-time blow-up: rank one at the threshold
            assert ratio.max() < 1e-2, (variant, ratio.max())
        assert np.median(ratio) < 1e-3, (variant, np.median(ratio))


@pytest.mark.claim("convergence-to-two-lines-figure", "two-basins-figure")
def test_run_figure_two_lines_and_two_basins_outcome_counts_match_the_paper():
    """Paper 1 (Castin et al., arXiv 2501.18322), the two-lines and two-basins cone figures: the numbers of
    converged and blown-up runs of the authors' protocol (263 and 270 converge; 591 converge and 57 blow up; 6
    l2 runs exceed the threshold).
    """
    F3 = run_figure(figure_setup("F3"), ["softmax", "l2"], save="final")
    assert int(np.sum(F3["softmax"].status == "converged")) == 263
    assert int(np.sum(F3["l2"].status == "converged")) == 270
    F5 = run_figure(figure_setup("F5"), ["softmax", "l2"], save="final")
    assert int(np.sum(F5["softmax"].status == "blowup")) == 57
    assert int(np.sum(F5["softmax"].status == "converged")) == 591
    assert int(np.sum(F5["l2"].status == "blowup")) == 6


@pytest.mark.claim("two-basins-with-two-heads")
def test_two_basins_figure_with_two_heads_never_blows_up():
    """Paper 1 (Castin et al., arXiv 2501.18322), the two-basin cone figure: the authors' multi-head call omits the
    number of heads, so their panel is single-head softmax; the real two-head layer does not blow up within the
    step limit, and its trace decreases. Every 20th initial covariance of the official grid, official step and
    tolerance.
    """
    setup = figure_setup("F5")
    assert setup.layers["multihead"].n_heads == 2
    runs = projected_euler(setup.inits[::20], setup.layers["multihead"], save="final", **setup.solver["multihead"])
    assert not np.any(runs.status == "blowup")
    assert set(runs.status) <= {"max_iter", "converged"}
    traces = np.trace(runs.cov_last, axis1=1, axis2=2)
    assert np.all(traces < np.trace(setup.inits[::20], axis1=1, axis2=2))


@pytest.mark.claim("rank-histograms-figure", "rank-of-the-exact-limit")
@pytest.mark.slow
@pytest.mark.parametrize("row", list(PAPER_F6))
def test_rank_histogram_counts_equal_the_official_protocol(row):
    """Paper 1 (Castin et al., arXiv 2501.18322), the rank histograms of the limit covariance: every count of the
    official protocol, and for V = I the exact limits have rank ceil(d/2) (the smaller ranks come from the
    threshold 0.1).
    """
    hist = rank_histogram(row)
    for d, counts in PAPER_F6[row].items():
        assert hist.counts[d].tolist() == counts, (row, d)
        assert hist.attempts[d] == PAPER_F6_ATTEMPTS.get((row, d), 100)
        assert hist.exceptions[d] == (1 if (row, d) == ("softmax-random", 3) else 0)
    if row.endswith("identity"):
        # the exact limit has rank ceil(d/2) for every run: the histogram's smaller ranks come from
        # the threshold 0.1 applied to small (but non-zero) limit eigenvalues
        for d in hist.dims:
            lim = hist.limit_eigenvalues[d]
            assert np.all(np.sum(lim > 1e-10 * lim[:, :1], axis=1) == (d + 1) // 2)
            assert np.all(np.sum(hist.eigenvalues[d] > 0.1, axis=1) <= (d + 1) // 2)


@pytest.mark.claim("rank-histograms-figure")
def test_cached_rank_histograms_return_the_stored_counts_and_recompute_on_parameter_change(tmp_path, monkeypatch):
    """Paper 1 (Castin et al., arXiv 2501.18322), the rank histograms: cached with their parameters, recomputed
    when these change.
    """
    monkeypatch.setenv("TOKENDYNAMICS_DATA", str(tmp_path))
    calls = []
    import tokendynamics.book.gaussian_figures as gf

    real = gf.rank_histogram

    def counting(row, mode="fast", **kw):
        calls.append(row)
        return real(row, mode, dims=[3], max_attempts=5)

    monkeypatch.setattr(gf, "rank_histogram", counting)
    a = cached_rank_histograms(rows=["l2-identity"])
    b = cached_rank_histograms(rows=["l2-identity"])
    assert calls == ["l2-identity"]
    assert a["l2-identity"].counts[3].tolist() == b["l2-identity"].counts[3].tolist()
    assert (tmp_path / "gaussian_F6_l2-identity.npz").exists()
