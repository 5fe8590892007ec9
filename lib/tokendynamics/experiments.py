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

    # ---- Paper 1, chapter 01_well_posedness (spec §2, §3.3) -----------------------------------
    # One layer for the gallery, the stability study, the d = 2 mean-field study and the widget:
    # A (library convention, score <x, A y>) has negative definite symmetric part, V = I.
    "p1_gallery": {
        "fast": {"n": 120, "seed": 0, "A": [[-1.0, 0.5], [-0.5, -0.5]], "V": [[1.0, 0.0], [0.0, 1.0]],
                 "beta": 2.0, "T": 3.0, "dt": 0.05, "sink_mass": 0.1, "frames": 30},
        "full": {"n": 400, "dt": 0.01, "frames": 60},
    },
    "p1_stability": {
        "fast": {"n": 150, "seed": 1, "A": [[-1.0, 0.5], [-0.5, -0.5]], "V": [[1.0, 0.0], [0.0, 1.0]],
                 "beta": 1.0, "deltas": [1e-3, 1e-2, 1e-1], "T": 2.0, "dt": 0.05, "save_every": 4,
                 "sink_mass": 0.1},
        "full": {"n": 400, "dt": 0.01, "save_every": 10},
    },
    # d = 1 Gaussian oracle (spec §3.3 item 2: v = 1, alpha0 = 0.5, sigma0 = 1, T = 2) with a = -0.5
    # instead of the spec's -1, so that a^2 sigma0^4 < 1/2 (see the chapter).
    "p1_meanfield_1d": {
        "fast": {"ns": [100, 400, 1600], "seeds": 20, "T": 2.0, "a": -0.5, "v": 1.0,
                 "alpha0": 0.5, "sigma0": 1.0, "dt": 0.5},
        "full": {"ns": [100, 200, 400, 800, 1600, 3200, 6400], "seeds": 20, "dt": 0.25},
    },
    "p1_meanfield_2d": {
        "fast": {"ns": [25, 50, 100, 200], "seeds": 8, "N_ref": 2000, "ref_seed": 1000,
                 "A": [[-1.0, 0.5], [-0.5, -0.5]], "V": [[1.0, 0.0], [0.0, 1.0]], "beta": 1.0,
                 "T": 1.0, "dt": 0.2},
        "full": {"ns": [25, 50, 100, 200, 400, 800], "seeds": 12, "N_ref": 4000, "dt": 0.1},
    },
    # masked attention, d = 1 product data lambda x N(alpha0, sigma0^2), sink cloud of mass m0
    "p1_masked": {
        "fast": {"ns": [50, 200, 800], "seeds": 6, "sink_masses": [0.0, 0.05, 0.2], "T": 1.0,
                 "a": -0.5, "v": 1.0, "alpha0": 0.5, "sigma0": 1.0, "dt": 0.5,
                 "share_sink_masses": [0.02, 0.1, 0.3], "share_n": 200},
        "full": {"ns": [50, 200, 800, 3200], "seeds": 8, "dt": 0.25},
    },
    "p1_widget": {
        "fast": {"n": 60, "seed": 0, "A": [[-1.0, 0.5], [-0.5, -0.5]], "V": [[1.0, 0.0], [0.0, 1.0]],
                 "beta": 1.5, "T": 2.0, "dt": 0.2, "betas": [0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0]},
        "full": {"betas": [0.25, 0.4, 0.55, 0.7, 0.85, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0]},
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
