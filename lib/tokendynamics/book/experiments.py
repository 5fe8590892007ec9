"""Every figure's parameters in one place, each with a fast setting (CI, default) and a full one.

A chapter's ``parameters`` cell sets ``mode = "fast"`` or ``"full"`` (papermill: ``-p mode full``)
and reads its settings with :func:`settings`. Keeping the numbers here makes them citable, testable
and identical between the book, the tests and a reader's own runs.
"""

from __future__ import annotations

import ast
import math
import re
from copy import deepcopy
from dataclasses import dataclass
from typing import Any

__all__ = [
    "EXPERIMENTS",
    "MODES",
    "settings",
    "PARAMETER_RULES",
    "ChapterParameter",
    "parameters_cell",
    "parameter_schema",
    "check_parameters",
]

MODES = ("fast", "full")

# name -> {"fast": {...}, "full": {...}}; a missing key in "full" falls back to "fast".
EXPERIMENTS: dict[str, dict[str, dict[str, Any]]] = {
    # Intro figure: softmax attention on the circle, the setting of Geshkovski, Letrouit,
    # Polyanskiy, Rigollet (n = 32, d = 2, A = V = I, beta = 1).
    "intro_clustering": {
        "fast": {
            "n": 32,
            "d": 2,
            "beta": 1.0,
            "T": 15.0,
            "dt": 0.02,
            "seed": 0,
            "snapshots": [0.0, 1.0, 3.0, 15.0],
            "frames": 60,
        },
        "full": {"T": 20.0, "dt": 0.005, "frames": 120},
    },
    # Intro, second figure: the same system at a larger beta, where clusters form fast and then
    # merge only after a long time (metastability).
    "intro_metastability": {
        "fast": {"n": 32, "beta": 6.0, "T": 200.0, "dt": 0.05, "seed": 0, "save_every": 4},
        "full": {"T": 400.0, "dt": 0.02, "save_every": 10},
    },
    # ---- Paper 1, chapter 01_well_posedness (variants, stability, mean-field limit, masked attention) ----
    # One layer for the gallery, the stability study and the widget: A (library convention, score
    # <x, A y>) has negative definite symmetric part, V = I; the d = 2 mean-field study flips the signs of
    # both (the same covariance dynamics, a contracting mean).
    "p1_gallery": {
        "fast": {
            "n": 120,
            "seed": 0,
            "A": [[-1.0, 0.5], [-0.5, -0.5]],
            "V": [[1.0, 0.0], [0.0, 1.0]],
            "beta": 2.0,
            "T": 3.0,
            "dt": 0.05,
            "sink_mass": 0.1,
            "frames": 30,
        },
        # RK4 with dt = 0.025 agrees with dt = 0.01 to plotting accuracy: the full setting spends its
        # time on more tokens and frames, not on a smaller step
        "full": {"n": 400, "dt": 0.025, "frames": 60},
    },
    "p1_stability": {
        "fast": {
            "n": 150,
            "seed": 1,
            "A": [[-1.0, 0.5], [-0.5, -0.5]],
            "V": [[1.0, 0.0], [0.0, 1.0]],
            "beta": 1.0,
            "deltas": [1e-3, 1e-2, 1e-1],
            "T": 2.0,
            "dt": 0.05,
            "save_every": 4,
            "sink_mass": 0.1,
        },
        "full": {"n": 400},
    },
    # d = 1 Gaussian oracle: v = -1 (the mean contracts, so that no single random number, such as the
    # empirical mean amplified by e^{vT}, dominates a run's error) and a = 0.25, so that a^2 sigma0^4 < 1/2
    # (see the chapter). An independent sample for every (seed, n); RK4 with dt = 0.5 is exact to 1e-5 here.
    "p1_meanfield_1d": {
        "fast": {
            "ns": [50, 200, 800],
            "seeds": 24,
            "T": 2.0,
            "a": 0.25,
            "v": -1.0,
            "alpha0": 0.5,
            "sigma0": 1.0,
            "dt": 0.5,
        },
        "full": {"ns": [50, 100, 200, 400, 800, 1600], "seeds": 24},
    },
    # d = 2, uniform tokens in a square: two independent n-token solutions per seed (no reference run)
    "p1_meanfield_2d": {
        "fast": {
            "ns": [50, 200, 800],
            "seeds": 8,
            "A": [[1.0, -0.5], [0.5, 0.5]],
            "V": [[-1.0, 0.0], [0.0, -1.0]],
            "beta": 1.0,
            "T": 1.0,
            "dt": 0.2,
        },
        "full": {"ns": [50, 100, 200, 400, 800], "seeds": 12},
    },
    # masked attention, d = 1 product data lambda x N(alpha0, sigma0^2), sink cloud of mass m0
    "p1_masked": {
        "fast": {
            "ns": [50, 200, 800],
            "seeds": 6,
            "sink_masses": [0.0, 0.05, 0.2],
            "T": 1.0,
            "a": -0.5,
            "v": 1.0,
            "alpha0": 0.5,
            "sigma0": 1.0,
            "dt": 0.5,
            "share_sink_masses": [0.02, 0.1, 0.3],
            "share_n": 200,
        },
        "full": {"ns": [50, 100, 200, 400, 800, 1600], "seeds": 6},
    },
    "p1_widget": {
        "fast": {
            "n": 60,
            "seed": 0,
            "A": [[-1.0, 0.5], [-0.5, -0.5]],
            "V": [[1.0, 0.0], [0.0, 1.0]],
            "beta": 1.5,
            "T": 2.0,
            "dt": 0.2,
            "betas": [0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0],
        },
        "full": {"betas": [0.25, 0.4, 0.55, 0.7, 0.85, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0]},
    },
    # ---- paper 2, d = 2: the Kuramoto reduction (chapter 04_kuramoto_reduction) --------------
    # beta = 1 throughout (the defaults of paper 2's code); matrices of the regime examples of chapter 4.
    # Token paths and OA portraits, one example per regime (labels of regimes.REGIME_TABLE)
    "kuramoto_regimes": {
        "fast": {
            "n": 100,
            "T": 40.0,
            "dt": 0.02,
            "seed": 0,
            "beta": 1.0,
            "n_grid": 17,
            "examples": {
                "static_clusters": "V=I, A=[[1,2],[-1,0.5]]",
                "rotating_clusters": "A=diag(2,1), V=[[1,-1],[1,1]]",
                "oscillation": "A=I, V=[[0.5,1],[-1,-0.5]]",
                "partial": "A=I, V=diag(-1,-3)",
            },
        },
        "full": {"n": 200, "dt": 0.01, "n_grid": 23},
    },
    # particles vs OA from a wrapped-Cauchy start (chapter 4, the OA figure)
    "kuramoto_oa_vs_particles": {
        "fast": {"n": 2000, "z0_abs": 0.3, "z0_arg": 0.7, "T": 15.0, "dt": 0.04, "seed": 1},
        "full": {"n": 8000, "T": 20.0, "dt": 0.01},
    },
    # Watanabe–Strogatz variables over the particles (repo WS app: n = 20, T = 10) and the
    # exactness check for n in {3, 10, 50}
    "kuramoto_ws": {
        "fast": {
            "n": 20,
            "T": 10.0,
            "frames": 401,
            "seed": 2,
            "A": [[1.0, 0.5], [-0.3, 0.8]],
            "V": [[1.8, -0.8], [1.2, 0.4]],
            "check_ns": [3, 10, 50],
            "check_T": 10.0,
        },
        "full": {"frames": 1001},
    },
    # Case 1 (V = I): regime map over (tr A, det A) at fixed skew part (a21 - a12)/2
    "kuramoto_case1": {
        "fast": {"skew": 1.0, "tr": [-3.0, 3.0], "det": [-2.0, 3.0], "grid": 41, "T": 400.0, "z0": [0.0, 0.1]},
        "full": {"grid": 101, "T": 1500.0},
    },
    # Case 2 (A = I, V symmetric): |R2(inf)| vs lambda_max with lambda_2 = lambda_max - gap
    "kuramoto_case2": {
        "fast": {
            "gap": 2.0,
            "theta1": 0.4,
            "lmax": [-3.0, 2.0],
            "points": 51,
            "T": 400.0,
            "particle_lmax": [-2.5, -1.5, -0.6, 0.5, 1.5],
            "n": 1000,
            "particle_T": 40.0,
            "dt": 0.1,
            "seed": 3,
        },
        "full": {
            "points": 201,
            "particle_lmax": [-2.8, -2.2, -1.6, -1.0, -0.4, 0.2, 0.8, 1.4],
            "n": 4000,
            "particle_T": 60.0,
            "dt": 0.05,
        },
    },
    # hidden Hamiltonian: A = I, V = [[v11, v12], [-v12, -v11]]
    "kuramoto_hamiltonian": {
        "fast": {
            "family": [[0.5, 1.0], [1.0, 1.0], [1.5, 1.0]],
            "T": 40.0,
            "n": 1000,
            "dt": 0.05,
            "seed": 4,
            "orbit_starts": [0.1, 0.25, 0.45, 0.65, 0.85],
        },
        "full": {"n": 4000, "dt": 0.02, "T": 60.0},
    },
    # SNIC: A = I, V = [[c + a, b], [-b, c - a]], rotation frequency 2 pi / P vs a
    "kuramoto_snic": {
        "fast": {
            "b": 1.0,
            "c": 0.3,
            "a": [0.0, 0.15, 0.3, 0.45, 0.6, 0.75, 0.85, 0.92, 0.96, 0.985, 1.03, 1.1, 1.25, 1.5],
            "T_min": 40.0,  # each period is measured over four closed-form periods, at least T_min
            "rtol": 1e-9,
        },
        # a = b = 1 itself is the degenerate saddle-node: left out of the grids
        "full": {
            "a": [round(0.025 * k, 3) for k in range(61) if k != 40] + [0.96, 0.985, 0.995, 0.999],
            "rtol": 1e-10,
        },
    },
    # rotating clusters for non-commuting A, V
    "kuramoto_rotating": {
        "fast": {
            "A": [[2.0, 0.0], [0.0, 1.0]],
            "V": [[1.0, -1.0], [1.0, 1.0]],
            "n": 200,
            "T": 20.0,
            "dt": 0.01,
            "seed": 5,
            "snapshots": [0.0, 3.0, 12.0, 12.6, 13.2, 13.8],
        },
        "full": {"T": 40.0, "dt": 0.005},
    },
    # OA accuracy vs n (n = 250 ... 16000, 3-10 seeds)
    "kuramoto_oa_accuracy": {
        "fast": {
            "ns": [100, 400, 1600, 6400],
            "seeds": 3,
            "T": 10.0,
            "z0_abs": 0.3,
            "z0_arg": 0.7,
            "seed": 6,
            "cases": ["A=I, V=[[1,2],[-2,-1]]", "A=diag(2,1), V=[[1,-1],[1,1]]"],
        },
        "full": {"ns": [250, 1000, 4000, 16000], "seeds": 10},
    },
    # Long-time structural stability (chapter 04_kuramoto_reduction): perturbations of the uniform law
    # (ott_antonsen.perturbed_uniform) against their Ott-Antonsen solution, for two (A, V) in each
    # family of paper 2's summary (V = I with sym A > 0; A = I with lambda_max(V) > 0), the Kuramoto
    # case A = V = I (in both) and two outside them.
    "kuramoto_stability": {
        "fast": {
            "n": 800,
            "T": 200.0,
            "n_times": 121,
            "epsilon": [0.01, 0.03, 0.1],
            "seed": 3,
            "cases": {
                "V = I, sym A ≻ 0": {"A": [[1.0, 0.5], [-0.3, 2.0]], "V": [[1.0, 0.0], [0.0, 1.0]], "inside": True},
                "A = I, V = diag(2, −1)": {
                    "A": [[1.0, 0.0], [0.0, 1.0]],
                    "V": [[2.0, 0.0], [0.0, -1.0]],
                    "inside": True,
                },
                "A = V = I": {"A": [[1.0, 0.0], [0.0, 1.0]], "V": [[1.0, 0.0], [0.0, 1.0]], "inside": True},
                "A = I, V traceless, det V > 0": {
                    "A": [[1.0, 0.0], [0.0, 1.0]],
                    "V": [[0.5, 1.0], [-1.0, -0.5]],
                    "inside": False,
                },
                "A = I, V = diag(−1, −3)": {
                    "A": [[1.0, 0.0], [0.0, 1.0]],
                    "V": [[-1.0, 0.0], [0.0, -3.0]],
                    "inside": False,
                },
            },
            "oscillating": "A = I, V traceless, det V > 0",
            "kuramoto": "A = V = I",
            "case2": "A = I, V = diag(2, −1)",
        },
        "full": {"n": 2000, "T": 400.0, "n_times": 241, "epsilon": [0.005, 0.01, 0.03, 0.1]},
    },
    # live widget and its static stand-in: a path through the regimes in the SNIC family
    # A = I, V = [[c + a, 1], [-1, c - a]]: c from -0.3 to 0.3 at a = 0.5, then a from 0.5 to 1.5
    "kuramoto_explorer": {
        "fast": {
            "frames": 15,
            "n": 80,
            "T": 20.0,
            "seed": 7,
            "z0_abs": 0.3,
            "z0_arg": 0.6,
            "n_grid": 15,
            "live_n_grid": 11,  # the live explorer's arrows: a coarser grid, lighter to redraw
        },
        "full": {"frames": 45, "n": 200, "n_grid": 19},
    },
    # Chapter 5 (paper 2's high-dimensional experiments): d = 100, n = 200, linear vs unnormalised
    # softmax vs softmax attention on the matrix recipes of the authors' app. Every run costs about
    # a second at this size, so even the fast setting uses the paper's d and n. Runs last what they
    # need: linear attention clusters by t ~ 50 in the structured cases and t ~ 300 in the random
    # one, the softmax variants by t ~ 20; after clustering the state is mildly stiff and an explicit
    # solver only pays for resting clusters, so longer runs buy nothing but cost. "full" adds a
    # longer run of the random case, three token seeds and finer grids in the sweeps, more stored
    # times, and runs independent jobs on two processes.
    "highdim_cases": {
        "fast": {
            "d": 100,
            "n": 200,
            "beta": 1.0,
            "seed": 0,
            "matrix_seed": 42,
            "T": {"linear": 400.0, "unnormalized_softmax": 40.0, "softmax": 40.0},
            "T_random_linear": 400.0,
            "n_eval": 201,
            "rtol": 1e-6,
            "atol": 1e-8,
            "n_jobs": 1,
            "cases": [
                {"case": "case1", "spectrum": "positive"},
                {"case": "case1", "spectrum": "mixed"},
                {"case": "case1", "spectrum": "negative"},
                {"case": "case2", "top": 2.0},
                {"case": "case2", "top": -0.5},
                {"case": "case3", "a": 1.0, "b": 0.5},
                {"case": "case4", "a": 1.0, "b": 0.5},
                {"case": "case4", "a": 0.5, "b": 1.0},
                {"case": "random", "sigma": 1.0},
            ],
            "gram_cases": [0, 3, 7],
            "means_cases": [3, 5, 7],
            "levels": [0.1, 0.5, 0.99],
            "check_T": 40.0,
        },
        "full": {"T_random_linear": 800.0, "n_eval": 401, "n_jobs": 2},
    },
    "highdim_sweeps": {
        "fast": {
            "d": 100,
            "n": 200,
            "level": 0.99,
            "seeds": [0],
            "n_jobs": 1,
            "betas": [0.5, 1.0, 2.0, 4.0],
            "beta_case": {"case": "case2", "top": 2.0},
            "tops": [0.25, 0.5, 1.0, 2.0, 4.0],
            "dims": [10, 25, 50, 100, 200],
            "T": {"linear": 400.0, "unnormalized_softmax": 25.0},
            "n_eval": 301,
        },
        "full": {
            "seeds": [0, 1, 2],
            "n_jobs": -1,
            "betas": [0.25, 0.5, 1.0, 2.0, 4.0],
            "tops": [0.25, 0.5, 1.0, 2.0, 4.0],
            "dims": [5, 10, 25, 50, 100, 200],
        },
    },
    # Oscillations at d = 100 (Case 4, |a| < |b|): uniform data (n tokens, and a larger n), data near
    # one plane, and one dominant rotation plane; T long enough for several periods.
    "highdim_oscillation": {
        "fast": {
            "d": 100,
            "n": 200,
            "n_large": 1000,
            "a": 0.5,
            "b": 1.0,
            "T": 400.0,
            "n_eval": 801,
            "spread": 0.05,
            "dominant": 5.0,
            "seed": 0,
            "window": 50.0,
        },
        "full": {"n_large": 1500},
    },
    # The static stand-in for the widget: Case 4 with b = 1 and a crossing |a| = |b| (chapter 5).
    "highdim_family": {
        "fast": {
            "d": 100,
            "n": 200,
            "seed": 0,
            "b": 1.0,
            "a_values": [0.0, 0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0],
            "T": {"linear": 150.0, "unnormalized_softmax": 30.0},
            "n_eval": 151,
        },
        "full": {"a_values": [0.0, 0.2, 0.4, 0.5, 0.6, 0.8, 0.9, 1.0, 1.1, 1.2, 1.4, 1.6, 2.0], "n_eval": 301},
    },
    "highdim_widget": {
        "fast": {"d": 16, "n": 64, "T": 30.0, "seed": 0},
    },
    # ---- paper 1, Gaussian chapter (chapters/02_gaussian_preservation.md) -------------------
    # The cone figures of the authors' code (paper 1, chapter 2 of the book). Matrices come from the legacy NumPy
    # generator with the seeds below (tokendynamics.gaussian_figures.figure_setup); "grid" is
    # (n_u, n_w, u_min, u_max, w_min, w_max) of the official init_grid; every variant has the
    # official projected-Euler settings. "every": keep every k-th initial condition (1 = all).
    "gaussian_F1": {  # convergence to zero
        "fast": {
            "seed": 35,
            "grid": [10, 10, -0.5, 0.5, -0.5, 0.5],
            "every": 1,
            "view": [20, -174],
            "color": "start",
            "variants": {
                "softmax": {"step": 0.3, "tol_low": 1e-5},
                "l2": {"step": 0.3, "tol_low": 1e-5},
                "multihead": {"step": 0.3, "tol_low": 1e-5, "H": 2},
                "sinkhorn": {"step": 0.5, "tol_low": 1e-5},
            },
        },
    },
    "gaussian_F2": {  # convergence to a line (softmax, L2) and to a plane (multi-head)
        "fast": {
            "seed": 36,
            "grid": [10, 10, -0.5, 0.5, -0.5, 0.5],
            "every": 1,
            "view": [20, -86],
            "color": "end",
            "variants": {
                "softmax": {"step": 0.5, "tol_low": 1e-4},
                "l2": {"step": 0.5, "tol_low": 1e-4},
                "multihead": {"step": 0.5, "tol_low": 1e-4, "H": 2},
            },
        },
    },
    "gaussian_F3": {  # convergence to two lines
        "fast": {
            "seed": 36,
            "seed_V": 32,
            "grid": [20, 20, -1.0, 1.0, -1.0, 1.0],
            "every": 1,
            "view": [20, -88],
            "color": "end",
            "variants": {"softmax": {"step": 0.01, "tol_low": 1e-7}, "l2": {"step": 0.01, "tol_low": 1e-7}},
        },
    },
    "gaussian_F4": {  # blow-up (softmax, multi-head) or divergence (L2, Sinkhorn)
        "fast": {
            "seed": 33,
            "grid": [40, 40, -1.0, 1.0, -1.0, 1.0],
            "every": 1,
            "view": [20, -112],
            "color": "start",
            "accurate_every": 16,
            "variants": {
                "softmax": {"step": 0.01, "tol_low": 1e-4, "max_iter": 100000},
                "multihead": {"step": 0.002, "tol_low": 1e-4, "max_iter": 100000, "H": 2},
                "l2": {"step": 0.001, "tol_low": 1e-5, "tol_high": 1e4},
                "sinkhorn": {"step": 0.01, "tol_low": 1e-5, "tol_high": 1e4},
            },
        },
        "full": {"accurate_every": 1},
    },
    "gaussian_F5": {  # two basins: convergence or blow-up depending on Sigma_0
        "fast": {
            "seed": 36,
            "seed_V": 35,
            "discard": [8, 7],
            "grid": [30, 30, -1.0, 1.0, -1.0, 1.0],
            "every": 1,
            "view": [20, -112],
            "color": "start",
            "accurate_every": 40,
            "variants": {
                "softmax": {"step": 0.003, "tol_low": 1e-4},
                "l2": {"step": 0.002, "tol_low": 1e-4},
                "multihead": {"step": 0.002, "tol_low": 1e-4, "H": 2},
            },
        },
        # "accurate_every": the two-head runs continued with the accurate solver (every k-th start)
        "full": {"accurate_every": 8},
    },
    # Rank histograms F6 (official histograms.py). One row per (kind, value matrix).
    "gaussian_F6": {
        "fast": {
            "dims": [3, 4, 5],
            "n_per_dim": 100,
            "tol_rank": 0.1,
            "seed_Q": 40,
            "seed_inits": 41,
            "rows": {
                "softmax-identity": {
                    "kind": "softmax",
                    "value": "identity",
                    "steps": [0.09, 0.05, 0.02],
                    "tol_low": 1e-4,
                    "max_iter": 60000,
                    "n_max": 1000,
                },
                "softmax-random": {
                    "kind": "softmax",
                    "value": "random",
                    "seed_V": 26,
                    "steps": [0.09, 0.06, 0.02],
                    "tol_low": 5e-5,
                    "max_iter": 90000,
                    "n_max": 10000,
                },
                "l2-identity": {
                    "kind": "l2",
                    "value": "identity",
                    "steps": [0.09, 0.06, 0.02],
                    "tol_low": 1e-4,
                    "max_iter": 60000,
                    "n_max": 1000,
                },
                "l2-random": {
                    "kind": "l2",
                    "value": "random",
                    "seed_V": 27,
                    "steps": [0.15, 0.15, 0.15],
                    "tol_low": 5e-5,
                    "max_iter": 50000,
                    "n_max": 1000,
                },
            },
        },
    },
    # Particles against the Gaussian ODE (claims C1-C3): one layer per variant, d = 2.
    "gaussian_particles": {
        "fast": {
            "seed": 1,
            "T": 0.5,
            "dt": 0.05,
            "n": 1000,
            "n_sinkhorn": 300,
            "n_list": [250, 500, 1000],
            "n_list_sinkhorn": [150, 300],
            "quadrature": 14,
            "dt_pde": 0.025,
            "mean0": [0.3, -0.2],
            "cov0": [[0.5, 0.1], [0.1, 0.3]],
            "A": [[-0.5, 0.4], [-0.2, -0.3]],
            "V": [[1.0, 0.3], [-0.5, 0.8]],
            "Q": [[0.6, -0.3], [0.2, 0.5]],
            "K": [[-0.7, 0.1], [0.3, -0.4]],
        },
        "full": {
            "n": 4000,
            "n_sinkhorn": 1000,
            "n_list": [250, 1000, 4000],
            "n_list_sinkhorn": [250, 500, 1000],
            "quadrature": 20,
            "dt_pde": 0.0125,
        },
    },
    # The clustering condition of paper 1's summary, V A + A^T V^T < 0, in two readings of A: a seeded
    # random search (tokendynamics.gaussian.clustering_condition_search) for two value families, a
    # counterexample (a draw of the "positive" search, seed 0, rounded), L2 with rank-one keys, and
    # the low-rank limit of Sinkhorn attention (A = -q q^T, V = I).
    "gaussian_condition": {
        "fast": {
            "draws": 40,
            "T": 100.0,
            "seed": 0,
            "families": ["symmetric", "positive"],
            "A_ce": [[-0.666, 0.704], [-0.59, 0.184]],
            "V_ce": [[1.048, 0.719], [-1.338, 0.303]],
            "quadrature": 12,
            "l2_draws": 40,
            "l2_T": 30.0,
            "q": [0.6, 0.8],
            "cov0": [[0.7, 0.2], [0.2, 0.5]],
            "sk_T": 400.0,
        },
        "full": {"draws": 200, "l2_draws": 200},
    },
    # The mean: Sinkhorn decouples it (e^{tV} alpha_0), softmax does not.
    "gaussian_mean": {
        "fast": {
            "T": 3.0,
            "n": 200,
            "dt": 0.1,
            "seed": 2,
            "mean0": [1.0, 0.5],
            "cov0": [[0.6, 0.2], [0.2, 0.4]],
            "A": [[-0.8, 0.5], [-0.1, -0.6]],
            "V": [[0.3, -1.0], [1.0, 0.2]],
        },
        "full": {"n": 1000, "dt": 0.05},
    },
    # Static stand-in for the widget: softmax, A = diag(-1, s), V = I: s < 0 converges to zero,
    # s = 0 to a line, s > 0 blows up.
    "gaussian_widget": {
        "fast": {
            "frames": 30,
            "s_min": -1.0,
            "s_max": 0.6,
            "T": 6.0,
            "step": 0.01,
            "grid": [7, 7, -0.8, 0.8, -0.8, 0.8],
        },
        "full": {"frames": 60},
    },
    # ---- paper 1, gradient-flow chapter (chapters/03_gradient_flow.md) ----------------------
    # Energy along softmax attention with V = I, A = -I (closed form and decrease): particles sampled from
    # N(mean0, cov0) and the Gaussian ODE; "mc_pairs" Monte Carlo pairs check the closed form.
    "gradient_flow_energy": {
        "fast": {
            "n": 400,
            "T": 3.0,
            "dt": 0.05,
            "seed": 3,
            "mean0": [0.3, -0.2],
            "cov0": [[0.5, 0.1], [0.1, 0.3]],
            "mc_pairs": 400_000,
            "snapshots": [0.0, 1.0, 3.0],
        },
        "full": {"n": 800, "mc_pairs": 2_000_000},
    },
    # Sign rule (eq. (3.3) of the chapter) on random cases: symmetric A with eigenvalues of size "scale",
    # Gaussian V, n tokens from N(0, spread^2 I) in dimension d.
    "gradient_flow_sign_rule": {
        "fast": {"cases": 200, "n": 100, "d": 2, "scale": 0.7, "spread": 0.7, "seed": 4},
        "full": {"cases": 1000},
    },
    # Sinkhorn attention as a (twisted) Bures-Wasserstein gradient flow, and its energy decreasing:
    # V = A (plain) and V = M A (twisted, M SPD); "quadrature" Gauss-Hermite nodes per axis are
    # the weighted particles of the mean-field PDE; "fd_h" the finite-difference step.
    "gradient_flow_sinkhorn": {
        "fast": {
            "A": [[0.6, 0.3], [0.3, -0.8]],
            "M": [[1.0, 0.45], [0.45, 0.4]],
            "eps": 1.0,
            "mean0": [0.3, -0.2],
            "cov0": [[0.5, 0.1], [0.1, 0.3]],
            "T": 2.0,
            "n_times": 201,
            "quadrature": 8,
            "dt": 0.1,
            "fd_h": 1e-5,
        },
        "full": {"quadrature": 10, "n_times": 401},
    },
    # The twisted metric: unnormalised attention with A = -I and V SPD is the d_V gradient descent
    # of E_{-I}; each step dt is one layer; "lp_every": exact transport between consecutive layers
    # is computed every k-th layer.
    "gradient_flow_twisted": {
        "fast": {
            "n": 200,
            "T": 3.0,
            "dt": 0.02,
            "V": [[0.1, 0.0], [0.0, 1.0]],
            "seed": 5,
            "mean0": [0.3, -0.2],
            "cov0": [[0.5, 0.1], [0.1, 0.3]],
            "lp_every": 3,
        },
        "full": {"n": 300},
    },
    # Non-convexity of E_{-I} next to the convergence of the covariance (second variation, eq. (3.6)).
    "gradient_flow_nonconvex": {
        "fast": {"s_max": 1.5, "n_s": 61, "times": 31, "eps": 1.0, "t_long": 1000.0},
        "full": {"n_s": 121},
    },
    # Several equilibria: k = 1..k_max equally spaced clusters on the circle, softmax with A = V = I.
    "gradient_flow_equilibria": {
        "fast": {"beta": 6.0, "k_max": 6},
        "full": {},
    },
    # Metastable plateaus: n tokens uniform on the circle (seed), softmax with A = V = I at large beta,
    # RK4 with step dt, every save_every-th step stored; plateaus last at least min_fraction of the run.
    "gradient_flow_metastable": {
        "fast": {"n": 32, "beta": 6.0, "T": 150.0, "dt": 0.1, "save_every": 10, "seed": 0, "min_fraction": 0.05},
        "full": {"n": 64, "T": 300.0},
    },
    # Unbounded second variation: unnormalised attention with V = A = I (the W2 gradient ascent of E_I)
    # from n tokens N(shift, spread^2 I), adaptive steps up to the blow-up.
    "gradient_flow_blowup": {
        "fast": {
            "n": 30,
            "spread": 0.5,
            "shift": [0.3, 0.0],
            "seed": 41,
            "T": 5.0,
            "dt": 0.005,
            "rtol": 1e-10,
            "atol": 1e-12,
        },
        "full": {"n": 100},
    },
    # Widget and its static stand-in: softmax, A = rotation of diag(a1, a2), V = diag(v1, v2); the live
    # explorer evaluates the curves at live_n_times times (a third of the library call's cost).
    "gradient_flow_widget": {
        "fast": {
            "T": 3.0,
            "n_times": 121,
            "live_n_times": 41,
            "frames": 30,
            "a1": -1.0,
            "a2_range": [-1.0, 1.5],
            "v": [1.0, 0.5],
            "theta": 0.0,
        },
        "full": {},
    },
    # ---- Beyond the papers: phase diagrams of every attention variant (chapters/06_phase_diagrams.md)
    # Clouds of n = 32 tokens uniform on the sphere of R^3; one batched run per (kind, recipe) over
    # a grid of beta, outcomes examined at every depth in "depths" (RK4 with step "dt"). The beta
    # grids differ by kind: unnormalised softmax speeds up like e^beta (small steps, small beta),
    # Sinkhorn needs many iterations per step beyond beta = 2, L2 with Q = K = I is softmax at 2 beta.
    "phase_diagrams": {
        "fast": {
            "n": 32,
            "d": 3,
            "clouds": 10,
            "seed": 0,
            "layer_seed": 1,
            "threshold": 0.999,
            "depths": [float(k) for k in range(1, 25)],
            "report_depth": 24.0,
            "kinds": {
                "softmax": {"betas": [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0], "dt": 0.5},
                "l2": {"betas": [0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0], "dt": 0.5},
                "sigmoid": {"betas": [0.25, 0.5, 1.0, 2.0, 4.0, 8.0], "dt": 0.5},
                "unnormalized_softmax": {"betas": [0.125, 0.25, 0.5, 1.0, 2.0], "dt": 0.25},
                "sinkhorn": {"betas": [0.25, 0.5, 1.0, 2.0], "dt": 0.5, "sinkhorn_tol": 1e-7},
                "linear": {"betas": [0.0625, 0.125, 0.25, 0.5, 1.0, 2.0], "dt": 0.5},
            },
            "recipes": ["identity", "gaussian", "goe", "minus_identity"],
            "recipe_kinds": ["softmax", "linear"],
            # finer beta grids around the transitions of softmax and linear attention (Q = K = V = I),
            # on the same clouds: the critical beta is interpolated between grid points
            "critical": {
                "softmax": [1.414, 1.682, 2.378, 2.828, 3.364],
                "linear": [0.0884, 0.1768, 0.3536, 0.7071, 1.4142],
            },
            "resample_kind": "softmax",
            "resample_recipe": "gaussian",
            "resample_every": [4.0, 1.0],
            "count_ns": [8, 16, 32, 64],
            "count_clouds": 6,
            "count_depth": 24.0,
            "step_check": {"clouds": 5, "factor": 4, "depth": 12.0, "betas": 1},
            "planar": {"clouds": 32, "beta": 1.0, "depths": [25.0, 50.0, 100.0], "dt": 0.5},
            "ward_sample": 64,
            "bootstrap": 1000,
            "n_jobs": 1,
        },
        "full": {
            "clouds": 256,
            "count_clouds": 64,
            "step_check": {"clouds": 16, "factor": 4, "depth": 24.0, "betas": 2},
            "planar": {"clouds": 256, "beta": 1.0, "depths": [25.0, 50.0, 100.0, 200.0], "dt": 0.5},
            "ward_sample": 256,
            "bootstrap": 2000,
            "n_jobs": 2,
        },
    },
}


