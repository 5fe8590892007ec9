r"""What the two papers claim, where the book shows it, and which tests check it.

One registry, ``CLAIMS``, of every checkable statement of

1. Castin, Ablin, Carrillo, Peyré, *A Unified Perspective on the Dynamics of Deep Transformers*
   (arXiv 2501.18322), and
2. Li, Maranzatto, Peszek, Teolis, Akkoc, Riedl, Ulukus, García Trillos, *On the Diverse Dynamical
   Behaviors Arising in Deep Linear Transformers* (2026),

as this book states them. Each :class:`Claim` names the chapter that shows it, the value that
chapter measured (a key glued with ``myst_nb.glue``), a tolerance, and the tests that check it
(pytest node ids). Tests carry the same key in a marker, ``@pytest.mark.claim("<key>")``, and a
test of the suite (``tests/book/test_claims.py``) keeps the two sides in step.

:func:`claims_markdown` renders the registry as MyST tables: the appendix page
``chapters/claims.md`` shows one per chapter, and a chapter can show its own rows with
``claims_markdown(chapter="04_kuramoto_reduction", local=True)``.

Provenance tags (``TAGS``), as in the chapters:

* ``S`` — stated in the paper's abstract or summary;
* ``R`` — read in the authors' public code;
* ``D`` — derived for this book, checked numerically;
* ``I`` — inferred: our reconstruction of the paper's content, to be read with caution.

>>> len({c.key for c in CLAIMS}) == len(CLAIMS)
True
>>> claim("theorem-b-mean-field-limit").paper
1
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CHAPTERS",
    "CLAIMS",
    "PAPERS",
    "TAGS",
    "Claim",
    "claim",
    "claims_for",
    "claims_by_test",
    "claims_markdown",
]

PAPERS = {
    1: "Castin, Ablin, Carrillo, Peyré, A Unified Perspective on the Dynamics of Deep Transformers (arXiv 2501.18322)",
    2: "Li, Maranzatto, Peszek, Teolis, Akkoc, Riedl, Ulukus, García Trillos, On the Diverse Dynamical Behaviors "
    "Arising in Deep Linear Transformers (2026)",
}

TAGS = {
    "S": "stated in the paper's abstract or summary",
    "R": "read in the authors' public code",
    "D": "derived for this book, checked numerically",
    "I": "inferred: our reconstruction of the paper's content, read with caution",
}

#: chapter stem -> title, in book order (the stems of ``chapters/*.md``)
CHAPTERS = {
    "index": "Token dynamics in deep transformers",
    "01_well_posedness": "The Transformer PDE: variants, stability and the mean-field limit",
    "02_gaussian_preservation": "Gaussian tokens: clustering and blow-up",
    "03_gradient_flow": "The gradient-flow structure",
    "04_kuramoto_reduction": "Linear attention on the circle: a Kuramoto model",
    "05_kuramoto_regimes": "Linear attention on the circle: the regimes",
    "06_high_dimensional": "High dimension: do the planar regimes persist?",
    "08_transformer": "From the ODE to a transformer",
}


@dataclass(frozen=True)
class Claim:
    """One checkable statement of one of the two papers, as the book states and checks it.

    Parameters
    ----------
    key : str
        Stable slug; the label of the claim's row on the claims page is ``claim-<key>``.
    paper : int
        1 (Castin et al.) or 2 (Li et al.).
    statement : str
        One line of MyST (inline math ``$...$`` allowed).
    tag : str
        Provenance, one of ``TAGS``.
    chapter : str
        Stem of the chapter that shows the claim (a key of ``CHAPTERS``).
    measured : tuple (str, str) or None
        ``(glue key, format spec)`` of the value the chapter measured (format ``""``: as glued);
        ``None`` where the statement is exact or qualitative and only the tests check it.
    tolerance : str
        What the tests (and the chapter) accept, in words.
    tests : tuple of str
        Pytest node ids, ``tests/<file>.py::<function>`` (parametrised tests without ``[...]``).
    """

    key: str
    paper: int
    statement: str
    tag: str
    chapter: str
    measured: tuple[str, str] | None
    tolerance: str
    tests: tuple[str, ...]


def _c(key, paper, tag, chapter, statement, tests, tolerance, measured=None):
    return Claim(key, paper, statement, tag, chapter, measured, tolerance, tuple(tests))


T = "tests/"

CLAIMS: tuple[Claim, ...] = (
    # ------------------------------------------------------------------ the book's convention
    _c(
        "score-convention",
        1,
        "D",
        "index",
        r"The score of query $x$ on key $y$ is $\langle x,Ay\rangle$ with $A=Q^\top K$; paper 1's matrix is "
        r"$A_1=A^\top$, and a non-symmetric $A$ and its transpose give visibly different fields and covariance "
        r"equations.",
        [
            T + "test_attention.py::test_score_convention_is_x_dot_a_y_and_transposing_a_changes_the_field",
            T + "test_attention.py::test_layer_from_q_and_k_equals_layer_from_a_equal_qt_k",
            T + "test_variants.py::test_library_convention_is_the_transpose_of_paper_one",
            T + "test_gaussian.py::test_solve_gaussian_follows_the_score_x_A_y_and_not_its_transpose",
            T + "test_gradient_flow.py::test_softmax_field_is_VAinv_grad_log_Z_in_library_convention_not_transposed",
        ],
        "the transposed matrix moves the field by more than $10^{-2}$",
    ),
    # ------------------------------------------------------------------ paper 1, chapter 01
    _c(
        "particles-are-the-pde",
        1,
        "S",
        "01_well_posedness",
        r"The particle system is the Transformer PDE started from the empirical measure: the field sees the tokens "
        r"only through $\mu=\sum_j w_j\delta_{x_j}$ (a repeated token weighs like one token of double mass).",
        [T + "test_attention.py::test_duplicated_tokens_equal_doubled_weights"],
        "$10^{-11}$",
    ),
    _c(
        "variant-fields-match-their-definitions",
        1,
        "D",
        "01_well_posedness",
        r"Softmax, multi-head, $\ell^2$, Sinkhorn, sigmoid, linear, unnormalised softmax and masked attention with a "
        r"sink are one field $\Gamma_\mu$ each, equal to a double loop over token pairs of its definition.",
        [
            T + "test_variants.py::test_paper1_variants_fields_match_a_double_loop_of_their_definitions",
            T + "test_attention.py::test_velocity_matches_double_loop_definition",
            T + "test_attention.py::test_l2_velocity_matches_double_loop_definition",
            T + "test_attention.py::test_causal_attention_matches_double_loop_and_never_looks_ahead",
        ],
        "$10^{-12}$",
    ),
    _c(
        "multihead-heads-by-row-blocks",
        1,
        "R",
        "01_well_posedness",
        r"Multi-head attention adds the fields of its heads; the authors' code cuts the heads out of $Q,K,V$ by row "
        r"blocks with $A_h=K_h^\top Q_h/\sqrt k$, and a $Q$ with fewer rows leaves a head empty.",
        [
            T + "test_attention.py::test_multihead_field_is_sum_of_each_heads_field",
            T + "test_variants.py::test_multihead_from_rows_matches_the_official_formula_with_scale_and_output_matrix",
            T + "test_variants.py::test_multihead_from_rows_with_fewer_rows_has_an_empty_head_that_adds_the_mean_only",
        ],
        "$10^{-12}$",
    ),
    _c(
        "sinkhorn-attention-is-doubly-stochastic",
        1,
        "D",
        "01_well_posedness",
        r"Sinkhorn attention is doubly stochastic (the entropic optimal plan of $\mu$ onto itself, divided by the "
        r"token masses), and one row normalisation of its kernel is softmax with $A/\varepsilon$.",
        [
            T
            + "test_attention.py::test_attention_matrix_sinkhorn_is_doubly_stochastic_and_one_row_normalisation_is_softmax",
            T + "test_attention.py::test_sinkhorn_weights_doubly_stochastic_and_match_exponential_domain_scaling",
            T + "test_attention.py::test_sinkhorn_plan_matches_pot_log_sinkhorn",
            T + "test_attention.py::test_one_sinkhorn_row_normalisation_is_softmax",
            T
            + "test_attention.py::test_attention_matrix_sinkhorn_is_doubly_stochastic_to_its_tolerance_along_a_trajectory",
        ],
        "marginals to $10^{-10}$ (or to the Sinkhorn tolerance)",
    ),
    _c(
        "sinkhorn-mean-moves-by-v",
        1,
        "D",
        "01_well_posedness",
        r"Under Sinkhorn attention the token mean moves by $\dot{\bar x}=V\bar x$ exactly, so "
        r"$\bar x(T)=e^{TV}\bar x(0)$.",
        [
            T + "test_attention.py::test_sinkhorn_particle_mean_moves_exactly_by_v",
            T
            + "test_gaussian.py::test_compare_with_particles_sample_follows_the_ode_from_its_moments_within_sampling_error",
        ],
        r"$10^{-10}$ (field); $10^{-12}$ against RK4 of $\dot{\bar x}=V\bar x$",
        ("p1_sinkhorn_mean_err", ".1e"),
    ),
    _c(
        "sigmoid-tends-to-unnormalised-softmax",
        1,
        "D",
        "01_well_posedness",
        r"Sigmoid attention summed with bias $-\log n$ (Ramapuram et al.) tends to unnormalised softmax attention as "
        r"$n\to\infty$, with a gap of order $1/n$.",
        [
            T
            + "test_variants.py::test_sigmoid_layer_with_bias_minus_log_n_tends_to_unnormalised_softmax_at_rate_one_over_n",
            T + "test_variants.py::test_sigmoid_layer_summed_with_bias_minus_log_n_matches_a_double_loop",
        ],
        r"gap at most $e^{2aR^2}vR/n$",
    ),
    _c(
        "l2-is-softmax-on-a-reweighted-measure",
        1,
        "D",
        "01_well_posedness",
        r"$\ell^2$ attention is softmax attention with score matrix $2\beta Q^\top K$ on the reweighted measure "
        r"$\tilde\mu\propto e^{-\beta|Ky|^2}\mu$.",
        [T + "test_attention.py::test_velocity_l2_equals_softmax_with_2_qt_k_on_the_reweighted_measure"],
        "$10^{-12}$",
    ),
    _c(
        "theorem-a-stability",
        1,
        "S",
        "01_well_posedness",
        r"Well-posedness and stability: for softmax, multi-head, $\ell^2$, Sinkhorn, sigmoid and masked attention, with bounded "
        r"parameters and compactly supported data, the Transformer PDE is well posed and "
        r"$W_p(\mu_t,\nu_t)\le e^{\int_0^tL_s\,ds}\,W_p(\mu_0,\nu_0)$.",
        [T + "test_stability.py::test_stability_study_growth_factor_stays_below_the_explicit_bound"],
        "measured growth factor below the explicit bound (largest factor shown)",
        ("p1_stab_max", ".2f"),
    ),
    _c(
        "stability-constants",
        1,
        "D",
        "01_well_posedness",
        r"Explicit constants: the support grows like $\dot R_s\le vR_s$ and "
        r"$L_s=avR_s^2+v(1+2aR_s^2)e^{2aR_s^2}$ for softmax (sigmoid without the exponential; a sink of mass $m_0$ "
        r"divides the second term by $m_0$); the bound is right but pessimistic by orders of magnitude.",
        [
            T + "test_stability.py::test_log_stability_bound_integrates_the_support_radius_and_the_constant",
            T + "test_stability.py::test_lipschitz_constants_refuse_sinkhorn_and_a_causal_layer_without_sink",
            T + "test_stability.py::test_stability_study_growth_factor_stays_below_the_explicit_bound",
        ],
        "bound above the measurement (orders of magnitude shown)",
        ("p1_stab_gap", ".0f"),
    ),
    _c(
        "theorem-b-mean-field-limit",
        1,
        "S",
        "01_well_posedness",
        r"Mean-field limit: $n$ i.i.d. tokens follow the Transformer PDE as $n\to\infty$ at the rate of the empirical "
        r"measure: on the line, for Gaussian data, $W_2$ to the exact solution decays like $n^{-1/2}$ up to "
        r"$\sqrt{\log\log n}$ (fitted slope over independent seeds shown).",
        [
            T + "test_meanfield.py::test_meanfield_study_1d_rate_is_about_n_to_the_minus_one_half",
            T + "test_meanfield.py::test_fit_power_law_recovers_an_exact_slope",
        ],
        r"slope within 3 standard errors of the theory's slopes over the same $n$ (between $-1/2$ and the slope of "
        r"$\sqrt{\log\log n/n}$); standard error below 0.04",
        ("p1_slope1", ".2f"),
    ),
    _c(
        "mean-field-limit-in-the-plane",
        1,
        "D",
        "01_well_posedness",
        r"In $d=2$, with uniform tokens in a square, two independent $n$-token solutions are $W_2$-close at the rate "
        r"$(\log n/n)^{1/2}$ of the optimal matching (Ajtai, Komlós, Tusnády), at $t=0$ and at time $T$ (fitted "
        r"slope shown).",
        [
            T + "test_meanfield.py::test_meanfield_study_pairs_rate_in_the_plane_follows_the_optimal_matching_rate",
        ],
        r"slope within 3 standard errors (plus 0.02) of the slope of $(\log n/n)^{1/2}$ over the same $n$",
        ("p1_slope2", ".2f"),
    ),
    _c(
        "gaussian-1d-exact-solution",
        1,
        "D",
        "01_well_posedness",
        r"In $d=1$ the solution from $N(\alpha_0,\sigma_0^2)$ is Gaussian with "
        r"$\sigma_t^2=\sigma_0^2/(1-2va\sigma_0^2t)$ and $\alpha_t=\alpha_0e^{vt}(1-2va\sigma_0^2t)^{-1/2}$; it "
        r"blows up at $T^*=1/(2va\sigma_0^2)$ if and only if $va>0$.",
        [
            T + "test_meanfield.py::test_gaussian_1d_solution_solves_the_moment_odes_and_its_flow_map_pushes_gaussians",
            T + "test_gaussian.py::test_one_dimensional_solution_matches_the_ode_the_pde_and_particles",
        ],
        r"$10^{-9}$ (ODE), $10^{-7}$ (PDE on a quadrature)",
    ),
    _c(
        "conditional-wasserstein-distance",
        1,
        "I",
        "01_well_posedness",
        r"Masked attention is compared in the conditional Wasserstein distance $W_{p,\lambda}$, the transport cost "
        r"over couplings that do not move positions (the paper may use $\sup_sW_p(\mu^s,\nu^s)$ instead).",
        [
            T + "test_transport.py::test_conditional_wasserstein_equals_lp_over_couplings_that_keep_positions",
            T + "test_transport.py::test_conditional_wasserstein_with_one_group_or_bins_and_bad_marginals",
        ],
        r"$10^{-9}$ relative (linear program)",
    ),
    _c(
        "attention-sink-bounds-the-denominators",
        1,
        "S",
        "01_well_posedness",
        r"With an attention sink of mass $m_0$ the sink moves by $\dot x_0=Vx_0$ and every causal denominator is at "
        r"least $m_0e^{-\beta\|A\|R^2}$, uniformly in the position; masked attention never looks ahead.",
        [
            T + "test_masked.py::test_sink_moves_by_v_and_bounds_every_causal_denominator_below",
            T + "test_masked.py::test_with_sink_builds_the_sink_measure_and_validates",
            T + "test_masked.py::test_masked_attention_with_sink_never_looks_ahead",
            T + "test_attention.py::test_causal_first_token_only_sees_itself",
        ],
        "exact (round-off)",
    ),
    _c(
        "masked-product-data-follow-the-unmasked-dynamics",
        1,
        "D",
        "01_well_posedness",
        r"For product data $\mu_0=\lambda\otimes\nu_0$ the masked solution is $\lambda\otimes\nu_t$ with $\nu_t$ the "
        r"unmasked one: masked particles approach the unmasked dynamics as $n$ grows (fitted exponent with a sink "
        r"shown).",
        [T + "test_meanfield.py::test_masked_meanfield_study_product_data_follow_the_unmasked_dynamics_as_n_grows"],
        "9 times more tokens: below half the distance",
        ("p1_rate_sink", ".2f"),
    ),
    _c(
        "sink-makes-the-first-positions-converge",
        1,
        "D",
        "01_well_posedness",
        r"Without a sink the first tokens see only themselves and their error does not shrink with $n$; with a sink "
        r"it does (fitted exponent at the first position shown).",
        [T + "test_meanfield.py::test_without_a_sink_the_first_positions_stay_far_from_the_unmasked_dynamics"],
        "16 times more tokens: above 0.8 times the error without a sink, below 0.5 times with one",
        ("p1_first_rate_sink", ".2f"),
    ),
    # ------------------------------------------------------------------ paper 1, chapter 02
    _c(
        "gaussians-stay-gaussian",
        1,
        "S",
        "02_gaussian_preservation",
        r"Gaussian data stay Gaussian for softmax, multi-head, $\ell^2$, Sinkhorn (and linear) attention: the field "
        r"on $N(\alpha,\Sigma)$ is affine and the mean-field solution is $N(\alpha_t,\Sigma_t)$, with ODEs for the "
        r"mean and the covariance.",
        [
            T + "test_gaussian.py::test_gaussian_velocity_is_the_field_on_a_gauss_hermite_quadrature_of_the_gaussian",
            T + "test_gaussian.py::test_solve_gaussian_is_the_mean_field_pde_from_the_gaussian_itself",
        ],
        r"$10^{-8}$ (the PDE on a Gauss–Hermite grid, RK4)",
        ("pde_err_max", ".0e"),
    ),
    _c(
        "unnormalised-and-sigmoid-do-not-preserve-gaussians",
        1,
        "D",
        "02_gaussian_preservation",
        r"Unnormalised softmax and sigmoid attention do not preserve Gaussians: their field on a Gaussian is not "
        r"affine.",
        [
            T + "test_gaussian.py::test_gaussian_velocity_of_unnormalised_and_sigmoid_attention_is_not_affine",
            T + "test_gaussian.py::test_gaussian_velocity_refuses_variants_that_do_not_preserve_gaussians",
        ],
        "best affine fit off by more than $10^{-3}$ (softmax: $10^{-12}$)",
    ),
    _c(
        "gaussian-ode-matches-sampled-particles",
        1,
        "D",
        "02_gaussian_preservation",
        r"$n$ tokens sampled from a Gaussian follow the ODEs started from their own moments, up to a small error: "
        r"the sample is not exactly Gaussian.",
        [
            T
            + "test_gaussian.py::test_compare_with_particles_sample_follows_the_ode_from_its_moments_within_sampling_error"
        ],
        r"$5\times10^{-3}$ at $n=1000$ (Sinkhorn: $2\times10^{-3}$ at $n=300$)",
        ("w2_sample_large", ".1e"),
    ),
    _c(
        "gaussian-ode-sampling-error",
        1,
        "D",
        "02_gaussian_preservation",
        r"Started from the exact moments, the ODEs differ from $n$ sampled tokens by the sampling error of the "
        r"initial moments, of order $n^{-1/2}$.",
        [T + "test_gaussian.py::test_compare_with_particles_exact_moments_leave_a_sampling_error_that_shrinks_with_n"],
        "16 times more tokens: below half the distance",
        ("w2_exact_large", ".1e"),
    ),
    _c(
        "linear-attention-moments-are-exact",
        1,
        "D",
        "02_gaussian_preservation",
        r"Linear attention sees the tokens only through their first two moments, so the particle moments follow "
        r"the Gaussian ODEs exactly, at any $n$.",
        [T + "test_gaussian.py::test_compare_with_particles_linear_attention_moments_follow_the_ode_at_any_n"],
        "the time-stepping error ($10^{-6}$)",
        ("lin_w2", ".0e"),
    ),
    _c(
        "sinkhorn-ode-equals-the-official-formula",
        1,
        "R",
        "02_gaussian_preservation",
        r"The Sinkhorn covariance equation, from the entropic plan of $N(\alpha,\Sigma)$ onto itself, equals the "
        r"formula of the authors' code for invertible $A$.",
        [T + "test_gaussian.py::test_gaussian_rhs_sinkhorn_equals_the_official_formula_for_invertible_A"],
        r"$10^{-10}$ relative",
    ),
    _c(
        "isotropic-value-precision-is-linear",
        1,
        "D",
        "02_gaussian_preservation",
        r"With $V=vI$ the precision is linear in time: $\Sigma_t^{-1}=\Sigma_0^{-1}-v\int_0^t(A_s+A_s^\top)\,ds$.",
        [
            T + "test_gaussian.py::test_isotropic_covariance_precision_is_linear_in_time",
            T + "test_gaussian.py::test_solve_gaussian_time_dependent_layer_in_accurate_mode",
        ],
        r"$10^{-10}$ relative",
    ),
    _c(
        "blowup-time-closed-form",
        1,
        "D",
        "02_gaussian_preservation",
        r"With $V=vI$ and $\Sigma_0\succ0$ the covariance blows up if and only if $v(A+A^\top)$ has a positive "
        r"eigenvalue, at $T^*=1/\lambda_{\max}\big(v\Sigma_0^{1/2}(A+A^\top)\Sigma_0^{1/2}\big)$.",
        [
            T
            + "test_gaussian.py::test_blowup_time_matches_the_event_time_and_exists_iff_v_sym_part_has_a_positive_eigenvalue",
            T + "test_gaussian.py::test_solve_gaussian_reports_the_blowup_with_its_time_or_raises",
        ],
        r"relative $10^{-3}$ (solver event), $10^{-6}$ (extrapolated)",
        ("event_rel", ".0e"),
    ),
    _c(
        "blowup-profile-is-rank-one",
        1,
        "D",
        "02_gaussian_preservation",
        r"At a finite-time blow-up with $V=vI$ the normalised covariance $\Sigma_t/\operatorname{tr}\Sigma_t$ tends "
        r"to a rank-one matrix that depends on $\Sigma_0$.",
        [
            T + "test_gaussian.py::test_isotropic_covariance_becomes_rank_one_at_the_blowup",
            T + "book/test_gaussian_figures.py::test_blowup_figure_normalised_endpoints_approach_rank_one",
        ],
        r"$\lambda_{\min}/\lambda_{\max}\to0$ like $1-t/T^*$",
    ),
    _c(
        "rank-is-preserved-in-finite-time",
        1,
        "D",
        "02_gaussian_preservation",
        r"$\Sigma_t=\Phi_t\Sigma_0\Phi_t^\top$ with $\Phi_t$ invertible, so the rank of the covariance never changes "
        r"in finite time: low rank can only appear as $t\to\infty$.",
        [T + "test_gaussian.py::test_solve_gaussian_preserves_the_rank_of_a_degenerate_covariance"],
        r"$\sigma_{r+1}/\sigma_1\le10^{-10}$",
    ),
    _c(
        "rank-one-manifold",
        1,
        "D",
        "02_gaussian_preservation",
        r"Rank one is invariant: $\Sigma_0=z_0z_0^\top$ gives $\Sigma_t=z_tz_t^\top$ with $\dot z=(z^\top Az)\,Vz$, "
        r"so the rank-one stationary points are the lines $u^\top Au=0$.",
        [T + "test_gaussian.py::test_solve_rank_one_matches_the_matrix_ode"],
        "$10^{-12}$",
    ),
    _c(
        "clustering-limit-is-the-conditional-covariance",
        1,
        "D",
        "02_gaussian_preservation",
        r"With $V=I$ and $A+A^\top\preceq0$ the covariance converges, like $1/t$, to the conditional covariance of "
        r"$x$ given $Rx$ (rows of $R$ spanning the range of $A+A^\top$), of rank $\dim\ker(A+A^\top)$.",
        [T + "test_gaussian.py::test_clustering_limit_is_the_conditional_covariance_reached_at_rate_one_over_t"],
        r"limit to $10^{-10}$; $t\,\|\Sigma_t-\Sigma_\infty\|$ bounded (official runs: distance at the stopping rule "
        r"shown)",
        ("F2_line_err", ".1e"),
    ),
    _c(
        "clustering-rank-bound",
        1,
        "I",
        "02_gaussian_preservation",
        r"With $V\succ0$ symmetric and $A+A^\top\preceq0$, $\operatorname{tr}(V^{-1}\Sigma_t)$ does not increase and "
        r"the limit has rank at most $d-\operatorname{rank}(A+A^\top)$ (likely the form of the paper's clustering "
        r"theorem).",
        [
            T
            + "test_gaussian.py::test_solve_gaussian_trace_of_inverse_V_times_sigma_is_non_increasing_and_limit_rank_is_bounded"
        ],
        r"monotone to $10^{-9}$; rank counted above $10^{-2}\lambda_{\max}$",
    ),
    _c(
        "clustering-condition-reading",
        1,
        "I",
        "02_gaussian_preservation",
        r"The summary's condition $VA+A^\top V\prec0$ ($V\succ0$) for clustering: read with the book's $A$ no "
        r"random draw tried blows up; read with $A^\top$ it fails, a draw with $VA^\top+AV\prec0$ blows up at "
        r"$t\approx9.66$.",
        [
            T
            + "test_gaussian.py::test_solve_gaussian_clustering_condition_holds_in_the_books_reading_not_the_transposed_one"
        ],
        r"no blow-up by $T=200$; blow-up time to $10^{-2}$",
    ),
    _c(
        "clustering-condition-counterexample",
        1,
        "S",
        "02_gaussian_preservation",
        r"The summary's condition $VA+A^\top V^\top\preceq0$ for clustering does not hold as stated for a "
        r"non-symmetric $V$ with $V+V^\top\succ0$: a random search finds softmax covariances that blow up although "
        r"$VA+A^\top V^\top\prec0$ (fraction of such draws shown); one of them blows up at $T^*\approx1.12$, "
        r"confirmed by the accurate solvers and by the PDE moved as weighted particles.",
        [
            T
            + "test_gaussian.py::test_clustering_condition_counterexample_blows_up_in_the_solvers_and_in_a_particle_run"
        ],
        r"blow-up time to $10^{-3}$ (solvers to $10^{-8}$), particle doubling time to $10^{-2}$",
        ("cond_frac_positive", ".2f"),
    ),
    _c(
        "blowup-profile-not-rank-one-in-general",
        1,
        "D",
        "02_gaussian_preservation",
        r"The rank-one blow-up profile needs $V=vI$: for the counterexample's non-symmetric $V$ the normalised "
        r"covariance stays full rank at the blow-up ($\lambda_{\min}/\lambda_{\max}$ at trace $10^{10}$ shown).",
        [T + "test_gaussian.py::test_blowup_profile_is_rank_one_for_isotropic_V_but_not_for_the_counterexample"],
        r"$V=I$: below $10^{-8}$; counterexample: between 0.2 and 0.35",
        ("ce_profile_ratio", ".2f"),
    ),
    _c(
        "l2-rank-one-keys-grow-exponentially",
        1,
        "D",
        "02_gaussian_preservation",
        r"The full-rank-$K$ condition of the $\ell^2$ bound is not needed in the draws tried: with a rank-one $K$ "
        r"($V=I$) covariances grow exponentially, never in finite time (number of draws that blow up shown).",
        [T + "test_gaussian.py::test_l2_with_rank_one_keys_grows_exponentially_and_never_blows_up"],
        r"trace crossings of $10^2,10^4,10^6$ evenly spaced (gap ratio $>0.5$, median $>0.95$)",
        ("l2r1_poles", ""),
    ),
    _c(
        "sinkhorn-low-rank-limit",
        1,
        "D",
        "02_gaussian_preservation",
        r"Sinkhorn attention with $V=I$ and $A=-qq^\top$ clusters like softmax: the covariance converges like $1/t$ "
        r"to the same rank-one limit, the conditional covariance of $x$ given $\langle q,x\rangle$ (distance at the "
        r"final time shown).",
        [
            T
            + "test_gaussian.py::test_sinkhorn_with_rank_one_negative_A_converges_to_the_softmax_conditional_covariance"
        ],
        r"distance below $2\times10^{-3}$ at $t=400$, decreasing like $1/t$",
        ("sk_limit_dist", ".1e"),
    ),
    _c(
        "l2-never-blows-up",
        1,
        "D",
        "02_gaussian_preservation",
        r"$\ell^2$ attention with $K^\top K\succ0$ never blows up: $\|\Sigma_t\|\le\|\Sigma_0\|e^{2ct}$ with "
        r"$c=\|V\|\|K^\top Q\|/\lambda_{\min}(K^\top K)$; it grows only exponentially (median exit time of the "
        r"blow-up figure shown).",
        [T + "test_gaussian.py::test_growth_rate_bounds_l2_with_invertible_keys_which_never_blows_up"],
        r"bound to $10^{-9}$ relative",
        ("F4_l2_med", ".1f"),
    ),
    _c(
        "sinkhorn-never-blows-up",
        1,
        "D",
        "02_gaussian_preservation",
        r"Sinkhorn attention never blows up: $\|\Sigma_t\|\le\|\Sigma_0\|e^{2t\|V\|}$ (median exit time of the "
        r"blow-up figure shown).",
        [T + "test_gaussian.py::test_growth_rate_bounds_sinkhorn_and_decoupled_mean_is_its_mean"],
        r"bound to $10^{-9}$ relative",
        ("F4_sk_med", ".1f"),
    ),
    _c(
        "sinkhorn-gaussian-mean-decouples",
        1,
        "D",
        "02_gaussian_preservation",
        r"For Sinkhorn attention the Gaussian mean is $\alpha_t=e^{tV}\alpha_0$ whatever $\Sigma$ does, and the "
        r"covariance does not depend on the mean.",
        [T + "test_gaussian.py::test_growth_rate_bounds_sinkhorn_and_decoupled_mean_is_its_mean"],
        r"$10^{-9}$ relative (particle mean: the RK4 error)",
        ("mean_sk_err", ".0e"),
    ),
    _c(
        "official-figure-parameters",
        1,
        "R",
        "02_gaussian_preservation",
        r"The cone figures are rebuilt from the authors' code: the same seeds and matrices (with their $1/\sqrt d$ "
        r"scalings), right-hand sides, initial grids and projected-Euler stopping rules.",
        [
            T + "book/test_gaussian_figures.py::test_official_layer_reproduces_the_official_right_hand_sides",
            T + "book/test_gaussian_figures.py::test_figure_setup_redraws_the_official_matrices_from_the_legacy_rng",
            T + "test_gaussian.py::test_cone_grid_has_the_official_counts_and_trace_one",
            T + "test_gaussian.py::test_cone_grid_order_is_the_official_u_outer_w_inner",
        ],
        r"$10^{-6}$ (printed matrices), $10^{-10}$ (right-hand sides)",
    ),
    _c(
        "convergence-to-zero-figure",
        1,
        "R",
        "02_gaussian_preservation",
        r"$A+A^\top\prec0$ and $V\succ0$: every covariance of the official grid shrinks to zero, along a common "
        r"direction (largest final trace shown).",
        [
            T
            + "book/test_gaussian_figures.py::test_run_figure_convergence_to_zero_iteration_counts_within_one_and_final_traces"
        ],
        "iteration counts of the authors' runs within one step; final traces 0.0174–0.0176",
        ("F1_tr_max", ".4f"),
    ),
    _c(
        "convergence-to-a-plane-figure",
        1,
        "R",
        "02_gaussian_preservation",
        r"Two heads, one of them empty: $\Sigma_{22}$ is conserved and the limits fill the plane "
        r"$q_1\Sigma_{11}+q_2\Sigma_{12}=0$ of full-rank stationary points (largest change of $\Sigma_{22}$ shown).",
        [T + "book/test_gaussian_figures.py::test_run_figure_multihead_conserves_sigma22_and_stops_on_the_plane"],
        r"$10^{-12}$ ($\Sigma_{22}$), $10^{-8}$ (plane, accurate solver)",
        ("F2_s22", ".1e"),
    ),
    _c(
        "convergence-to-two-lines-figure",
        1,
        "R",
        "02_gaussian_preservation",
        r"$A+A^\top$ indefinite: the softmax limits are rank one, on the two lines $u^\top Au=0$ (at $-58.1°$ and "
        r"$-7.6°$); number of converged runs of 276 shown.",
        [
            T + "book/test_gaussian_figures.py::test_run_figure_two_lines_limits_are_rank_one_where_u_A_u_vanishes",
            T
            + "book/test_gaussian_figures.py::test_run_figure_two_lines_and_two_basins_outcome_counts_match_the_paper",
        ],
        "263 of 276 converge; directions to $0.01°$",
        ("F3_conv", ""),
    ),
    _c(
        "blowup-figure",
        1,
        "R",
        "02_gaussian_preservation",
        r"$A+A^\top\succ0$, $V=I$: all 1184 runs exit; softmax and multi-head blow up in finite time, $\ell^2$ and "
        r"Sinkhorn grow exponentially; $T^*\in[0.353,8.94]$ (median shown) and the exit times of the authors' runs.",
        [
            T
            + "book/test_gaussian_figures.py::test_run_figure_blowup_every_run_exits_and_exit_time_medians_match_the_paper"
        ],
        r"medians to 0.6 %; range and median of $T^*$ to $10^{-2}$",
        ("T_med", ".3f"),
    ),
    _c(
        "two-basins-figure",
        1,
        "R",
        "02_gaussian_preservation",
        r"$A+A^\top$ indefinite, non-symmetric $V$: softmax covariances converge (591 runs) or blow up (57) depending "
        r"on $\Sigma_0$; number of blow-ups shown.",
        [T + "book/test_gaussian_figures.py::test_run_figure_two_lines_and_two_basins_outcome_counts_match_the_paper"],
        "counts equal",
        ("F5_sm_blow", ""),
    ),
    _c(
        "two-basins-with-two-heads",
        1,
        "D",
        "02_gaussian_preservation",
        r"The authors' multi-head panel of the two-basin figure is single-head (its call omits the number of heads); "
        r"the real two-head layer does not blow up within the step limit (blow-ups shown).",
        [T + "book/test_gaussian_figures.py::test_two_basins_figure_with_two_heads_never_blows_up"],
        "no blow-up",
        ("F5_mh_blow", ""),
    ),
    _c(
        "rank-histograms-figure",
        1,
        "R",
        "02_gaussian_preservation",
        r"The rank histograms of the limit covariance ($d=3,4,5$, 100 draws each) are reproduced count for count by "
        r"the official protocol (softmax, $V=I$, $d=3$ shown).",
        [
            T + "book/test_gaussian_figures.py::test_rank_histogram_counts_equal_the_official_protocol",
            T
            + "book/test_gaussian_figures.py::test_cached_rank_histograms_return_the_stored_counts_and_recompute_on_parameter_change",
        ],
        "counts and attempts equal",
        ("F6_sm3", ""),
    ),
    _c(
        "rank-of-the-exact-limit",
        1,
        "D",
        "02_gaussian_preservation",
        r"For $V=I$ the exact limits behind the rank histograms have rank exactly $\lceil d/2\rceil$; the smaller "
        r"ranks of the histograms come from the threshold $0.1$.",
        [T + "book/test_gaussian_figures.py::test_rank_histogram_counts_equal_the_official_protocol"],
        r"eigenvalues above $10^{-10}\lambda_{\max}$ counted",
        ("F6_exact", ""),
    ),
    # ------------------------------------------------------------------ paper 1, chapter 03
    _c(
        "unnormalised-attention-is-a-w2-gradient-flow",
        1,
        "D",
        "03_gradient_flow",
        r"Unnormalised attention with $V=A=A^\top$ is $\Gamma_\mu=\nabla\frac{\delta E_A}{\delta\mu}$, the $W_2$ "
        r"gradient ascent of $E_A(\mu)=\frac12\iint e^{\langle x,Ay\rangle}d\mu\,d\mu$.",
        [
            T
            + "test_gradient_flow.py::test_unnormalised_attention_with_V_equal_A_is_the_gradient_of_the_first_variation",
            T + "test_gradient_flow.py::test_first_variation_matches_finite_differences_of_energy_in_the_weights",
            T + "test_gradient_flow.py::test_first_variation_gradient_matches_finite_differences_in_the_positions",
        ],
        r"$10^{-12}$ (finite differences: $10^{-6}$)",
    ),
    _c(
        "softmax-is-a-twisted-gradient",
        1,
        "D",
        "03_gradient_flow",
        r"For invertible $A$ the softmax field is $\Gamma_\mu=M\nabla Z_\mu/Z_\mu$ with $M=VA^{-1}$ (in the book's "
        r"convention; $VA^{-\top}$ fails).",
        [T + "test_gradient_flow.py::test_softmax_field_is_VAinv_grad_log_Z_in_library_convention_not_transposed"],
        "$10^{-12}$",
    ),
    _c(
        "energy-sign-rule",
        1,
        "I",
        "03_gradient_flow",
        r"Sign rule: along softmax attention $\frac{d}{dt}E_A(\mu_t)=\int\langle\nabla Z,M\nabla Z\rangle/Z\,d\mu_t$, "
        r"non-decreasing if $M+M^\top\succeq0$ and non-increasing if $M+M^\top\preceq0$.",
        [
            T
            + "test_gradient_flow.py::test_sign_rule_energy_rate_from_the_core_velocity_equals_the_dissipation_formula",
            T + "test_gradient_flow.py::test_sign_rule_survey_agrees_everywhere_a_rule_applies",
            T + "test_gradient_flow.py::test_energy_rate_matches_the_energy_change_along_a_short_simulation",
        ],
        r"rate to $10^{-9}$ relative; the predicted sign in every ruled case",
        ("gf_sign_gap", ".1e"),
    ),
    _c(
        "gaussian-energy-closed-form",
        1,
        "D",
        "03_gradient_flow",
        r"$E_{-I}(N(\alpha,\Sigma))=\frac12\det(I-\Sigma^2)^{-1/2}\exp(-\alpha^\top(I+\Sigma)^{-1}\alpha)$, and "
        r"$+\infty$ unless $\Sigma\prec I$ (gap to Monte Carlo in standard errors shown).",
        [
            T + "test_gradient_flow.py::test_gaussian_interaction_energy_closed_form_matches_monte_carlo",
            T
            + "test_gradient_flow.py::test_gaussian_energy_equals_energy_of_its_quadrature_and_is_infinite_beyond_the_threshold",
        ],
        "Monte Carlo, 4 standard errors",
        ("gf_mc_gap", ".1f"),
    ),
    _c(
        "energy-decreases-while-tokens-cluster",
        1,
        "D",
        "03_gradient_flow",
        r"Softmax attention with $V=I$, $A=-I$: $E_{-I}(\mu_t)$ decreases, $\Sigma_t\to0$ and $|\alpha_t|\to\infty$; "
        r"the infimum $0$ is approached, not attained (final energy shown).",
        [
            T
            + "test_gradient_flow.py::test_gaussian_energy_curves_energy_decreases_while_covariance_vanishes_and_mean_escapes",
            T + "test_gradient_flow.py::test_energy_curve_decreases_along_the_softmax_particle_flow",
        ],
        "strictly decreasing at every stored step",
        ("gf_ET", ".1e"),
    ),
    _c(
        "sinkhorn-is-a-w2-gradient-flow",
        1,
        "S",
        "03_gradient_flow",
        r"Sinkhorn attention with $V=A$ is the $W_2$ gradient flow of $F_\varepsilon=\frac12\mathrm{OT}_\varepsilon"
        r"(\mu,\mu)$ (Sander et al.): on tokens, the gradient of the empirical energy is minus the field.",
        [T + "test_gradient_flow.py::test_sinkhorn_energy_empirical_gradient_is_minus_the_sinkhorn_field"],
        r"$10^{-5}$ relative (finite differences)",
    ),
    _c(
        "sinkhorn-is-a-bw-gradient-flow",
        1,
        "D",
        "03_gradient_flow",
        r"On Gaussians, Sinkhorn attention with $V=A$ is the Bures–Wasserstein gradient flow of the closed-form "
        r"energy $F_\varepsilon(\alpha,\Sigma)$.",
        [
            T
            + "test_gradient_flow.py::test_bw_gradient_velocity_of_the_sinkhorn_energy_is_the_sinkhorn_gaussian_ode_with_V_equal_A",
            T + "test_gradient_flow.py::test_sinkhorn_energy_gradient_matches_finite_differences",
            T + "test_gradient_flow.py::test_layer_matrices_beta_scales_the_sinkhorn_cost_matrix",
        ],
        r"$10^{-7}$ (finite-difference gradient)",
        ("gf_sk_rel_plain", ".1e"),
    ),
    _c(
        "sinkhorn-is-a-twisted-bw-gradient-flow",
        1,
        "I",
        "03_gradient_flow",
        r"With $V=MA$ ($M\succ0$) it is the $d_M$ (twisted) Bures–Wasserstein gradient flow of the same "
        r"$F_\varepsilon$, and not the untwisted one.",
        [
            T
            + "test_gradient_flow.py::test_bw_gradient_velocity_twisted_by_M_is_the_sinkhorn_gaussian_ode_with_V_equal_MA",
            T + "test_gradient_flow.py::test_gaussian_descent_profile_and_mismatch_for_the_twisted_sinkhorn_flow",
        ],
        r"$10^{-7}$; the untwisted gradient off by more than $10^{-2}$",
        ("gf_sk_rel_twisted", ".1e"),
    ),
    _c(
        "sinkhorn-energy-is-entropic-ot",
        1,
        "D",
        "03_gradient_flow",
        r"The closed form $F_\varepsilon(\alpha,\Sigma)$ is half the entropic OT value of $N(\alpha,\Sigma)$ onto "
        r"itself: weighted tokens on a Gauss–Hermite grid follow it along the flow.",
        [
            T
            + "test_gradient_flow.py::test_sinkhorn_energy_closed_form_equals_entropic_OT_of_a_gauss_hermite_quadrature",
            T
            + "test_gradient_flow.py::test_sinkhorn_energy_empirical_on_a_quadrature_follows_the_gaussian_value_along_the_flow",
        ],
        r"$10^{-9}$ (quadrature), $10^{-6}$ along the flow",
        ("gf_sk_quad_gap", ".1e"),
    ),
    _c(
        "sinkhorn-energy-decreases",
        1,
        "D",
        "03_gradient_flow",
        r"$F_\varepsilon$ decreases strictly along the Sinkhorn flow ($V=A$ and $V=MA$), at the rate minus the "
        r"squared slope (largest increment shown).",
        [
            T
            + "test_gradient_flow.py::test_sinkhorn_energy_strictly_decreases_along_the_flow_at_the_rate_minus_slope_squared"
        ],
        r"every increment negative; rate to $10^{-6}$",
        ("gf_sum_max_increment", ".1e"),
    ),
    _c(
        "sinkhorn-energy-limits",
        1,
        "D",
        "03_gradient_flow",
        r"As $\varepsilon\to0$, $F_0=-\frac12\alpha^\top A\alpha-\frac12\operatorname{tr}\big((\Sigma^{1/2}A\Sigma "
        r"A\Sigma^{1/2})^{1/2}\big)$; for large $\varepsilon$ the Sinkhorn flow is softmax with $A/\varepsilon$ to "
        r"first order.",
        [
            T + "test_gradient_flow.py::test_sinkhorn_energy_limits",
            T + "test_gaussian.py::test_gaussian_rhs_sinkhorn_tends_to_softmax_for_small_scores",
        ],
        r"$10^{-5}$ relative; $2/\varepsilon^2$",
    ),
    _c(
        "softmax-on-centred-gaussians-is-a-bw-gradient-flow",
        1,
        "D",
        "03_gradient_flow",
        r"Softmax attention with $V=A$ on centred Gaussians is the Bures–Wasserstein gradient flow of "
        r"$-\frac14\operatorname{tr}(\Sigma A\Sigma A)$.",
        [
            T
            + "test_gradient_flow.py::test_bw_gradient_velocity_of_the_softmax_energy_is_the_softmax_covariance_ode_on_centred_gaussians"
        ],
        r"$10^{-7}$ (finite-difference gradient)",
    ),
    _c(
        "twisted-wasserstein-distance",
        1,
        "I",
        "03_gradient_flow",
        r"The twisted distance $d_M(\mu,\nu)=W_2\big((M^{-1/2})_\#\mu,(M^{-1/2})_\#\nu\big)$: unnormalised attention "
        r"with $A=-I$ and $V\succ0$ is its steepest descent of $E_{-I}$ (efficiency 1), not the $W_2$ one.",
        [
            T
            + "test_gradient_flow.py::test_twisted_wasserstein_equals_W2_of_pushforwards_and_the_LP_with_the_twisted_cost",
            T
            + "test_gradient_flow.py::test_twisted_bures_wasserstein_equals_POT_on_transformed_gaussians_and_the_quadrature_LP_limit",
            T + "test_gradient_flow.py::test_unnormalised_attention_is_the_d_M_steepest_descent_and_not_the_W2_one",
            T + "test_gradient_flow.py::test_descent_profile_efficiency_is_one_in_the_twisted_metric_and_less_in_W2",
            T + "test_gradient_flow.py::test_energy_sign_and_twisted_matrix_need_a_symmetric_invertible_A",
        ],
        r"efficiency 1 to $10^{-12}$ (shown: its deviation along the run); below 0.95 in $W_2$",
        ("gf_tw_dev_d_V", ".1e"),
    ),
    _c(
        "energy-is-not-displacement-convex",
        1,
        "D",
        "03_gradient_flow",
        r"$E_{-I}$ is not displacement convex: its second variation at the clustered state $\delta_0$ is $-|w|^2$ in "
        r"every direction, and on Gaussians it is negative along translations orthogonal to the mean.",
        [
            T + "test_gradient_flow.py::test_second_variation_at_the_clustered_state_is_negative",
            T + "test_gradient_flow.py::test_second_variation_formula_matches_finite_difference_second_derivative",
            T
            + "test_gradient_flow.py::test_gaussian_translation_hessian_matches_finite_differences_and_is_negative_orthogonally_to_the_mean",
        ],
        r"$10^{-14}$ (closed form), $10^{-5}$ (finite differences)",
        ("gf_nc_dirac", ".3f"),
    ),
    _c(
        "sinkhorn-energy-is-concave-along-dilations",
        1,
        "D",
        "03_gradient_flow",
        r"For $A=-I$ the Sinkhorn energy is concave along the dilations $\Sigma\mapsto(1+s)^2\Sigma$ (concave "
        r"points shown).",
        [T + "test_gradient_flow.py::test_sinkhorn_energy_is_concave_along_dilations_for_A_minus_identity"],
        "every second difference negative",
        ("gf_nc_F_concave_n", ""),
    ),
    _c(
        "energy-has-several-equilibria",
        1,
        "S",
        "03_gradient_flow",
        r"The energy is not convex and has several equilibria: on the circle (softmax, $A=V=I$) $k$ equally spaced "
        r"clusters are equilibria for every $k$, at energies decreasing with $k$, all unstable but the single "
        r"cluster; so the energy is not concave along the geodesics of any transport metric (largest speed at the "
        r"equilibria shown).",
        [
            T
            + "test_gradient_flow.py::test_equally_spaced_clusters_on_the_circle_are_equilibria_below_the_single_cluster_and_unstable"
        ],
        r"speed below $10^{-12}$; growth rate of the antipodal pair $2/(1+e^{2\beta})$ to $10^{-5}$",
        ("gf_eq_speed_max", ".0e"),
    ),
    _c(
        "metastable-plateaus",
        1,
        "S",
        "03_gradient_flow",
        r"Metastability: at large $\beta$ the energy climbs along the flow in plateaus, each spent near a "
        r"configuration of a few clusters that barely moves and has growing directions (a saddle); the fewer the "
        r"clusters, the slower the escape (longest plateau shown).",
        [
            T
            + "test_gradient_flow.py::test_metastable_plateaus_sit_near_saddles_of_the_energy_which_grows_along_the_flow"
        ],
        r"energy non-decreasing; $k-1$ growing directions near each $k$-cluster plateau",
        ("gf_meta_longest", ".0f"),
    ),
    _c(
        "curvature-unbounded-at-blowup",
        1,
        "S",
        "03_gradient_flow",
        r"No upper bound on the second variation: along the $W_2$ gradient ascent of $E_I$ (unnormalised attention, "
        r"$V=A=I$) the squared speed obeys $\frac{d}{dt}S=2H$, so the finite-time blow-up of the tokens forces the "
        r"curvature $H/S$ to grow without bound (its growth factor along the run shown).",
        [
            T
            + "test_gradient_flow.py::test_curvature_along_the_gradient_flow_drives_the_speed_and_grows_without_bound_at_the_blowup"
        ],
        r"$\frac{d}{dt}S=2H$ to $10^{-6}$; $H/S$ increasing, by more than 10 times before the blow-up",
        ("gf_blow_kappa_ratio", ".0f"),
    ),
    _c(
        "covariance-converges-despite-non-convexity",
        1,
        "D",
        "03_gradient_flow",
        r"Softmax attention with $V=I$, $A=-I$ takes every initial covariance to $0$, at the rate $1/(2t)$: "
        r"$\Sigma_t^{-1}=\Sigma_0^{-1}+2tI$, although $E_{-I}$ has no minimiser; the mean escapes (a late trace "
        r"shown).",
        [
            T
            + "test_gradient_flow.py::test_gaussian_energy_curves_energy_decreases_while_covariance_vanishes_and_mean_escapes",
            T + "test_gaussian.py::test_isotropic_covariance_precision_is_linear_in_time",
        ],
        r"$10^{-8}$ relative",
        ("gf_nc_trace_long", ".1e"),
    ),
    # ------------------------------------------------------------------ paper 2, chapter 04 (the reduction, then the regimes)
    _c(
        "kuramoto-daido-form",
        2,
        "S",
        "04_kuramoto_reduction",
        r"In $d=2$ linear attention on the circle is exactly a second-harmonic Kuramoto–Daido model, "
        r"$\dot\theta_k=\omega(R_2)+\operatorname{Im}\big(H(R_2)e^{-2i\theta_k}\big)$.",
        [
            T + "test_kuramoto.py::test_phase_velocity_equals_the_vector_model_of_linear_attention",
            T + "test_kuramoto.py::test_phase_velocity_equals_the_core_linear_attention_field_on_the_circle",
            T + "test_kuramoto.py::test_daido_coefficients_w_b_c_table_gives_the_vector_model",
            T + "test_kuramoto.py::test_solve_phases_matches_the_core_simulate",
        ],
        "$10^{-12}$",
        ("kd_err", ".1e"),
    ),
    _c(
        "kuramoto-score-convention",
        2,
        "D",
        "04_kuramoto_reduction",
        r"The reduction holds for the score $\langle x_k,Ax_j\rangle$; read as $\langle Ax_k,x_j\rangle$ (that is, "
        r"with $A^\top$) the same formula fails (its error shown).",
        [T + "test_kuramoto.py::test_phase_velocity_with_the_transposed_score_does_not_match_the_core"],
        r"off by more than $10^{-2}$",
        ("kd_err_T", ".2f"),
    ),
    _c(
        "daido-coefficients",
        2,
        "R",
        "04_kuramoto_reduction",
        r"The coupling coefficients equal those of the authors' code (their $w$-table); with "
        r"$Mz=m_+z+m_-\bar z$, $\det M=|m_+|^2-|m_-|^2$ and $\|M\|=|m_+|+|m_-|$.",
        [
            T + "test_kuramoto.py::test_daido_coefficients_equal_the_authors_w_formulas",
            T + "test_kuramoto.py::test_complex_parts_give_the_determinant_and_the_operator_norm",
        ],
        "$10^{-14}$",
    ),
    _c(
        "antipodal-symmetry",
        2,
        "D",
        "04_kuramoto_reduction",
        r"Flipping one token, $x_k\mapsto-x_k$, changes nothing for the others: clusters come in antipodal pairs "
        r"and the order parameter is $R_2$, not $R_1$.",
        [
            T + "test_particles.py::test_simulate_linear_attention_flipping_one_token_flips_only_that_token",
            T + "test_particles.py::test_linear_attention_trajectory_is_invariant_under_flipping_a_token_sign",
        ],
        "$10^{-12}$",
    ),
    _c(
        "rotation-equivariance",
        2,
        "D",
        "04_kuramoto_reduction",
        r"A global rotation $x\mapsto Ux$ with $A\mapsto UAU^\top$, $V\mapsto UVU^\top$ is a symmetry of every "
        r"variant.",
        [
            T + "test_particles.py::test_simulate_on_the_sphere_is_rotation_equivariant",
            T + "test_particles.py::test_trajectories_are_rotation_equivariant",
            T + "test_attention.py::test_field_is_rotation_equivariant",
        ],
        "$10^{-10}$",
    ),
    _c(
        "four-regimes",
        2,
        "S",
        "05_kuramoto_regimes",
        r"Linear attention on the circle shows static antipodal clusters, rotating clusters, oscillations and "
        r"partial clustering, depending on $A$ and $V$.",
        [
            T + "test_regimes.py::test_classify_regime_reproduces_the_regime_table",
            T + "test_regimes.py::test_predict_regime_agrees_with_the_classifier_on_random_members_of_each_family",
        ],
        "every regime reached",
    ),
    _c(
        "watanabe-strogatz-is-exact",
        2,
        "S",
        "04_kuramoto_reduction",
        r"Watanabe–Strogatz: for every $n$ the double angles are a Möbius image of constants driven by three real "
        r"ODEs, and the tokens reconstructed from them are the particle system's.",
        [
            T + "test_watanabe_strogatz.py::test_solve_watanabe_strogatz_reconstructs_the_particle_tokens",
            T + "test_watanabe_strogatz.py::test_ws_reconstruct_is_continuous_and_keeps_the_initial_angles",
            T
            + "test_watanabe_strogatz.py::test_solve_watanabe_strogatz_rejects_a_clustered_start_with_a_clear_message",
        ],
        r"$10^{-7}$ ($n=3,10,50$)",
        ("ws_err_f3", ".1e"),
    ),
    _c(
        "ott-antonsen-forms-agree",
        2,
        "D",
        "04_kuramoto_reduction",
        r"The Ott–Antonsen equation $\dot z=2i\omega(z)z+H(z)-\overline{H(z)}z^2$ in complex, $B/C$, polynomial and "
        r"polar form (the last as in the authors' code) is one equation.",
        [
            T + "test_ott_antonsen.py::test_ott_antonsen_rhs_complex_bc_polynomial_and_polar_forms_agree",
            T + "test_ott_antonsen.py::test_ott_antonsen_rhs_is_vectorised_over_centres_and_layers",
        ],
        "$10^{-13}$",
    ),
    _c(
        "ott-antonsen-invariance",
        2,
        "D",
        "04_kuramoto_reduction",
        r"The Ott–Antonsen flow keeps the unit circle (clustered states) and the open disk invariant.",
        [T + "test_ott_antonsen.py::test_solve_ott_antonsen_keeps_the_circle_and_the_disk"],
        "$10^{-10}$",
    ),
    _c(
        "ott-antonsen-tracks-the-particles",
        2,
        "D",
        "04_kuramoto_reduction",
        r"Tokens whose double angles are wrapped Cauchy follow the Ott–Antonsen solution: "
        r"$\sup_t|R_2-z|\le5/\sqrt n$ (non-rotating regimes).",
        [
            T + "test_ott_antonsen.py::test_oa_accuracy_error_below_5_over_sqrt_n_at_n_2000",
            T + "test_ott_antonsen.py::test_sample_ott_antonsen_has_the_wrapped_cauchy_moments",
        ],
        r"$5/\sqrt n$",
        ("oa_err_max", ".3f"),
    ),
    _c(
        "structural-stability-near-the-oa-manifold",
        2,
        "S",
        "04_kuramoto_reduction",
        r"Structural stability: data that start near the Poisson-kernel manifold stay near it on bounded time "
        r"intervals (in the bounded-Lipschitz distance); the gap shrinks like $n^{-1/2}$.",
        [T + "test_ott_antonsen.py::test_oa_accuracy_slope_vs_n_is_about_minus_one_half"],
        r"fitted slope in $[-0.7,-0.3]$",
        ("oa_slope", ".2f"),
    ),
    _c(
        "structural-stability-for-all-time",
        2,
        "S",
        "04_kuramoto_reduction",
        r"Structural stability for all time: for $V=I$ with $\operatorname{sym}A\succ0$ and for $A=I$ with "
        r"$\lambda_{\max}(V)>0$, data close to the uniform law in the bounded-Lipschitz distance stay close to the "
        r"Ott–Antonsen solution for all time (largest ratio $\sup_t d/d_0$ in those regions shown; $d=W_1$ on the "
        r"circle of double angles, $\tfrac2\pi W_1\le d_{BL}\le W_1$).",
        [
            T
            + "test_ott_antonsen.py::test_oa_stability_data_close_to_uniform_stay_close_for_all_time_in_the_summarys_regions",
            T + "test_transport.py::test_circle_bounded_lipschitz_lies_between_two_over_pi_w1_and_w1",
            T + "test_transport.py::test_circle_wasserstein1_equals_the_exact_transport_lp_with_the_arc_length_cost",
        ],
        r"ratio constant from $t=100$ to $200$ and below 4",
        ("stab_growth_inside", ".1f"),
    ),
    _c(
        "equispaced-constants-make-oa-exact",
        2,
        "D",
        "04_kuramoto_reduction",
        r"With equispaced instead of random constants the Ott–Antonsen solution is exact up to $O(|z|^{n-1})$.",
        [T + "test_ott_antonsen.py::test_oa_accuracy_equispaced_constants_make_the_reduction_exact"],
        r"$10^{-8}$ ($n=200$)",
        ("oa_eq_err", ".0e"),
    ),
    _c(
        "cluster-equation",
        2,
        "D",
        "04_kuramoto_reduction",
        r"On the circle the cluster pair at $\pm x_\theta$ moves with "
        r"$\dot\theta=\beta\,x_\theta^\top Ax_\theta\,\langle Vx_\theta,Jx_\theta\rangle$, and its transverse "
        r"exponent is $-2\operatorname{Re}\big(H(e^{2i\theta})e^{-2i\theta}\big)$.",
        [T + "test_kuramoto.py::test_cluster_velocity_and_transverse_exponent_match_the_cluster_equation"],
        "$10^{-12}$",
    ),
    _c(
        "regime-table",
        2,
        "D",
        "05_kuramoto_regimes",
        r"A classifier of the Ott–Antonsen flow and the closed forms agree on every row of the table of example "
        r"regimes, bistable case included (rows that agree shown).",
        [
            T + "test_regimes.py::test_classify_regime_reproduces_the_regime_table",
            T + "test_regimes.py::test_classify_regime_rk4_agrees_with_dop853_on_the_table",
            T + "test_regimes.py::test_predict_regime_returns_none_outside_the_families_and_at_degenerate_points",
        ],
        "every row",
        ("table_ok", ""),
    ),
    _c(
        "case1-closed-form",
        2,
        "D",
        "05_kuramoto_regimes",
        r"With $V=I$ the Ott–Antonsen field factorises: $\dot z=\frac\beta2(1-|z|^2)(\bar a_+z+a_-)$.",
        [T + "test_ott_antonsen.py::test_ott_antonsen_rhs_with_V_identity_is_the_case1_closed_form"],
        "$10^{-13}$",
    ),
    _c(
        "case1-regimes",
        2,
        "S",
        "05_kuramoto_regimes",
        r"$V=I$: $\operatorname{tr}A>0$ or $\det A\le0$ give static clusters, $\operatorname{sym}A\prec0$ partial "
        r"clustering at $z^*=-a_-/\bar a_+$, and $\operatorname{tr}A<0<\det A$ with $\operatorname{sym}A$ indefinite "
        r"is bistable.",
        [
            T + "test_regimes.py::test_predict_regime_case1_agrees_with_oa_integration_on_200_random_A",
            T + "test_highdim.py::test_predict_2d_regime_reproduces_the_planar_regime_table",
        ],
        r"limits to $10^{-6}$ (200 random $A$)",
        ("case1_limit_err", ".1e"),
    ),
    _c(
        "case1-oscillation-period",
        2,
        "D",
        "05_kuramoto_regimes",
        r"On $\operatorname{tr}A=0<\det A$ the orbits are circles around $z^*$, with period "
        r"$P=4\pi\big/\big(\beta|\operatorname{Im}a_+|\sqrt{(1-|z^*|^2-r^2)^2-4r^2|z^*|^2}\big)$.",
        [T + "test_regimes.py::test_case1_period_matches_the_measured_oscillation_period"],
        r"$10^{-3}$ relative",
    ),
    _c(
        "case2-clusters-iff-the-top-eigenvalue-is-nonnegative",
        2,
        "S",
        "05_kuramoto_regimes",
        r"$A=I$, $V$ symmetric: the tokens cluster on the top eigenvector if and only if $\lambda_{\max}(V)\ge0$; "
        r"otherwise $R_2\to\frac{\lambda_1-\lambda_2}{|\lambda_1+\lambda_2|}e^{2i\theta_1}$.",
        [T + "test_regimes.py::test_predict_regime_case2_limit_on_197_random_symmetric_V"],
        r"$10^{-5}$ (197 random $V$)",
        ("case2_err", ".1e"),
    ),
    _c(
        "rotating-clusters",
        2,
        "S",
        "05_kuramoto_regimes",
        r"Non-commuting $A=\operatorname{diag}(\alpha_1,\alpha_2)\succ0$ and $V=cI+sJ$, $c>0$: the clusters rotate "
        r"for ever, with period $P=\pi/(\beta|s|\sqrt{\alpha_1\alpha_2})$.",
        [T + "test_regimes.py::test_rotation_period_of_rotating_clusters_is_pi_over_beta_s_sqrt_a1_a2"],
        r"$10^{-6}$ relative",
        ("rot_err_oa", ".0e"),
    ),
    _c(
        "hidden-hamiltonian",
        2,
        "S",
        "05_kuramoto_regimes",
        r"$A=I$, $\operatorname{tr}V=0$: the Ott–Antonsen flow conserves $\mathcal E(z)$, with "
        r"$\dot z=-2i(1-|z|^2)^3\partial_{\bar z}\mathcal E$; $\det V>0$ gives closed orbits around a centre, "
        r"$\det V<0$ static clusters.",
        [
            T + "test_ott_antonsen.py::test_hamiltonian_is_conserved_orbits_close_and_the_centre_is_an_equilibrium",
            T + "test_ott_antonsen.py::test_hamiltonian_field_identity",
            T + "test_regimes.py::test_classify_regime_traceless_V_with_negative_det_goes_to_the_boundary_and_stops",
        ],
        r"relative drift $10^{-8}$",
        ("ham_drift", ".0e"),
    ),
    _c(
        "saddle-node-on-the-circle",
        2,
        "I",
        "05_kuramoto_regimes",
        r"$A=I$ and $V$ with diagonal $(c+a,c-a)$, off-diagonal $(b,-b)$, $c>0$: the clusters rotate with period "
        r"$\pi/(\beta\sqrt{b^2-a^2})$ for $|a|<|b|$, stop at a saddle-node on the circle at $|a|=|b|$, and are "
        r"static beyond.",
        [
            T + "test_regimes.py::test_rotation_period_on_the_snic_family_is_pi_over_sqrt_one_minus_a_squared",
            T + "test_regimes.py::test_classify_regime_beyond_the_saddle_node_is_static",
        ],
        r"$10^{-6}$ relative",
        ("snic_err", ".0e"),
    ),
    # ------------------------------------------------------------------ paper 2, chapter 05
    _c(
        "projective-reduction",
        2,
        "D",
        "06_high_dimensional",
        r"In any dimension linear attention is an exact $d\times d$ flow: $x_k(t)=\Phi(t)x_k(0)/|\Phi(t)x_k(0)|$ "
        r"with $\dot\Phi=\beta V\Sigma(t)A^\top\Phi$.",
        [
            T + "test_projective.py::test_projective_flow_matches_the_particle_system_in_d5",
            T
            + "test_projective.py::test_projective_flow_agrees_with_particles_across_the_clustering_transition_at_d100",
            T + "test_projective.py::test_solve_projective_is_the_projective_flow_of_the_layer",
            T + "test_projective.py::test_projective_flow_stops_at_the_clustering_level_found_by_the_particle_system",
        ],
        r"$10^{-8}$ ($d=5$), $10^{-6}$ ($d=100$)",
        ("hd_phi_err", ".0e"),
    ),
    _c(
        "tokens-stay-on-the-sphere",
        2,
        "D",
        "06_high_dimensional",
        r"The tangent field keeps every $|x_k|=1$ without renormalisation ($d=100$, $n=200$, RK45 with rtol "
        r"$10^{-6}$).",
        [
            T + "test_particles.py::test_velocity_tangent_field_keeps_tokens_on_the_sphere_without_renormalisation",
            T + "test_particles.py::test_particle_field_keeps_tokens_on_the_sphere_without_renormalisation_at_d100",
            T + "test_particles.py::test_tokens_stay_on_the_sphere",
            T + "test_particles.py::test_sphere_field_is_tangent",
        ],
        r"norm drift below $10^{-6}$",
    ),
    _c(
        "beta-only-rescales-time",
        2,
        "D",
        "06_high_dimensional",
        r"For linear attention $\beta$ only rescales time, $x^\beta(t)=x^1(\beta t)$ (relative spread of "
        r"$\beta\,t_{0.99}$ shown).",
        [
            T + "test_kuramoto.py::test_solve_phases_beta_only_rescales_time",
            T + "test_particles.py::test_linear_attention_beta_only_rescales_time",
            T + "test_projective.py::test_projective_flow_beta_only_rescales_time",
            T + "test_highdim.py::test_sweep_returns_results_in_grid_order_serially_and_in_parallel",
        ],
        "$10^{-8}$",
        ("hd_beta_spread", ".0e"),
    ),
    _c(
        "linear-attention-energy-does-not-decrease",
        2,
        "D",
        "06_high_dimensional",
        r"With $V=A=A^\top$ linear attention is a gradient ascent: $\operatorname{tr}(A\Sigma_tA\Sigma_t)$ does not "
        r"decrease.",
        [T + "test_particles.py::test_simulate_linear_attention_with_V_equal_A_symmetric_does_not_decrease_the_energy"],
        r"increments above $-10^{-8}$",
    ),
    _c(
        "order-parameters-through-sigma",
        2,
        "D",
        "06_high_dimensional",
        r"For unit tokens $\hat R_1=(n|\bar x|^2-1)/(n-1)$ and $\hat R_2=(n\operatorname{tr}\Sigma^2-1)/(n-1)$: "
        r"about $0$ and $1/d$ for uniform tokens, $\approx0$ and $1$ for two antipodal clusters, $1$ and $1$ for one.",
        [
            T + "test_metrics.py::test_order_parameters_through_sigma_equal_the_pairwise_means",
            T + "test_metrics.py::test_order_parameters_of_uniform_tokens_are_about_zero_and_one_over_d",
            T + "test_metrics.py::test_order_parameters_of_antipodal_clusters_are_minus_one_over_n_minus_one_and_one",
            T + "test_metrics.py::test_order_parameters_of_one_cluster_are_both_one",
        ],
        "$10^{-12}$",
    ),
    _c(
        "matrix-recipes",
        2,
        "R",
        "06_high_dimensional",
        r"The matrix recipes of the authors' app (four structured cases and a random one) have the spectra they "
        r"promise.",
        [
            T + "test_highdim.py::test_case1_symmetric_part_has_the_promised_spectrum_and_V_is_identity",
            T + "test_highdim.py::test_case2_V_is_symmetric_with_the_chosen_top_eigenvalue",
            T + "test_highdim.py::test_cases_3_and_4_have_the_spectrum_of_their_block",
            T + "test_highdim.py::test_random_case_has_entries_of_variance_sigma_squared_over_d_and_seeds_reproduce",
        ],
        "$10^{-12}$",
        ("hd_spec_err", ".0e"),
    ),
    _c(
        "authors-app-uses-the-transposed-score",
        2,
        "R",
        "06_high_dimensional",
        r"The authors' high-dimensional app scores $\langle Ax_k,x_j\rangle$, that is, uses $A^\top$: for a "
        r"non-symmetric $A$ its runs differ from the book's.",
        [T + "test_projective.py::test_projective_flow_uses_the_library_convention_score_x_dot_A_y"],
        r"runs differ by more than $10^{-2}$",
    ),
    _c(
        "linear-attention-clusters-antipodally-in-high-dimension",
        2,
        "S",
        "06_high_dimensional",
        r"At $d=100$, $n=200$ linear attention, where it clusters, makes two antipodal clusters ($\hat R_2\to1$, "
        r"$\hat R_1\approx0$), and stays spread with $V$ negative definite (runs ending in two antipodal clusters "
        r"shown).",
        [T + "test_highdim.py::test_run_variant_at_d100_linear_clusters_antipodally_and_usa_into_one_cluster"],
        r"$\hat R_2>0.99$ and $|\hat R_1|<0.05$ by $t=60$",
        ("hd_la_antipodal", ""),
    ),
    _c(
        "softmax-variants-form-one-cluster-faster",
        2,
        "D",
        "06_high_dimensional",
        r"Unnormalised and normalised softmax attention form a single cluster, and much faster than linear attention "
        r"(median ratio of the clustering times shown).",
        [T + "test_highdim.py::test_run_variant_at_d100_linear_clusters_antipodally_and_usa_into_one_cluster"],
        r"$\hat R_1>0.99$ by $t=10$",
        ("hd_speedup", ".1f"),
    ),
    _c(
        "planar-regimes-persist-in-high-dimension",
        2,
        "S",
        "06_high_dimensional",
        r"The planar classification predicts what linear attention does at $d=100$ in the structured cases (cases "
        r"that agree shown).",
        [
            T + "test_highdim.py::test_predict_for_case_on_the_high_dimensional_recipes",
            T + "test_highdim.py::test_predict_2d_regime_identity_A_agrees_with_2d_particle_runs",
            T + "test_highdim.py::test_run_variant_at_d100_linear_clusters_antipodally_and_usa_into_one_cluster",
        ],
        "the predicted regime",
        ("hd_n_agree", ""),
    ),
    _c(
        "rotating-clusters-in-high-dimension",
        2,
        "D",
        "06_high_dimensional",
        r"The rotating clusters of the conformal case turn at the planar rate $\beta|b|$ in high dimension.",
        [T + "test_highdim.py::test_run_variant_case3_clusters_rotate_at_the_2d_rate_beta_b_in_d30"],
        r"$10^{-5}$ relative ($d=30$)",
        ("hd_c3_speed", ".4f"),
    ),
    _c(
        "oscillation-is-damped-in-high-dimension",
        2,
        "D",
        "06_high_dimensional",
        r"Paper 2's summary says the oscillations persist at $d=100$; in $\hat R_2$ the book finds them damped for "
        r"uniform data: the rotation planes of $V$ start in step and drift out of step, and $\hat R_2$ averages them "
        r"(late range over early range of $\hat R_2$ shown).",
        [
            T + "test_highdim.py::test_run_variant_case4_oscillation_is_damped_in_high_dimension",
            T + "test_highdim.py::test_case4_r2_oscillation_persists_with_data_near_a_plane_and_in_a_dominant_plane",
        ],
        "late range below 0.6 times the early range ($d=30$)",
        ("hd_osc_R2_ratio", ".2f"),
    ),
    _c(
        "oscillations-persist-in-the-coordinate-means",
        2,
        "S",
        "06_high_dimensional",
        r"At $d=100$ the oscillations of Case 4 ($|a|<|b|$) persist for linear and softmax attention, in the "
        r"authors' diagnostic: the per-coordinate mean token values keep oscillating with an undiminished range "
        r"(late over early range shown, linear attention).",
        [
            T
            + "test_highdim.py::test_case4_oscillation_persists_in_the_coordinate_means_for_linear_and_softmax_attention"
        ],
        "late range at least 0.7 times the early range ($d=30$)",
        ("hd_osc_means_ratio", ".2f"),
    ),
    _c(
        "oscillation-persists-near-one-plane",
        2,
        "D",
        "06_high_dimensional",
        r"The oscillation of $\hat R_2$ persists at $d=100$ when the data lie near one rotation plane, and the "
        r"order parameter of a dominant rotation plane keeps oscillating (late over early range of $\hat R_2$ "
        r"shown, data near a plane).",
        [T + "test_highdim.py::test_case4_r2_oscillation_persists_with_data_near_a_plane_and_in_a_dominant_plane"],
        "late range at least 0.7 times the early range ($d=30$)",
        ("hd_osc_near_ratio", ".2f"),
    ),
    # ------------------------------------------------------------------ beyond the papers, chapter 08
    _c(
        "residual-blocks-are-euler-steps",
        1,
        "D",
        "08_transformer",
        r"Without normalisation or MLP, $L$ residual blocks of step $T/L$ are the explicit Euler scheme of the "
        r"particle system: the same numbers as the library's Euler integrator (largest difference shown).",
        [
            T + "test_transformer.py::test_forward_without_norm_is_the_euler_scheme_of_simulate",
            T + "test_transformer.py::test_forward_equals_a_plain_residual_loop_for_every_norm",
        ],
        r"round-off ($10^{-13}$); a plain residual loop to $10^{-12}$",
        ("tf_euler_gap", ".1g"),
    ),
    _c(
        "depth-error-falls-like-one-over-l",
        1,
        "D",
        "08_transformer",
        r"The network approaches the ODE at depth $T$ like $1/L$, without normalisation and with the sphere "
        r"retraction (fitted slope of the distance against $L$ shown, sphere retraction).",
        [T + "test_transformer.py::test_forward_error_against_a_fine_ode_solution_falls_like_one_over_L"],
        r"slope $-1\pm0.2$ against a fine Runge–Kutta solution",
        ("tf_slope_sphere", ".2f"),
    ),
    _c(
        "sphere-blocks-cluster-later",
        2,
        "D",
        "08_transformer",
        r"A block that normalises $x+h\Gamma(x)$ is the sphere model's retraction step with the shorter step "
        r"$h/(1+h\langle x,\Gamma(x)\rangle)$: at the depths of real networks the tokens reach one cluster later "
        r"than the ODE (median depth of one cluster at $L=12$, step 1, shown).",
        [
            T
            + "test_transformer.py::test_sphere_blocks_are_the_tangent_retraction_with_a_shorter_step_and_converge_with_simulate",
            T + "test_transformer.py::test_sphere_blocks_at_a_large_step_reach_one_cluster_later_than_the_ode",
        ],
        r"exact identity to $10^{-15}$; at step 1 at least 2 units of depth later than the ODE",
        ("tf_t1_L12", ".2f"),
    ),
    _c(
        "post-layer-norm-is-the-sphere-model",
        2,
        "D",
        "08_transformer",
        r"Post-LN on centred tokens, with $Q$ and $K$ scaled by $1/\sqrt d$, is the sphere model on the unit sphere "
        r"of $\mathbf 1^\perp$ with $V$ compressed to $PVP$ (nothing changes for $V=I$): its directions are the "
        r"sphere blocks' up to LayerNorm's $\epsilon$ (largest difference shown).",
        [T + "test_transformer.py::test_post_layer_norm_is_the_sphere_retraction_on_the_centred_sphere"],
        r"$10^{-4}$ ($\epsilon=10^{-5}$)",
        ("tf_post_gap", ".1e"),
    ),
    _c(
        "pre-layer-norm-runs-on-a-slower-clock",
        2,
        "D",
        "08_transformer",
        r"Pre-LN lets the residual stream grow, at most like $r\le1+t$, and its directions follow the sphere model "
        r"on the slower clock $\tau=\int dt/r\ge\log(1+T)$ (clock at depth $T$ shown).",
        [
            T
            + "test_transformer.py::test_pre_layer_norm_stream_grows_at_most_linearly_and_follows_the_sphere_model_on_its_clock"
        ],
        r"radius bound to round-off; on its clock the order parameter at least twice as close to the ODE's",
        ("tf_tau", ".2f"),
    ),
    _c(
        "relu-mlp-speeds-up-clustering",
        1,
        "D",
        "08_transformer",
        r"A random ReLU MLP at initialisation (tied weights) leaves the clustering in place and brings the single "
        r"cluster sooner (median depth of one cluster at the largest strength shown).",
        [T + "test_transformer.py::test_a_relu_mlp_keeps_one_cluster_sooner_and_a_tanh_mlp_leaves_several"],
        r"one cluster in every cloud; median depth below 0.8 times the attention's alone (strength 4)",
        ("tf_relu_t1_strong", ".2f"),
    ),
    _c(
        "tanh-mlp-splits-the-cluster",
        1,
        "D",
        "08_transformer",
        r"A random tanh MLP (an odd map) of strength 2 or more leaves several clusters, often two antipodal ones "
        r"(mean number of clusters at the largest strength shown).",
        [T + "test_transformer.py::test_a_relu_mlp_keeps_one_cluster_sooner_and_a_tanh_mlp_leaves_several"],
        r"more than one cluster in at least 5 of 8 clouds (strength 4)",
        ("tf_tanh_clusters", ".2f"),
    ),
    _c(
        "fresh-weights-converge-like-one-over-root-l",
        1,
        "D",
        "08_transformer",
        r"With weights drawn afresh in every block the network still has a limit as $L$ grows, the ODE of the mean "
        r"layer rather than of any one layer: two draws differ like $L^{-1/2}$ (fitted slope shown).",
        [T + "test_transformer.py::test_two_draws_of_fresh_weights_differ_like_one_over_root_L"],
        r"slope $-0.5\pm0.15$; two tied draws stay apart",
        ("tf_spread_slope", ".2f"),
    ),
    _c(
        "fresh-weights-merge-clusters",
        1,
        "D",
        "08_transformer",
        r"Fresh weights per block end in one cluster more often than tied weights (Gaussian recipe, $\beta=4$, "
        r"depth 24; probability with fresh weights shown).",
        [T + "test_transformer.py::test_fresh_weights_raise_the_probability_of_one_cluster"],
        r"at least 20 of 24 clouds, and 6 more than tied",
        ("tf_single_fresh", ".2f"),
    ),
    _c(
        "tied-weights-keep-the-gaussian-rank",
        1,
        "D",
        "08_transformer",
        r"Tied clustering weights $A=-P$ ($V=I$): the tokens' covariance follows the Gaussian ODE and keeps rank "
        r"$\dim\ker(A+A^\top)$ (numerical rank at depth $T$ shown).",
        [T + "test_transformer.py::test_tied_clustering_weights_keep_the_rank_of_the_gaussian_limit"],
        r"eigenvalues within 25 % of the closed form; rank counted above 0.1",
        ("tf_rank_tied", ""),
    ),
    _c(
        "fresh-weights-collapse-the-rank",
        1,
        "D",
        "08_transformer",
        r"Fresh clustering weights: the covariance follows the Gaussian ODE of the mean layer $-(r/d)I$ and "
        r"collapses in every direction like $1/t$ (numerical rank at depth $T$ shown).",
        [T + "test_transformer.py::test_fresh_clustering_weights_collapse_the_rank_like_the_mean_layer"],
        r"eigenvalues within 30 % of the closed form; rank counted above 0.1",
        ("tf_rank_fresh", ""),
    ),
)

del T

_BY_KEY = {c.key: c for c in CLAIMS}


def claim(key: str) -> Claim:
    """The claim registered under ``key`` (a ``KeyError`` names the unknown key).

    Parameters
    ----------
    key : str
        The claim's slug, ``Claim.key`` (e.g. ``"theorem-b-mean-field-limit"``); its row on the
        claims page carries the label ``claim-<key>``.

    Returns
    -------
    Claim
        The registry's entry for ``key`` (the same frozen object as in ``CLAIMS``).

    Raises
    ------
    KeyError
        If no claim of ``CLAIMS`` has this key.
    """
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"no claim {key!r} in the registry") from None


def claims_for(chapter: str | None = None, paper: int | None = None) -> tuple[Claim, ...]:
    """The claims shown in ``chapter`` and/or stated by ``paper``, in registry order.

    Parameters
    ----------
    chapter : str, optional
        Chapter stem, a key of ``CHAPTERS`` (e.g. ``"04_kuramoto_reduction"``); ``None`` keeps every
        chapter.
    paper : int, optional
        1 (Castin et al.) or 2 (Li et al.); ``None`` keeps both papers. Any other number selects nothing.

    Returns
    -------
    tuple of Claim
        The entries of ``CLAIMS`` that pass both filters, in the registry's order; empty if none does.

    Raises
    ------
    ValueError
        If ``chapter`` is given and is not a key of ``CHAPTERS``.
    """
    if chapter is not None and chapter not in CHAPTERS:
        raise ValueError(f"unknown chapter {chapter!r}; known: {', '.join(CHAPTERS)}")
    return tuple(c for c in CLAIMS if (chapter is None or c.chapter == chapter) and (paper is None or c.paper == paper))


def claims_by_test() -> dict[str, tuple[str, ...]]:
    """Pytest node id -> the keys of the claims it checks.

    Returns
    -------
    dict of str to tuple of str
        One entry per test named by some claim's ``Claim.tests``
        (``tests/<file>.py::<function>``, without parametrisation brackets); its value lists the keys of
        the claims that name the test, in registry order. Tests that check no claim are absent.
    """
    out: dict[str, list[str]] = {}
    for c in CLAIMS:
        for t in c.tests:
            out.setdefault(t, []).append(c.key)
    return {t: tuple(keys) for t, keys in out.items()}


def _measured_cell(c: Claim, local: bool) -> str:
    if c.measured is None:
        return "—"
    key, fmt = c.measured
    if local:
        return f"{{glue:text}}`{key}:{fmt}`" if fmt else f"{{glue:text}}`{key}`"
    # another page's value: `path::key:format` (an empty format after the last colon pastes the value as is)
    return f"{{glue:text}}`{c.chapter}.ipynb::{key}:{fmt}`"


def _short_test(node_id: str) -> str:
    return node_id.removeprefix("tests/")


def claims_markdown(chapter: str | None = None, *, local: bool = False, paper: int | None = None) -> str:
    r"""The claims of ``chapter`` (every chapter if ``None``) as a MyST ``list-table``.

    Columns: statement, paper, tag, measured, tolerance, tests. The measured cell pastes the value
    the chapter glued: ``{glue:text}`<chapter>.ipynb::<key>:<fmt>``` from another page (the claims
    appendix), or ``{glue:text}`<key>:<fmt>``` with ``local=True``, for a chapter showing its own
    rows. Without ``local`` each row starts with the target ``(claim-<key>)=``, so that any page can
    link to it with ``{ref}`text <claim-key>```; ``local=True`` leaves the targets to the appendix
    (one label, one place). Display the result with ``IPython.display.Markdown``: the book parses
    Markdown outputs as MyST (``nb_render_markdown_format: myst``).

    Parameters
    ----------
    chapter : str, optional
        Chapter stem (a key of ``CHAPTERS``) whose claims are listed; ``None`` lists the claims of
        every chapter, in registry order, in one table.
    local : bool
        True for a chapter showing its own rows: the measured cells paste glue keys of the current
        page and the rows carry no ``(claim-<key>)=`` target. False (default) for the appendix: the
        values are pasted from each claim's chapter notebook and each row gets its target.
    paper : int, optional
        Keep only the claims of paper 1 or 2; ``None`` keeps both.

    Returns
    -------
    str
        The MyST source of one ``list-table`` directive (header row plus one row per claim selected
        by :func:`claims_for`), ending with a newline; or the line ``*No claim is registered here.*``
        when no claim is selected.
    """
    rows = claims_for(chapter, paper)
    if not rows:
        return "*No claim is registered here.*\n"
    lines = [
        ":::{list-table}",
        ":header-rows: 1",
        ":widths: 32 7 5 11 16 29",
        ":class: claims-table",
        "",
        "* - statement",
        "  - paper",
        "  - tag",
        "  - measured",
        "  - tolerance",
        "  - tests",
    ]
    for c in rows:
        statement = c.statement if local else f"(claim-{c.key})=\n\n    {c.statement}"
        tests = "\n\n    ".join(f"`{_short_test(t)}`" for t in c.tests)
        lines += [
            f"* - {statement}",
            f"  - {c.paper}",
            f"  - {c.tag}",
            f"  - {_measured_cell(c, local)}",
            f"  - {c.tolerance}",
            f"  - {tests}",
        ]
    lines.append(":::")
    return "\n".join(lines) + "\n"
