"""Every figure's parameters in one place, each with a fast setting (CI, default) and a full one.

A chapter's ``parameters`` cell sets ``mode = "fast"`` or ``"full"`` (papermill: ``-p mode full``)
and reads its settings with :func:`settings`. Keeping the numbers here makes them citable, testable
and identical between the book, the tests and a reader's own runs.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

__all__ = ["EXPERIMENTS", "MODES", "settings"]

MODES = ("fast", "full")

# name -> {"fast": {...}, "full": {...}}; a missing key in "full" falls back to "fast".
EXPERIMENTS: dict[str, dict[str, dict[str, Any]]] = {
    # Intro figure: softmax attention on the circle, the setting of Geshkovski, Letrouit,
    # Polyanskiy, Rigollet (n = 32, d = 2, A = V = I, beta = 1).
    "intro_clustering": {
        "fast": {"n": 32, "d": 2, "beta": 1.0, "T": 15.0, "dt": 0.02, "seed": 0,
                 "snapshots": [0.0, 1.0, 3.0, 15.0], "frames": 60},
        "full": {"T": 20.0, "dt": 0.005, "frames": 120},
    },
    # ---- paper 1, Gaussian chapter (chapters/02_gaussian_preservation.md) -------------------
    # Cone figures F1-F5 of the official code (spec §6). Matrices come from the legacy NumPy
    # generator with the seeds below (tokendynamics.gaussian_figures.figure_setup); "grid" is
    # (n_u, n_w, u_min, u_max, w_min, w_max) of the official init_grid; every variant has the
    # official projected-Euler settings. "every": keep every k-th initial condition (1 = all).
    "gaussian_F1": {  # convergence to zero
        "fast": {"seed": 35, "grid": [10, 10, -0.5, 0.5, -0.5, 0.5], "every": 1, "view": [20, -174],
                 "color": "start",
                 "variants": {"softmax": {"step": 0.3, "tol_low": 1e-5},
                              "l2": {"step": 0.3, "tol_low": 1e-5},
                              "multihead": {"step": 0.3, "tol_low": 1e-5, "H": 2},
                              "sinkhorn": {"step": 0.5, "tol_low": 1e-5}}},
    },
    "gaussian_F2": {  # convergence to a line (softmax, L2) and to a plane (multi-head)
        "fast": {"seed": 36, "grid": [10, 10, -0.5, 0.5, -0.5, 0.5], "every": 1, "view": [20, -86],
                 "color": "end",
                 "variants": {"softmax": {"step": 0.5, "tol_low": 1e-4},
                              "l2": {"step": 0.5, "tol_low": 1e-4},
                              "multihead": {"step": 0.5, "tol_low": 1e-4, "H": 2}}},
    },
    "gaussian_F3": {  # convergence to two lines
        "fast": {"seed": 36, "seed_V": 32, "grid": [20, 20, -1.0, 1.0, -1.0, 1.0], "every": 1,
                 "view": [20, -88], "color": "end",
                 "variants": {"softmax": {"step": 0.01, "tol_low": 1e-7},
                              "l2": {"step": 0.01, "tol_low": 1e-7}}},
    },
    "gaussian_F4": {  # blow-up (softmax, multi-head) or divergence (L2, Sinkhorn)
        "fast": {"seed": 33, "grid": [40, 40, -1.0, 1.0, -1.0, 1.0], "every": 1, "view": [20, -112],
                 "color": "start", "accurate_every": 8,
                 "variants": {"softmax": {"step": 0.01, "tol_low": 1e-4, "max_iter": 100000},
                              "multihead": {"step": 0.002, "tol_low": 1e-4, "max_iter": 100000, "H": 2},
                              "l2": {"step": 0.001, "tol_low": 1e-5, "tol_high": 1e4},
                              "sinkhorn": {"step": 0.01, "tol_low": 1e-5, "tol_high": 1e4}}},
        "full": {"accurate_every": 1},
    },
    "gaussian_F5": {  # two basins: convergence or blow-up depending on Sigma_0
        "fast": {"seed": 36, "seed_V": 35, "discard": [8, 7], "grid": [30, 30, -1.0, 1.0, -1.0, 1.0],
                 "every": 1, "view": [20, -112], "color": "start",
                 "variants": {"softmax": {"step": 0.003, "tol_low": 1e-4},
                              "l2": {"step": 0.002, "tol_low": 1e-4},
                              "multihead": {"step": 0.002, "tol_low": 1e-4, "H": 2}}},
    },
    # Rank histograms F6 (official histograms.py). One row per (kind, value matrix).
    "gaussian_F6": {
        "fast": {"dims": [3, 4, 5], "n_per_dim": 100, "tol_rank": 0.1, "seed_Q": 40, "seed_inits": 41,
                 "rows": {
                     "softmax-identity": {"kind": "softmax", "value": "identity", "steps": [0.09, 0.05, 0.02],
                                          "tol_low": 1e-4, "max_iter": 60000, "n_max": 1000},
                     "softmax-random": {"kind": "softmax", "value": "random", "seed_V": 26,
                                        "steps": [0.09, 0.06, 0.02], "tol_low": 5e-5, "max_iter": 90000,
                                        "n_max": 10000},
                     "l2-identity": {"kind": "l2", "value": "identity", "steps": [0.09, 0.06, 0.02],
                                     "tol_low": 1e-4, "max_iter": 60000, "n_max": 1000},
                     "l2-random": {"kind": "l2", "value": "random", "seed_V": 27, "steps": [0.15, 0.15, 0.15],
                                   "tol_low": 5e-5, "max_iter": 50000, "n_max": 1000}}},
    },
    # Particles against the Gaussian ODE (claims C1-C3): one layer per variant, d = 2.
    "gaussian_particles": {
        "fast": {"seed": 1, "T": 0.5, "dt": 0.05, "n": 1000, "n_sinkhorn": 300,
                 "n_list": [250, 500, 1000], "n_list_sinkhorn": [150, 300], "quadrature": 24,
                 "mean0": [0.3, -0.2], "cov0": [[0.5, 0.1], [0.1, 0.3]],
                 "A": [[-0.5, 0.4], [-0.2, -0.3]], "V": [[1.0, 0.3], [-0.5, 0.8]],
                 "Q": [[0.6, -0.3], [0.2, 0.5]], "K": [[-0.7, 0.1], [0.3, -0.4]]},
        "full": {"n": 4000, "n_sinkhorn": 1500, "n_list": [250, 1000, 4000],
                 "n_list_sinkhorn": [250, 500, 1000, 1500]},
    },
    # The mean: Sinkhorn decouples it (e^{tV} alpha_0), softmax does not.
    "gaussian_mean": {
        "fast": {"T": 3.0, "n": 400, "dt": 0.05, "seed": 2, "mean0": [1.0, 0.5],
                 "cov0": [[0.6, 0.2], [0.2, 0.4]], "A": [[-0.8, 0.5], [-0.1, -0.6]],
                 "V": [[0.3, -1.0], [1.0, 0.2]]},
        "full": {"n": 1000, "dt": 0.025},
    },
    # Static stand-in for the widget: softmax, V = I, A = rotation of a fixed symmetric part.
    "gaussian_widget": {
        "fast": {"frames": 36, "T": 6.0, "grid": [7, 7, -0.8, 0.8, -0.8, 0.8]},
        "full": {"frames": 60},
    },
    # ---- paper 1, gradient-flow chapter (chapters/03_gradient_flow.md) ----------------------
    # Energy along softmax attention with V = I, A = -I (claims C18, C19): particles sampled from
    # N(mean0, cov0) and the Gaussian ODE; "mc_pairs" Monte Carlo pairs check the closed form.
    "gradient_flow_energy": {
        "fast": {"n": 400, "T": 3.0, "dt": 0.05, "seed": 3, "mean0": [0.3, -0.2],
                 "cov0": [[0.5, 0.1], [0.1, 0.3]], "mc_pairs": 400_000, "snapshots": [0.0, 1.0, 3.0]},
        "full": {"n": 2000, "dt": 0.02, "mc_pairs": 4_000_000},
    },
    # Sign rule of spec §5.3 on random cases: symmetric A with eigenvalues of size "scale",
    # Gaussian V, n tokens from N(0, spread^2 I) in dimension d.
    "gradient_flow_sign_rule": {
        "fast": {"cases": 200, "n": 100, "d": 2, "scale": 0.7, "spread": 0.7, "seed": 4},
        "full": {"cases": 1000, "n": 200},
    },
    # Sinkhorn attention as a (twisted) Bures-Wasserstein gradient flow (claims C16, C17):
    # V = A (plain) and V = M A (twisted, M SPD); "quadrature" Gauss-Hermite nodes per axis are
    # the weighted particles of the mean-field PDE; "fd_h" the finite-difference step.
    "gradient_flow_sinkhorn": {
        "fast": {"A": [[0.6, 0.3], [0.3, -0.8]], "M": [[1.0, 0.45], [0.45, 0.4]], "eps": 1.0,
                 "mean0": [0.3, -0.2], "cov0": [[0.5, 0.1], [0.1, 0.3]], "T": 2.0, "n_times": 201,
                 "quadrature": 8, "dt": 0.1, "fd_h": 1e-5},
        "full": {"quadrature": 12, "dt": 0.05, "n_times": 401},
    },
    # The twisted metric: unnormalised attention with A = -I and V SPD is the d_V gradient descent
    # of E_{-I}; each step dt is one layer; "lp_every": exact transport between consecutive layers
    # is computed every k-th layer.
    "gradient_flow_twisted": {
        "fast": {"n": 200, "T": 3.0, "dt": 0.02, "V": [[0.1, 0.0], [0.0, 1.0]], "seed": 5,
                 "mean0": [0.3, -0.2], "cov0": [[0.5, 0.1], [0.1, 0.3]], "lp_every": 3},
        "full": {"n": 500, "dt": 0.01, "lp_every": 2},
    },
    # Non-convexity of E_{-I} next to the convergence of the covariance (spec §5.5).
    "gradient_flow_nonconvex": {
        "fast": {"s_max": 1.5, "n_s": 61, "times": 31, "eps": 1.0, "t_long": 1000.0},
        "full": {"n_s": 121, "times": 61},
    },
    # Widget and its static stand-in: softmax, A = rotation of diag(a1, a2), V = diag(v1, v2).
    "gradient_flow_widget": {
        "fast": {"T": 3.0, "n_times": 121, "frames": 30, "a1": -1.0, "a2_range": [-1.0, 1.5],
                 "v": [1.0, 0.5], "theta": 0.0},
        "full": {"frames": 50},
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