def settings(name: str, mode: str = "fast", **overrides) -> dict[str, Any]:
    """Parameters of experiment ``name`` in ``mode`` ("fast" or "full"), with reader overrides.

    >>> settings("intro_clustering")["n"]
    32
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if name not in EXPERIMENTS:
        raise KeyError(f"unknown experiment {name!r}; known: {sorted(EXPERIMENTS)}")
    entry = EXPERIMENTS[name]
    out = deepcopy(entry["fast"])
    if mode == "full":
        out.update(deepcopy(entry.get("full", {})))
    unknown = set(overrides) - set(out)
    if unknown:
        raise KeyError(f"experiment {name!r} has no parameter(s) {sorted(unknown)}")
    out.update({k: v for k, v in overrides.items() if v is not None})
    return out


# ---------------------------------------------------------------------------------------------
# the chapters' own parameters (papermill's ``-p name value``), checked before a chapter runs
# ---------------------------------------------------------------------------------------------

#: Types and ranges of chapter parameters, by name. A chapter's parameters, their defaults and
#: their descriptions come from its ``parameters`` cell (:func:`parameter_schema`); the type is
#: ``"type"`` here if given, else that of the default (None is accepted iff the default is None);
#: ``"min"``/``"max"`` bound numbers (``"strict"``: the bound itself is excluded), ``"choices"``
#: lists the accepted values. A new chapter's parameter needs an entry here only if its default
#: is None or its range is restricted.
PARAMETER_RULES: dict[str, dict[str, Any]] = {
    "mode": {"choices": MODES},
    "n": {"type": int, "min": 1},
    "seed": {"type": int, "min": 0},
    "beta": {"type": float, "min": 0.0, "strict": True},
    "T": {"type": float, "min": 0.0, "strict": True},
}

_TYPE_WORDS = {bool: "True or False", int: "an integer", float: "a number", str: "a string"}


@dataclass(frozen=True)
class ChapterParameter:
    """One parameter of a chapter: its name, default, description (the comment on its line) and rule."""

    name: str
    default: Any
    comment: str
    type: type
    rule: dict

    def expected(self) -> str:
        """What a valid value is, in words (for error messages)."""
        rule = self.rule
        if "choices" in rule:
            words = "one of " + ", ".join(repr(c) for c in rule["choices"])
        else:
            words = _TYPE_WORDS.get(self.type, self.type.__name__)
            for key, op in (("min", ">"), ("max", "<")):
                if key in rule:
                    words += f" {op}{'' if rule.get('strict') else '='} {rule[key]:g}"
        return words + (" or None" if self.default is None else "")

    def check(self, value) -> Any:
        """``value`` if it is valid; a ValueError naming the parameter and what is expected otherwise."""
        if value is None and self.default is None:
            return None
        given = value
        ok = value is not None
        if ok and self.type is bool:
            ok = isinstance(value, bool)
        elif ok and self.type is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif ok and self.type is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            value = float(value) if ok else value
        elif ok:
            ok = isinstance(value, self.type)
        rule = self.rule
        if ok and "choices" in rule:
            ok = value in rule["choices"]
        if ok and "min" in rule:
            ok = value > rule["min"] if rule.get("strict") else value >= rule["min"]
        if ok and "max" in rule:
            ok = value < rule["max"] if rule.get("strict") else value <= rule["max"]
        if not ok:
            hint = f" ({self.comment})" if self.comment else ""
            raise ValueError(f"parameter {self.name} must be {self.expected()}, got {given!r}{hint}")
        return value


_FENCE = re.compile(r"^(`{3,}|~{3,})\{code-cell\}")


def parameters_cell(markdown: str) -> str | None:
    """Source of the code cell tagged ``parameters`` in a MyST-markdown notebook (None if there is none).

    Reads ``:tags: [parameters]`` option lines and ``---``-delimited YAML option blocks, the two
    forms jupytext writes.
    """
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence = m.group(1)
        j = i + 1
        options = []
        if j < len(lines) and lines[j].strip() == "---":
            j += 1
            while j < len(lines) and lines[j].strip() != "---":
                options.append(lines[j])
                j += 1
            j += 1
        else:
            while j < len(lines) and lines[j].startswith(":"):
                options.append(lines[j])
                j += 1
        body = []
        while j < len(lines) and not lines[j].startswith(fence):
            body.append(lines[j])
            j += 1
        tagged = any(re.match(r"^:?tags:\s*\[[^\]]*\bparameters\b[^\]]*\]", o.strip()) for o in options)
        if tagged:
            return "\n".join(body).strip("\n")
        i = j + 1
    return None


def parameter_schema(source: str) -> dict[str, ChapterParameter]:
    """The parameters defined by a ``parameters`` cell: ``name = literal  # description`` lines.

    Names and defaults come from the cell (parsed with ``ast``; defaults must be literals), the
    description from the comment on each line, the type from the default (or from
    :data:`PARAMETER_RULES` when the default is None) and the range from :data:`PARAMETER_RULES`.
    """
    tree = ast.parse(source)
    lines = source.splitlines()
    out: dict[str, ChapterParameter] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            raise ValueError(f"the parameters cell may only assign literals to names, found: {ast.unparse(node)}")
        name = node.targets[0].id
        try:
            default = ast.literal_eval(node.value)
        except ValueError:
            raise ValueError(
                f"the default of parameter {name} must be a literal, got {ast.unparse(node.value)}"
            ) from None
        line = lines[(node.end_lineno or node.lineno) - 1]
        comment = line.split("#", 1)[1].strip() if "#" in line[node.end_col_offset :] else ""
        rule = dict(PARAMETER_RULES.get(name, {}))
        typ = rule.pop("type", None) or (None if default is None else type(default))
        if typ is None:
            raise ValueError(
                f"parameter {name} defaults to None and has no type in PARAMETER_RULES "
                "(tokendynamics.book.experiments): add one"
            )
        param = ChapterParameter(name, default, comment, typ, rule)
        try:
            param.check(default)
        except ValueError as exc:
            raise ValueError(f"the default of parameter {name} breaks its own rule: {exc}") from None
        out[name] = param
    return out


def check_parameters(schema: dict[str, ChapterParameter], given: dict[str, Any], chapter: str = "") -> dict[str, Any]:
    """Check reader-given parameter values against a chapter's schema; return them (floats as floats).

    Raises a one-line ValueError naming the first wrong parameter: an unknown name (listing the
    chapter's parameters) or a value of the wrong type or out of range (saying what is expected).
    """
    where = f" of chapter {chapter}" if chapter else ""
    out = {}
    for name, value in given.items():
        if name not in schema:
            known = ", ".join(schema) or "none"
            raise ValueError(f"unknown parameter {name!r}{where}; its parameters are: {known}")
        out[name] = schema[name].check(value)
    return out
