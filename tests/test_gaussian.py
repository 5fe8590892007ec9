"""Tests of ``tokendynamics.gaussian``: the affine field on Gaussians, the mean and covariance ODEs,
their closed forms and solvers.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.integrate
import scipy.linalg

from tests.helpers import A_MILD, K_MILD, M0, Q_MILD, S0, V_MILD
from tokendynamics import Attention, BlowUpError, simulate, velocity
from tokendynamics.book.gaussian_figures import (
    figure_setup,
    official_layer,
)
from tokendynamics.book.studies.gaussian import compare_with_particles, cone_grid
from tokendynamics.gaussian import (
    GAUSSIAN_KINDS,
    NotGaussianPreservingError,
    blowup_time,
    clustering_limit,
    covariance_eigenvalues,
    decoupled_mean,
    empirical_moments,
    gauss_hermite,
    gaussian_rhs,
    gaussian_velocity,
    growth_rate,
    isotropic_covariance,
    one_dimensional_solution,
    projected_euler,
    rank_one_velocity,
    solve_gaussian,
)


def layers_2d(rng=None):
    """One layer of every Gaussian-preserving variant, with generic non-symmetric matrices."""
    rng = np.random.default_rng(3 if rng is None else rng)
    A = 0.5 * rng.standard_normal((2, 2))
    V = rng.standard_normal((2, 2))
    Q = 0.5 * rng.standard_normal((2, 2))
    K = 0.5 * rng.standard_normal((2, 2))
    return {
        "softmax": Attention("softmax", A=A, V=V),
        "softmax-beta": Attention("softmax", A=A, V=V, beta=1.7),
        "multihead": Attention("softmax", A=np.stack([A, A.T]), V=np.stack([V, np.eye(2)])),
        "l2": Attention("l2", Q=Q, K=K, V=V),
        "l2-beta-multihead": Attention(
            "l2", Q=np.stack([Q, K]), K=np.stack([K, Q]), V=np.stack([V, np.eye(2)]), beta=0.6
        ),
        "sinkhorn": Attention("sinkhorn", A=A, V=V, sinkhorn_tol=1e-13),
        "sinkhorn-eps": Attention("sinkhorn", A=A, V=V, eps=0.3, beta=0.7, sinkhorn_tol=1e-13),
        "linear": Attention("linear", A=A, V=V),
    }


def weighted_moments(X, w):
    m = np.einsum("j,...ja->...a", w, X)
    Y = X - m[..., None, :]
    return m, np.einsum("j,...ja,...jb->...ab", w, Y, Y)


def _official_sinkhorn_rhs(S, A1, V):
    """The official code's Sinkhorn right-hand side (sqrtm / pinv form), paper-1 matrix A1."""
    d = S.shape[0]
    root = scipy.linalg.sqrtm(S).real
    prod = root @ A1.T
    C_S = 0.5 * (root @ scipy.linalg.sqrtm(4 * prod @ S @ prod.T + np.eye(d)).real @ np.linalg.pinv(root) - np.eye(d))
    R = V @ np.linalg.pinv(A1.T) @ np.linalg.pinv(S) @ C_S @ S
    return R + R.T


def _embed(layer, d, rng):
    kw = dict(beta=layer.beta)
    if layer.kind.name == "sinkhorn":
        kw["eps"] = layer.eps
    V = 0.5 * rng.standard_normal((layer.n_heads, d, d))
    if layer.kind.name == "l2":
        return Attention(
            "l2",
            Q=0.5 * rng.standard_normal((layer.n_heads, d, d)),
            K=0.5 * rng.standard_normal((layer.n_heads, d, d)),
            V=V,
            **kw,
        )
    return Attention(layer.kind, A=0.5 * rng.standard_normal((layer.n_heads, d, d)), V=V, **kw)


@pytest.mark.claim("gaussians-stay-gaussian")
@pytest.mark.parametrize("name", list(layers_2d()))
def test_gaussian_velocity_is_the_field_on_a_gauss_hermite_quadrature_of_the_gaussian(name):
    """Paper 1 (Castin et al., arXiv 2501.18322): Gaussians stay Gaussian because the field on N(alpha, Sigma) is
    affine, b + M x; here it is evaluated by the particle core on Gauss-Hermite quadrature weights.
    """
    layer = layers_2d()[name]
    X, w = gauss_hermite(M0, S0, 30)
    from tokendynamics import velocity

    U = velocity(X, layer, w)
    b, M = gaussian_velocity(M0, S0, layer)
    near = np.linalg.norm(X - M0, axis=1) < 1.5  # where the quadrature resolves the tilted integrals
    assert np.max(np.abs(U - (b + X @ M.T))[near]) < 1e-10


@pytest.mark.claim("score-convention", "clustering-condition-in-the-books-convention")
def test_solve_gaussian_follows_the_score_x_A_y_and_not_its_transpose():
    """The book's convention: Paper 1 (Castin et al., arXiv 2501.18322)'s softmax covariance equation V S A1 S + S
    A1^T S V^T reads V S A^T S + S A S V^T with A1 = A^T; the transposed matrix gives a visibly different ODE.
    """
    layer = Attention("softmax", A=A_MILD, V=V_MILD)
    layer_T = Attention("softmax", A=A_MILD.T, V=V_MILD)
    X, w = gauss_hermite(M0, S0, 20)
    traj = simulate(X, layer, 0.5, dt=0.025, weights=w)
    m, C = weighted_moments(traj.X[-1], w)
    right = solve_gaussian(M0, S0, layer, 0.5)
    wrong = solve_gaussian(M0, S0, layer_T, 0.5)
    assert np.abs(right.final_cov - C).max() < 1e-9 and np.abs(right.final_mean - m).max() < 1e-8
    assert np.abs(wrong.final_cov - C).max() > 1e-2 or np.abs(wrong.final_mean - m).max() > 1e-2
    # in library terms the softmax covariance equation is V S A^T S + S A S V^T
    _, dS = gaussian_rhs(M0, S0, layer)
    assert np.allclose(dS, V_MILD @ S0 @ A_MILD.T @ S0 + S0 @ A_MILD @ S0 @ V_MILD.T, atol=1e-15)


