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
