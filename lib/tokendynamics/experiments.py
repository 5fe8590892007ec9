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
    # Chapter 5 (paper 2 §7, F11-F12, spec §7.5): d = 100, n = 200, linear vs unnormalised softmax
    # vs softmax attention on the matrix recipes of spec §7.5. Every run costs well under a second
    # at this size, so even the fast setting uses the paper's d and n; "full" adds tighter
    # tolerances, a longer random-case run, finer sweeps with several token seeds, and more frames.
    "highdim_cases": {
        "fast": {"d": 100, "n": 200, "beta": 1.0, "seed": 0, "matrix_seed": 42,
                 "T": {"linear": 400.0, "unnormalized_softmax": 40.0, "softmax": 40.0},
                 "n_eval": 201, "rtol": 1e-6, "atol": 1e-8,
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
                 "gram_cases": [0, 3, 5, 7], "levels": [0.1, 0.5, 0.99], "check_T": 40.0},
        "full": {"T": {"linear": 1200.0, "unnormalized_softmax": 100.0, "softmax": 100.0},
                 "n_eval": 801, "rtol": 1e-8, "atol": 1e-10},
    },
    "highdim_sweeps": {
        "fast": {"d": 100, "n": 200, "level": 0.99, "seeds": [0], "n_jobs": 1,
                 "betas": [0.5, 1.0, 2.0, 4.0], "beta_case": {"case": "case2", "top": 2.0},
                 "tops": [0.25, 0.5, 1.0, 2.0, 4.0], "dims": [10, 25, 50, 100, 200],
                 "T": {"linear": 400.0, "unnormalized_softmax": 25.0}, "n_eval": 301},
        "full": {"seeds": [0, 1, 2, 3, 4], "n_jobs": -1, "betas": [0.25, 0.5, 1.0, 2.0, 4.0, 8.0],
                 "tops": [0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0], "dims": [5, 10, 25, 50, 100, 200, 400],
                 "T": {"linear": 1000.0, "unnormalized_softmax": 60.0}},
    },
    # The static stand-in for the widget: Case 4 with b = 1 and a crossing |a| = |b| (spec §5.5).
    "highdim_family": {
        "fast": {"d": 100, "n": 200, "seed": 0, "b": 1.0, "a_values": [0.0, 0.25, 0.5, 0.75, 0.9, 1.0, 1.1,
                                                                     1.25, 1.5, 2.0],
                 "T": {"linear": 150.0, "unnormalized_softmax": 30.0}, "n_eval": 151},
        "full": {"a_values": [round(0.1 * k, 2) for k in range(21)], "n_eval": 301},
    },
    "highdim_widget": {
        "fast": {"d": 16, "n": 64, "T": 30.0, "seed": 0},
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