@pytest.mark.claim("unnormalised-and-sigmoid-do-not-preserve-gaussians")
@pytest.mark.parametrize("kind", ["unnormalized_softmax", "sigmoid"])
def test_gaussian_velocity_refuses_variants_that_do_not_preserve_gaussians(kind):
    """Paper 1 (Castin et al., arXiv 2501.18322): unnormalised softmax and sigmoid attention (and causal layers) do
    not preserve Gaussians; the Gaussian solver says so instead of returning a wrong ODE.
    """
    layer = Attention(kind, A=A_MILD, V=V_MILD)
    with pytest.raises(NotGaussianPreservingError, match="not affine"):
        gaussian_velocity(M0, S0, layer)
    with pytest.raises(NotGaussianPreservingError):
        solve_gaussian(M0, S0, layer, 1.0)
    with pytest.raises(NotGaussianPreservingError, match="causal"):
        gaussian_velocity(M0, S0, Attention("softmax", A=A_MILD, V=V_MILD, causal=True))
    assert set(GAUSSIAN_KINDS) == {"softmax", "linear", "l2", "sinkhorn"}


@pytest.mark.claim("unnormalised-and-sigmoid-do-not-preserve-gaussians")
def test_gaussian_velocity_of_unnormalised_and_sigmoid_attention_is_not_affine():
    """Paper 1 (Castin et al., arXiv 2501.18322): unnormalised softmax and sigmoid attention do not preserve
    Gaussians, because their field on N(alpha, Sigma) is not affine: the best affine fit of the mean-field field
    (particle core on Gauss-Hermite quadrature weights) misses it by far more than for softmax, whose field is
    affine to round-off.
    """
    X, w = gauss_hermite(M0, S0, 20)
    near = np.linalg.norm(X - M0, axis=1) < 1.5  # where the quadrature resolves the tilted integrals
    design = np.c_[np.ones(near.sum()), X[near]]

    def affine_misfit(kind):
        U = velocity(X, Attention(kind, A=A_MILD, V=V_MILD), w)[near]
        coef, *_ = np.linalg.lstsq(design, U, rcond=None)
        return np.abs(design @ coef - U).max()

    assert affine_misfit("softmax") < 1e-12
    for kind in ("unnormalized_softmax", "sigmoid"):
        assert affine_misfit(kind) > 1e-3, kind


@pytest.mark.parametrize(
    "cov, message",
    [
        (np.array([[1.0, 0.0], [0.0, -0.5]]), "positive semi-definite"),
        (np.array([[1.0, 0.3], [0.0, 1.0]]), "symmetric"),
        (np.array([[np.nan, 0.0], [0.0, 1.0]]), "non-finite"),
        (np.eye(3), "3 x 3|2 x 2"),
    ],
)
def test_solve_gaussian_rejects_bad_covariances(cov, message):
    layer = Attention("softmax", A=A_MILD, V=V_MILD)
    with pytest.raises(ValueError, match=message):
        solve_gaussian(M0, cov, layer, 1.0)


def test_gaussian_solvers_reject_bad_arguments():
    layer = Attention("softmax", A=A_MILD, V=V_MILD)
    with pytest.raises(ValueError, match="mean has dimension"):
        gaussian_velocity([0.0, 0.0, 0.0], S0, layer)
    with pytest.raises(TypeError, match="t_span"):
        solve_gaussian(M0, S0, layer)
    with pytest.raises(ValueError, match="step"):
        projected_euler(S0, layer, step=0.0)
    with pytest.raises(ValueError, match="mode"):
        solve_gaussian(M0, S0, layer, 1.0, mode="euler")
    with pytest.raises(ValueError, match="save"):
        projected_euler(S0, layer, step=0.1, save="some")


@pytest.mark.claim("gaussians-stay-gaussian")
@pytest.mark.parametrize("name", ["softmax", "multihead", "l2", "sinkhorn", "linear"])
def test_solve_gaussian_is_the_mean_field_pde_from_the_gaussian_itself(name):
    """Paper 1 (Castin et al., arXiv 2501.18322): the Transformer PDE started from N(alpha_0, Sigma_0)
    (quadrature-weighted particles) follows the mean and covariance ODEs to the time-stepping error.
    """
    layer = {
        "softmax": Attention("softmax", A=A_MILD, V=V_MILD),
        "multihead": Attention("softmax", A=np.stack([A_MILD, A_MILD.T]), V=np.stack([V_MILD, np.eye(2)])),
        "l2": Attention("l2", Q=Q_MILD, K=K_MILD, V=V_MILD),
        "sinkhorn": Attention("sinkhorn", A=A_MILD, V=V_MILD),
        "linear": Attention("linear", A=A_MILD, V=V_MILD),
    }[name]
    X, w = gauss_hermite(M0, S0, 14 if name == "sinkhorn" else 20)
    traj = simulate(X, layer, 0.5, dt=0.0125, weights=w)  # RK4 error ~ 1e-9
    m, C = weighted_moments(traj.X, w)
    ode = solve_gaussian(M0, S0, layer, 0.5, t_eval=traj.t)
    assert np.abs(ode.mean - m).max() < 1e-8
    assert np.abs(ode.cov - C).max() < 1e-8


@pytest.mark.claim("gaussian-1d-exact-solution")
def test_one_dimensional_solution_matches_the_ode_the_pde_and_particles():
    """Paper 1 (Castin et al., arXiv 2501.18322): the closed-form solution in d = 1 is the ODE's, the mean-field
    PDE's and, up to the sampling error, the particles'; it reports its blow-up time.
    """
    for a, v in [(-1.0, 1.0), (0.4, 0.8), (0.7, -0.5)]:
        layer = Attention("softmax", A=[[a]], V=[[v]])
        t = np.linspace(0, 0.8, 9)
        mean, var = one_dimensional_solution(0.5, 0.6, layer, t)
        ode = solve_gaussian([0.5], [[0.6]], layer, 0.8, t_eval=t)
        assert np.abs(ode.mean[:, 0] - mean).max() < 1e-9
        assert np.abs(ode.cov[:, 0, 0] - var).max() < 1e-9
        X, w = gauss_hermite([0.5], [[0.6]], 40)  # the mean-field PDE from the Gaussian itself
        pde = simulate(X, layer, 0.8, dt=0.0125, weights=w, save_every=8)
        m, C = weighted_moments(pde.X, w)
        assert np.abs(m[:, 0] - mean).max() < 1e-7 and np.abs(C[:, 0, 0] - var).max() < 1e-7
    layer = Attention("softmax", A=[[-0.5]], V=[[1.0]])
    comp = compare_with_particles(layer, [0.5], [[0.3]], n=500, T=1.0, dt=0.1, seed=2)
    mean, var = one_dimensional_solution(comp.particle_mean[0, 0], comp.particle_cov[0, 0, 0], layer, comp.t)
    assert np.abs(comp.particle_cov[:, 0, 0] - var).max() < 1e-2  # sampling error (n = 500)
    assert np.abs(comp.particle_mean[:, 0] - mean).max() < 1e-2
    with pytest.raises(BlowUpError, match="blows up at T") as info:
        one_dimensional_solution(0.0, 1.0, Attention("softmax", A=[[1.0]], V=[[1.0]]), [0.2, 1.0])
    assert info.value.time == pytest.approx(0.5) and info.value.last_good_time == pytest.approx(0.2)


@pytest.mark.claim("sinkhorn-ode-equals-the-official-formula")
def test_gaussian_rhs_sinkhorn_equals_the_official_formula_for_invertible_A():
    """Paper 1 (Castin et al., arXiv 2501.18322), the authors' code: its Sinkhorn covariance right-hand side (sqrtm
    / pinv form, for invertible A) equals the book's formula from the entropic plan of the Gaussian onto itself.
    """
    rng = np.random.default_rng(11)
    for d in (2, 3, 4):
        for _ in range(5):
            L = rng.standard_normal((d, d))
            S = L @ L.T / d
            A1 = rng.standard_normal((d, d))  # paper-1 matrix; the library's A is its transpose
            V = rng.standard_normal((d, d))
            _, dS = gaussian_rhs(np.zeros(d), S, Attention("sinkhorn", A=A1.T, V=V))
            ref = _official_sinkhorn_rhs(S, A1, V)
            assert np.abs(dS - ref).max() < 1e-10 * max(1.0, np.abs(ref).max())


@pytest.mark.claim("sinkhorn-energy-limits")
def test_gaussian_rhs_sinkhorn_tends_to_softmax_for_small_scores():
    """Paper 1 (Castin et al., arXiv 2501.18322): for small scores (large eps) Sinkhorn attention is softmax
    attention with A / eps to first order.
    """
    rng = np.random.default_rng(4)
    A, V = rng.standard_normal((2, 2)), rng.standard_normal((2, 2))
    for eps in (10.0, 100.0):
        _, dsk = gaussian_rhs(M0, S0, Attention("sinkhorn", A=A, V=V, eps=eps))
        _, dsm = gaussian_rhs(M0, S0, Attention("softmax", A=A / eps, V=V))
        assert np.abs(dsk - dsm).max() < 2.0 / eps**2


@pytest.mark.claim("isotropic-value-precision-is-linear", "covariance-converges-despite-non-convexity")
def test_isotropic_covariance_precision_is_linear_in_time():
    """Paper 1 (Castin et al., arXiv 2501.18322): with V = v I the precision is linear in time, Sigma_t^{-1} =
    Sigma_0^{-1} - v t (A + A^T).
    """
    rng = np.random.default_rng(2)
    for d, v in [(2, 1.0), (3, 0.7), (4, -0.4)]:
        A = 0.4 * rng.standard_normal((d, d))
        L = rng.standard_normal((d, d))
        cov0 = L @ L.T / d
        layer = Attention("softmax", A=A, V=v * np.eye(d))
        T = 0.5 * min(1.0, blowup_time(cov0, layer))
        t = np.linspace(0, T, 6)
        ode = solve_gaussian(np.zeros(d), cov0, layer, T, t_eval=t)
        exact = isotropic_covariance(cov0, layer, t)
        assert np.abs(ode.cov - exact).max() < 1e-10 * max(1.0, np.abs(exact).max())
        prec = np.linalg.inv(ode.cov[-1])
        assert np.abs(prec - (np.linalg.inv(cov0) - v * T * (A + A.T))).max() < 1e-8


@pytest.mark.claim("blowup-time-closed-form")
def test_blowup_time_matches_the_event_time_and_exists_iff_v_sym_part_has_a_positive_eigenvalue():
    """Paper 1 (Castin et al., arXiv 2501.18322): with V = v I and Sigma_0 > 0 the covariance blows up iff v (A +
    A^T) has a positive eigenvalue, at T* = 1 / lambda_max(v Sigma_0^{1/2} (A + A^T) Sigma_0^{1/2}).
    """
    rng = np.random.default_rng(8)
    checked = 0
    for _ in range(12):
        d = int(rng.integers(2, 5))
        A = rng.standard_normal((d, d)) / d
        v = float(rng.choice([-1.0, 0.5, 1.0]))
        L = rng.standard_normal((d, d))
        cov0 = L @ L.T / d
        layer = Attention("softmax", A=A, V=v * np.eye(d))
        Tstar = blowup_time(cov0, layer)
        has_positive = np.linalg.eigvalsh(v * (A + A.T))[-1] > 0
        assert math.isfinite(Tstar) == has_positive
        if has_positive:
            ode = solve_gaussian(np.zeros(d), cov0, layer, 2 * Tstar + 1)
            assert ode.status == "blowup"
            assert abs(ode.blowup_time - Tstar) < 1e-3 * Tstar
            assert abs(ode.info["blowup_time_extrapolated"] - Tstar) < 1e-6 * Tstar
            checked += 1
    assert checked >= 4
    negdef = Attention("softmax", A=-np.eye(2), V=np.eye(2))
    assert blowup_time(S0, negdef) == math.inf
    assert solve_gaussian(M0, S0, negdef, 50.0).status == "completed"


@pytest.mark.claim("blowup-time-closed-form")
def test_solve_gaussian_reports_the_blowup_with_its_time_or_raises():
    """Paper 1 (Castin et al., arXiv 2501.18322): a finite-time blow-up is reported with its time (the accurate
    solver and the authors' projected Euler scheme), or raised.
    """
    layer = Attention("softmax", A=np.eye(2), V=np.eye(2))
    Tstar = blowup_time(S0, layer)
    with pytest.raises(BlowUpError, match="blow-up detected at t = ") as info:
        solve_gaussian(M0, S0, layer, 10.0, on_blowup="raise")
    assert abs(info.value.time - Tstar) < 1e-3 * Tstar
    with pytest.raises(BlowUpError):
        isotropic_covariance(S0, layer, 2 * Tstar)
    faithful = projected_euler(S0, layer, step=0.01, save="all")
    assert faithful.status[0] == "blowup" and Tstar - 0.05 < faithful.exit_time[0] < Tstar + 0.2
    assert np.all(np.isfinite(faithful.saved_cov[0]))


@pytest.mark.claim("blowup-profile-is-rank-one")
def test_isotropic_covariance_becomes_rank_one_at_the_blowup(rng):
    """Paper 1 (Castin et al., arXiv 2501.18322): at a finite-time blow-up with V = v I the normalised covariance
    tends to the rank-one matrix along Sigma_0^(1/2) e, e the top eigenvector of Sigma_0^(1/2) (A + A^T)
    Sigma_0^(1/2): it depends on Sigma_0, and lambda_min / lambda_max vanishes like 1 - t / T*.
    """
    rng = np.random.default_rng(31)
    d = 3
    layer = Attention("softmax", A=rng.standard_normal((d, d)) / d + 0.3 * np.eye(d), V=0.8 * np.eye(d))
    limits = []
    for _ in range(2):
        L = rng.standard_normal((d, d))
        cov0 = L @ L.T / d + 0.1 * np.eye(d)
        Tstar = blowup_time(cov0, layer)
        root = scipy.linalg.sqrtm(cov0).real
        e = np.linalg.eigh(root @ (layer.A[0] + layer.A[0].T) @ root)[1][:, -1]
        u = root @ e / np.linalg.norm(root @ e)
        for eps in (1e-2, 1e-4, 1e-6):
            S = isotropic_covariance(cov0, layer, [(1 - eps) * Tstar])[0]
            lam = np.linalg.eigvalsh(S)
            assert lam[0] / lam[-1] < 10 * eps and lam[-2] / lam[-1] < 10 * eps, eps
            assert np.abs(S / np.trace(S) - np.outer(u, u)).max() < 10 * eps, eps
        near = solve_gaussian(np.zeros(d), cov0, layer, 0.99 * Tstar, t_eval=[0.99 * Tstar], rtol=1e-12, atol=1e-14)
        exact = isotropic_covariance(cov0, layer, [0.99 * Tstar])[0]
        assert np.abs(near.final_cov - exact).max() < 1e-6 * np.abs(exact).max()
        limits.append(np.outer(u, u))
    assert np.abs(limits[0] - limits[1]).max() > 1e-2  # the limit depends on Sigma_0


@pytest.mark.claim("rank-is-preserved-in-finite-time")
@pytest.mark.parametrize("name", list(layers_2d()))
def test_solve_gaussian_preserves_the_rank_of_a_degenerate_covariance(name):
    """Paper 1 (Castin et al., arXiv 2501.18322): Sigma_t = Phi_t Sigma_0 Phi_t^T, so the rank of the covariance
    never changes in finite time (every Gaussian-preserving variant, also along a blow-up).
    """
    layer0 = layers_2d()[name]
    # embed the 2-D layer in d = 3 and start from a rank-one or rank-two covariance
    rng = np.random.default_rng(1)
    for r in (1, 2):
        Z = rng.standard_normal((3, r))
        cov0 = Z @ Z.T / 3
        d = 3
        layer = _embed(layer0, d, rng)
        ode = solve_gaussian(0.2 * np.ones(d), cov0, layer, 0.6)
        lam = ode.eigenvalues()
        assert np.all(lam[:, r] <= 1e-10 * lam[:, 0])  # also along a blow-up (the trace reaches 1e8)
        assert np.all(lam[:, r - 1] > 1e4 * np.abs(lam[:, r]))


@pytest.mark.claim("clustering-limit-is-the-conditional-covariance")
def test_clustering_limit_is_the_conditional_covariance_reached_at_rate_one_over_t():
    """Paper 1 (Castin et al., arXiv 2501.18322): with V = I and A + A^T <= 0 the covariance converges like 1/t to
    the conditional covariance of x given R x (rows of R spanning the range of A + A^T), of rank dim ker(A +
    A^T); softmax and l2.
    """
    rng = np.random.default_rng(6)
    for d, r in [(2, 1), (3, 1), (4, 2)]:
        R = rng.standard_normal((r, d))
        L = rng.standard_normal((d, d))
        cov0 = L @ L.T / d
        for layer in (
            Attention("softmax", A=-R.T @ R / np.sqrt(d), V=np.eye(d)),
            official_layer("l2", R, -R, np.eye(d)),
        ):
            lim = clustering_limit(cov0, layer)
            cond = cov0 - cov0 @ R.T @ np.linalg.pinv(R @ cov0 @ R.T) @ R @ cov0
            assert np.abs(lim - cond).max() < 1e-10
            assert np.sum(covariance_eigenvalues(lim) > 1e-9) == d - r
            t = np.array([1e2, 1e3, 1e4])
            ode = solve_gaussian(np.zeros(d), cov0, layer, t[-1], t_eval=t)
            err = np.linalg.norm(ode.cov - lim, 2, axis=(1, 2))
            c = err * t
            assert np.all(c[1:] < 1.5 * c[0]) and err[-1] < 1e-2


@pytest.mark.claim("clustering-rank-bound")
def test_solve_gaussian_trace_of_inverse_V_times_sigma_is_non_increasing_and_limit_rank_is_bounded():
    """Paper 1 (Castin et al., arXiv 2501.18322), the clustering statement as the book reads it: with V > 0
    symmetric and A + A^T <= 0, tr(V^{-1} Sigma_t) does not increase and the limit has rank at most d - rank(A +
    A^T).

    The stopping rule is on increments relative to the size of Sigma, not on the raw right-hand side.
    """
    rng = np.random.default_rng(10)
    for d in (3, 4, 5):
        for _ in range(2):
            Q = rng.standard_normal((d // 2, d))
            layer = official_layer("softmax", Q, -Q, (lambda W: W.T @ W + 0.1 * np.eye(d))(rng.standard_normal((d, d))))
            L = rng.standard_normal((d, d))
            ode = solve_gaussian(np.zeros(d), L @ L.T, layer, 2e4, rtol=1e-9, atol=1e-12)
            Vinv = np.linalg.inv(layer.V[0])
            y = np.einsum("ij,tji->t", Vinv, ode.cov)
            assert np.all(np.diff(y) <= 1e-9 * y[0])
            lam = ode.eigenvalues()[-1]
            # the stopping rule is on increments relative to the size of Sigma, not on the raw right-hand side
            _, dS = gaussian_rhs(np.zeros(d), ode.final_cov, layer)
            assert np.linalg.norm(dS) * ode.t[-1] < 0.05 * lam[0]
            rank_bound = d - np.linalg.matrix_rank(layer.A[0] + layer.A[0].T)
            assert np.sum(lam > 1e-2 * lam[0]) <= rank_bound


@pytest.mark.claim("clustering-condition-reading")
def test_solve_gaussian_clustering_condition_holds_in_the_books_reading_not_the_transposed_one():
    """Paper 1 (Castin et al., arXiv 2501.18322): the summary's condition for clustering, V A + A^T V < 0 with V >
    0 symmetric, depends on which A it means. Read with the book's A (score <x, A y>) no random draw blows up by
    T = 200; read with A^T (paper 1's A1) it fails: a draw with V A^T + A V < 0 blows up at t = 9.66.
    """
    A = np.array([[-1.183, 0.36], [-0.964, 0.064]])
    V = np.array([[2.294, 1.351], [1.351, 2.623]])
    assert np.linalg.eigvalsh(V @ A.T + A @ V)[-1] < 0 < np.linalg.eigvalsh(V @ A + A.T @ V)[-1]
    ode = solve_gaussian(np.zeros(2), np.eye(2), Attention("softmax", A=A, V=V), 200.0)
    assert ode.status == "blowup" and abs(ode.blowup_time - 9.658) < 1e-2
    rng = np.random.default_rng(0)
    draws = 0
    while draws < 8:
        B = rng.standard_normal((2, 2))
        V = B @ B.T + 0.1 * np.eye(2)
        A = rng.standard_normal((2, 2))
        if np.linalg.eigvalsh(V @ A + A.T @ V)[-1] >= 0:
            continue
        draws += 1
        ode = solve_gaussian(np.zeros(2), np.eye(2), Attention("softmax", A=A, V=V), 200.0)
        assert ode.status == "completed", (A, V)


@pytest.mark.claim("rank-one-manifold")
def test_solve_rank_one_matches_the_matrix_ode():
    """Paper 1 (Castin et al., arXiv 2501.18322): rank one is invariant, Sigma_0 = z0 z0^T gives Sigma_t = z_t
    z_t^T with z' = (z^T A z) V z.
    """
    rng = np.random.default_rng(12)
    for d in (2, 3):
        A = 0.5 * rng.standard_normal((d, d))
        V = rng.standard_normal((d, d))
        layer = Attention("softmax", A=A, V=V)
        z0 = 0.5 * rng.standard_normal(d)
        t = np.linspace(0, 0.5, 6)
        rank_one = scipy.integrate.solve_ivp(
            lambda _, z, lay=layer: rank_one_velocity(z, lay),
            (0, 0.5),
            z0,
            t_eval=t,
            method="DOP853",
            rtol=1e-12,
            atol=1e-14,
        )
        z = rank_one.y.T
        ode = solve_gaussian(np.zeros(d), np.outer(z0, z0), layer, 0.5, t_eval=t, rtol=1e-12, atol=1e-14)
        assert np.abs(ode.cov - np.einsum("ti,tj->tij", z, z)).max() < 1e-12
        # and it is the covariance ODE restricted to rank one
        _, dS = gaussian_rhs(np.zeros(d), np.outer(z0, z0), layer)
        zd = rank_one_velocity(z0, layer)
        assert np.abs(dS - (np.outer(zd, z0) + np.outer(z0, zd))).max() < 1e-13


def test_solve_gaussian_mean_is_the_closed_form_for_V_vI_and_symmetric_A():
    """Softmax, V = v I, symmetric A: alpha_t = e^{vt} (I - 2 v t beta Sigma_0 A)^{-1/2} alpha_0 before T*."""

    def closed_form(m0, cov0, A, v, ts):
        powers = [scipy.linalg.fractional_matrix_power(np.eye(len(m0)) - 2 * v * s * cov0 @ A, -0.5) for s in ts]
        return np.array([np.exp(v * s) * np.real(P) @ m0 for s, P in zip(ts, powers)])

    rng = np.random.default_rng(13)
    d = 3
    B = rng.standard_normal((d, d))
    layer = Attention("softmax", A=-B @ B.T / 4, V=0.8 * np.eye(d))
    L = rng.standard_normal((d, d))
    cov0 = L @ L.T / d
    m0 = rng.standard_normal(d)
    t = np.linspace(0, 2, 5)
    ode = solve_gaussian(m0, cov0, layer, 2.0, t_eval=t)
    assert np.abs(ode.mean - closed_form(m0, cov0, -B @ B.T / 4, 0.8, t)).max() < 1e-8
    grow = Attention("softmax", A=B @ B.T / 4, V=0.8 * np.eye(d))
    Tstar = blowup_time(cov0, grow)
    ode = solve_gaussian(m0, cov0, grow, 0.9 * Tstar, t_eval=[0.5 * Tstar, 0.9 * Tstar], rtol=1e-12, atol=1e-12)
    assert np.abs(ode.mean - closed_form(m0, cov0, B @ B.T / 4, 0.8, ode.t)).max() < 1e-6 * np.abs(ode.mean).max()


def test_gaussian_rhs_linear_on_centred_gaussians_is_the_softmax_covariance_equation():
    for layer in layers_2d().values():
        if layer.kind.name == "softmax" and layer.n_heads == 1:
            lin = Attention("linear", A=layer.A, V=layer.V, beta=layer.beta)
            assert np.allclose(
                gaussian_rhs(np.zeros(2), S0, lin)[1], gaussian_rhs(np.zeros(2), S0, layer)[1], atol=1e-15
            )


@pytest.mark.claim("l2-never-blows-up")
def test_growth_rate_bounds_l2_with_invertible_keys_which_never_blows_up():
    """Paper 1 (Castin et al., arXiv 2501.18322): l2 attention with K^T K > 0 never blows up, |Sigma_t| <=
    |Sigma_0| e^{2ct} with c = |V| |K^T Q| / lambda_min(K^T K) (parameters of the official blow-up figure).
    """
    setup = figure_setup("F4")
    layer = setup.layers["l2"]
    c = growth_rate(layer)
    assert math.isfinite(c)
    for cov0 in setup.inits[::200]:
        ode = solve_gaussian(np.zeros(2), cov0, layer, 12.0)
        assert ode.status == "completed"
        norms = np.linalg.norm(ode.cov, 2, axis=(1, 2))
        assert np.all(norms <= norms[0] * np.exp(2 * c * ode.t) * (1 + 1e-9))
    assert growth_rate(official_layer("l2", [[1.0, 0.0]], [[1.0, 0.0]], np.eye(2))) == math.inf


@pytest.mark.claim("sinkhorn-never-blows-up", "sinkhorn-gaussian-mean-decouples")
def test_growth_rate_bounds_sinkhorn_and_decoupled_mean_is_its_mean():
    """Paper 1 (Castin et al., arXiv 2501.18322): Sinkhorn attention never blows up, |Sigma_t| <= |Sigma_0|
    e^{2t|V|}; its Gaussian mean is e^{tV} alpha_0 and the covariance does not depend on the mean.
    """
    setup = figure_setup("F4")
    layer = setup.layers["sinkhorn"]
    c = growth_rate(layer)
    assert c == pytest.approx(1.0)
    for cov0 in setup.inits[::300]:
        for m0 in (np.zeros(2), np.array([0.4, -1.0])):
            ode = solve_gaussian(m0, cov0, layer, 4.0)
            norms = np.linalg.norm(ode.cov, 2, axis=(1, 2))
            assert np.all(norms <= norms[0] * np.exp(2 * c * ode.t) * (1 + 1e-9))
            exact = decoupled_mean(m0, layer, ode.t)
            assert np.abs(ode.mean - exact).max() < 1e-9 * max(1.0, np.abs(exact).max())
    # and the covariance does not depend on the mean
    a = solve_gaussian(np.zeros(2), S0, layer, 2.0, t_eval=[2.0])
    b = solve_gaussian(np.array([3.0, -2.0]), S0, layer, 2.0, t_eval=[2.0])
    assert np.abs(a.final_cov - b.final_cov).max() < 1e-9 * np.abs(a.final_cov).max()
    assert np.array_equal(gaussian_rhs(np.zeros(2), S0, layer)[1], gaussian_rhs(np.array([3.0, -2.0]), S0, layer)[1])


@pytest.mark.parametrize("name", list(layers_2d()))
def test_solve_gaussian_accurate_mode_keeps_the_covariance_symmetric_psd_and_never_mutates_the_input(name):
    layer = layers_2d()[name]
    cov0 = np.array([[0.5, 0.49], [0.49, 0.5]])  # nearly singular
    keep = cov0.copy()
    m0 = M0.copy()
    ode = solve_gaussian(m0, cov0, layer, 1.0)
    assert np.array_equal(cov0, keep) and np.array_equal(m0, M0)
    assert np.array_equal(ode.cov, np.swapaxes(ode.cov, 1, 2))
    assert covariance_eigenvalues(ode.cov).min() >= -1e-14 * np.abs(ode.cov).max()
    faithful = projected_euler(cov0, layer, step=0.002, mean0=m0, save="all", t_max=1.0)
    assert np.array_equal(cov0, keep) and np.array_equal(m0, M0)
    assert covariance_eigenvalues(faithful.saved_cov[0]).min() >= 0
    if ode.status == "completed":
        assert np.abs(faithful.cov_last[0] - ode.final_cov).max() < 0.05 * np.abs(ode.final_cov).max()
    else:  # both see the blow-up (the faithful scheme at trace 1e3, one Euler step late at most)
        assert faithful.status[0] == "blowup" and abs(faithful.exit_time[0] - ode.exit_time) < 0.1


def test_projected_euler_converges_to_the_accurate_solution_at_order_one():
    layer = Attention("softmax", A=A_MILD, V=V_MILD)
    ref = solve_gaussian(M0, S0, layer, 1.0, t_eval=[1.0]).final_cov
    errs = [
        np.abs(projected_euler(S0, layer, step=h, mean0=M0, tol_low=0, t_max=1.0, save="final").cov_last[0] - ref).max()
        for h in (0.02, 0.01, 0.005)
    ]
    order = np.polyfit(np.log([0.02, 0.01, 0.005]), np.log(errs), 1)[0]
    assert 0.9 < order < 1.1


@pytest.mark.claim("isotropic-value-precision-is-linear")
def test_solve_gaussian_time_dependent_layer_in_accurate_mode():
    """Paper 1 (Castin et al., arXiv 2501.18322): the parameters may depend on depth; with V = I the precision formula
    Sigma_t^{-1} = Sigma_0^{-1} - int_0^t (A_s + A_s^T) ds holds for a time-dependent A.
    """

    def layer(t):
        return Attention("softmax", A=(1 + t) * A_MILD, V=V_MILD)

    ode = solve_gaussian(M0, S0, layer, 1.0)
    frozen = solve_gaussian(M0, S0, layer(0.0), 1.0)
    assert ode.status == "completed" and np.abs(ode.final_cov - frozen.final_cov).max() > 1e-3
    # the precision formula with a time-dependent A: Sigma^{-1} = Sigma0^{-1} - int_0^t (A_s + A_s^T) ds
    iso = solve_gaussian(M0, S0, lambda t: Attention("softmax", A=(1 + t) * A_MILD, V=np.eye(2)), 1.0)
    S = A_MILD + A_MILD.T
    assert np.abs(np.linalg.inv(iso.final_cov) - (np.linalg.inv(S0) - 1.5 * S)).max() < 1e-8


@pytest.mark.parametrize("name", ["F1", "F4", "F5"])
def test_projected_euler_compiled_and_numpy_agree(name):
    from tokendynamics import _gaussian_kernels

    if not _gaussian_kernels.HAVE_NUMBA:
        pytest.skip("numba is not installed")
    setup = figure_setup(name)
    for variant in setup.layers:
        if not _gaussian_kernels.supports(setup.layers[variant]):
            continue
        kw = dict(setup.solver[variant])
        kw["max_iter"] = min(kw.get("max_iter", 50_000), 3000)
        a = projected_euler(setup.inits[::97], setup.layers[variant], backend="numba", **kw)
        b = projected_euler(setup.inits[::97], setup.layers[variant], backend="numpy", **kw)
        assert np.array_equal(a.iterations, b.iterations) and np.array_equal(a.status, b.status)
        scale = np.abs(b.cov_last).max()
        assert np.abs(a.cov_last - b.cov_last).max() < 1e-9 * scale
        for x, y in zip(a.saved_iterations, b.saved_iterations):
            assert np.array_equal(x, y)


def test_projected_euler_overflow_is_a_non_finite_error_with_its_iteration_in_both_implementations():
    from tokendynamics import NonFiniteError, _gaussian_kernels

    layer = Attention("softmax", A=np.eye(2), V=np.eye(2))  # blows up at T* = 1; no trace threshold
    for backend in ["numpy", "numba"] if _gaussian_kernels.HAVE_NUMBA else ["numpy"]:
        with pytest.raises(NonFiniteError, match="non-finite right-hand side at iteration 112"):
            projected_euler(0.5 * np.eye(2), layer, step=0.01, tol_high=np.inf, max_iter=2000, backend=backend)


def test_projected_euler_stops_at_t_max_the_same_way_in_both_implementations():
    from tokendynamics import _gaussian_kernels

    layer = Attention("softmax", A=A_MILD, V=V_MILD)
    runs = [
        projected_euler(cone_grid(4, 4), layer, step=0.01, t_max=0.5, backend=b, save=5)
        for b in (["numpy", "numba"] if _gaussian_kernels.HAVE_NUMBA else ["numpy"])
    ]
    for r in runs:
        assert np.all(r.status == "completed") and np.all(r.iterations == 50)
        assert np.allclose(r.exit_time, 0.5) and r.saved_iterations[0][-1] == 50
    if len(runs) == 2:
        assert np.abs(runs[0].cov_last - runs[1].cov_last).max() < 1e-14
    ref = solve_gaussian(np.zeros(2), cone_grid(4, 4)[3], layer, 0.5, t_eval=[0.5]).final_cov
    assert np.abs(runs[0].cov_last[3] - ref).max() < 0.01


def test_empirical_moments_are_the_moments_of_the_weighted_measure():
    rng = np.random.default_rng(14)
    X = rng.standard_normal((3, 40, 2))  # three frames of 40 tokens
    w = rng.random(40)
    w /= w.sum()
    m, C = empirical_moments(X, w)
    for k in range(3):
        np.testing.assert_allclose(m[k], np.average(X[k], axis=0, weights=w), atol=1e-15)
        np.testing.assert_allclose(C[k], np.cov(X[k].T, aweights=w, bias=True), atol=1e-14)
    m1, C1 = empirical_moments(X[0])  # uniform weights: normalised by n, not n - 1
    np.testing.assert_allclose(C1, np.cov(X[0].T, bias=True), atol=1e-14)
    counts = rng.integers(1, 4, 40)  # integer masses are repeated tokens
    mr, Cr = empirical_moments(np.repeat(X[0], counts, axis=0))
    mw, Cw = empirical_moments(X[0], counts / counts.sum())
    np.testing.assert_allclose(mr, mw, atol=1e-14)
    np.testing.assert_allclose(Cr, Cw, atol=1e-14)
    with pytest.raises(ValueError, match="sum to 1"):
        empirical_moments(X[0], np.ones(40))


# ---------------------------------------------------------------------------------------------
# batched covariance solves, the clustering condition in its two readings, the search
# ---------------------------------------------------------------------------------------------

# a counterexample found by clustering_condition_search (value="positive", seed 0): V + V^T > 0 and
# V A + A^T V^T < 0 (the book's reading), yet the softmax covariance from Sigma_0 = I blows up
A_CE = np.array([[-0.666, 0.704], [-0.59, 0.184]])
V_CE = np.array([[1.048, 0.719], [-1.338, 0.303]])


@pytest.mark.parametrize("kind", ["softmax", "softmax-2-heads", "l2"])
def test_solve_covariance_batch_equals_a_loop_of_solve_gaussian(kind):
    from tokendynamics.gaussian import solve_covariance_batch

    rng = np.random.default_rng(5)
    B, d = 8, 2 if kind != "l2" else 3
    if kind == "l2":
        Q, K = rng.standard_normal((B, d, d)), rng.standard_normal((B, d, d))
        stack = Attention("l2", Q=Q, K=K, V=rng.standard_normal((B, d, d)), beta=np.ones(B))
    elif kind == "softmax":
        stack = Attention(
            "softmax", A=rng.standard_normal((B, d, d)), V=rng.standard_normal((B, d, d)), beta=np.ones(B)
        )
    else:
        stack = Attention("softmax", A=rng.standard_normal((B, 2, d, d)), V=0.5 * rng.standard_normal((B, 2, d, d)))
    L = rng.standard_normal((B, d, d))
    S0 = L @ np.swapaxes(L, 1, 2) / d
    T, t_eval = 2.0, np.linspace(0.0, 2.0, 5)
    res = solve_covariance_batch(S0, stack, T, t_eval=t_eval, rtol=1e-10, atol=1e-12, trace_levels=(10.0,))
    assert len(res) == B and res.cov.shape == (B, 5, d, d)
    blew = 0
    for b in range(B):
        one = solve_gaussian(np.zeros(d), S0[b], stack.member(b), T, t_eval=t_eval, rtol=1e-10, atol=1e-12)
        if one.status == "blowup":
            blew += 1
            assert res.status[b] == "blowup"
            assert abs(res.blowup_time[b] - one.exit_time) < 1e-8 * one.exit_time
            assert abs(res.pole_time[b] - one.info["blowup_time_extrapolated"]) < 1e-7 * one.exit_time
            stored = ~np.isnan(res.cov[b, :, 0, 0])
            assert np.allclose(res.cov[b, stored], one.cov[: stored.sum()], rtol=1e-7, atol=1e-10)
        else:
            assert res.status[b] == "completed" and np.isnan(res.blowup_time[b])
            assert np.allclose(res.cov[b], one.cov, rtol=1e-7, atol=1e-10)
            assert np.allclose(res.cov_last[b], one.cov[-1], rtol=1e-7, atol=1e-10)
    if kind != "l2":
        assert 0 < blew < B  # both outcomes are exercised


def test_solve_covariance_batch_stiff_members_finish_with_lsoda_and_inputs_are_checked():
    from tokendynamics.gaussian import solve_covariance_batch

    stack = Attention("softmax", A=np.stack([A_CE, A_MILD]), V=np.stack([V_CE, V_MILD]), beta=np.ones(2))
    t_eval = np.linspace(0, 1.0, 3)
    fast = solve_covariance_batch(np.eye(2), stack, 1.0, t_eval=t_eval, trace_levels=(4.0,))
    slow = solve_covariance_batch(np.eye(2), stack, 1.0, t_eval=t_eval, trace_levels=(4.0,), max_steps=3)
    assert np.allclose(fast.cov, slow.cov, rtol=1e-6, atol=1e-9)
    # crossings are interpolated in log trace within a step: accurate to about the step squared
    assert np.allclose(fast.crossing_times, slow.crossing_times, rtol=1e-3, equal_nan=True)
    assert np.all(slow.steps >= 3)
    with pytest.raises(ValueError, match="covariance equation free of the mean"):
        solve_covariance_batch(np.eye(2), [Attention("sinkhorn", A=A_MILD, V=V_MILD)], 1.0)
    with pytest.raises(ValueError, match="cov0"):
        solve_covariance_batch(np.eye(3), stack, 1.0)
    with pytest.raises(ValueError, match="t_eval"):
        solve_covariance_batch(np.eye(2), stack, 1.0, t_eval=[0.5, 2.0])


@pytest.mark.claim("clustering-condition-counterexample")
def test_clustering_condition_counterexample_blows_up_in_the_solvers_and_in_a_particle_run():
    """Paper 1 (Castin et al., arXiv 2501.18322) states in its summary clustering when V A + A^T V^T <= 0. With a
    non-symmetric V (V + V^T > 0) that condition does not prevent blow-up: for A_CE, V_CE and Sigma_0 = I the
    softmax covariance blows up at T* = 1.1197 (batched and single accurate solver agree, to 1e-8), and the
    Transformer PDE moved as weighted particles (Gauss-Hermite grid) doubles its trace when the ODE does (1e-2).
    A random search finds such draws in a sizeable fraction of cases (the book's chapter 2).
    """
    from tokendynamics.gaussian import solve_covariance_batch

    assert np.linalg.eigvalsh(V_CE @ A_CE + A_CE.T @ V_CE.T)[-1] < 0  # the condition, in the book's reading
    assert np.linalg.eigvalsh(V_CE + V_CE.T)[0] > 0
    layer = Attention("softmax", A=A_CE, V=V_CE)
    one = solve_gaussian(np.zeros(2), np.eye(2), layer, 5.0)
    batch = solve_covariance_batch(np.eye(2), [layer], 5.0)
    assert one.status == "blowup" and batch.status[0] == "blowup"
    assert abs(one.info["blowup_time_extrapolated"] - 1.1197) < 1e-4
    assert abs(batch.blowup_time[0] - one.exit_time) < 1e-8
    # the volume cannot grow (d/dt log det Sigma = tr(Sigma (V^T A + A^T V)) < 0 here), the trace does
    dets = np.linalg.det(one.cov)
    assert np.all(np.diff(dets) < 0) or np.linalg.eigvalsh(V_CE.T @ A_CE + A_CE.T @ V_CE)[-1] > 0
    # particles: the PDE on a Gauss-Hermite grid of N(0, I) doubles its trace when the ODE does
    X, w = gauss_hermite(np.zeros(2), np.eye(2), 12)
    twice = solve_gaussian(np.zeros(2), np.eye(2), layer, 5.0, blowup_trace=4.0).exit_time

    def trace_minus_4(Y):
        m = w @ Y
        return float(np.einsum("i,ij,ij->", w, Y, Y) - m @ m) - 4.0

    run = simulate(X, layer, 2.0, method="adaptive", weights=w, stop_when=trace_minus_4, rtol=1e-8, atol=1e-10)
    assert abs(run.info["event_time"] - twice) < 1e-2 * twice


@pytest.mark.claim("blowup-profile-not-rank-one-in-general")
def test_blowup_profile_is_rank_one_for_isotropic_V_but_not_for_the_counterexample():
    """Paper 1 (Castin et al., arXiv 2501.18322): at a blow-up with V = v I the normalised covariance tends to rank
    one (the book's chapter 2). Not for a general V: the counterexample's Sigma_t / tr Sigma_t keeps
    lambda_min / lambda_max near 0.27 as the trace passes 1e10.
    """
    from tokendynamics.gaussian import solve_covariance_batch

    layers = [
        Attention("softmax", A=A_CE, V=V_CE),
        Attention("softmax", A=np.array([[1.0, 0.3], [0.0, 0.5]]), V=np.eye(2)),
    ]
    res = solve_covariance_batch(np.eye(2), layers, 5.0, blowup_trace=1e10)
    assert np.all(res.blew_up)
    lam = covariance_eigenvalues(res.cov_last)
    ratio = lam[:, 1] / lam[:, 0]
    assert ratio[1] < 1e-8 and 0.2 < ratio[0] < 0.35


@pytest.mark.claim("l2-rank-one-keys-grow-exponentially")
def test_l2_with_rank_one_keys_grows_exponentially_and_never_blows_up():
    """Paper 1 (Castin et al., arXiv 2501.18322): L2 attention with K^T K invertible cannot blow up. With a rank-one
    K (V = I, random Q) the bound is lost, yet no draw blows up: the trace crosses 1e2, 1e4, 1e6 at evenly spaced
    times (exponential growth; a pole would bunch them up), as the book's chapter 2 shows.
    """
    from tokendynamics.gaussian import solve_covariance_batch

    rng = np.random.default_rng(0)
    B = 40
    K = rng.standard_normal((B, 2, 1)) @ rng.standard_normal((B, 1, 2))
    stack = Attention(
        "l2", Q=rng.standard_normal((B, 2, 2)), K=K, V=np.broadcast_to(np.eye(2), (B, 2, 2)), beta=np.ones(B)
    )
    assert growth_rate(stack.member(0)) == math.inf
    res = solve_covariance_batch(np.eye(2), stack, 30.0, trace_levels=(1e2, 1e4, 1e6), blowup_trace=1e8)
    ct = res.crossing_times
    grown = ~np.isnan(ct).any(axis=1)
    assert grown.sum() >= 10
    gaps = (ct[grown, 2] - ct[grown, 1]) / (ct[grown, 1] - ct[grown, 0])
    assert np.all(gaps > 0.5) and np.median(gaps) > 0.95  # a simple pole gives 1e-2


@pytest.mark.claim("sinkhorn-low-rank-limit")
def test_sinkhorn_with_rank_one_negative_A_converges_to_the_softmax_conditional_covariance():
    """Paper 1 (Castin et al., arXiv 2501.18322): Sinkhorn attention clusters like softmax. With V = I and
    A = -q q^T the Sinkhorn covariance converges, like 1/t, to a rank-one limit: the conditional covariance of x
    given <q, x>, the softmax limit (derived for the book's chapter 2).
    """
    q = np.array([0.6, 0.8])
    A = -np.outer(q, q)
    S0 = np.array([[0.7, 0.2], [0.2, 0.5]])
    limit = clustering_limit(S0, Attention("softmax", A=A, V=np.eye(2)))
    run = solve_gaussian(np.zeros(2), S0, Attention("sinkhorn", A=A, V=np.eye(2)), 400.0, t_eval=[100.0, 400.0])
    dist = np.linalg.norm(run.cov - limit, axis=(1, 2))
    assert dist[1] < 2e-3 and 3.0 < dist[0] / dist[1] < 5.0  # like 1/t
    lam = covariance_eigenvalues(run.cov[-1])
    assert lam[1] / lam[0] < 5e-3 and np.linalg.matrix_rank(limit, tol=1e-10) == 1
