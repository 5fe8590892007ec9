"""Experiment settings, the result cache and figure files."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from tokendynamics.book import cache, experiments, plotting


def test_fast_and_full_settings_differ_and_reader_overrides_apply():
    fast = experiments.settings("intro_clustering")
    full = experiments.settings("intro_clustering", "full")
    assert fast["n"] == full["n"] == 32 and full["dt"] < fast["dt"]
    assert experiments.settings("intro_clustering", n=64)["n"] == 64
    with pytest.raises(KeyError, match="no parameter"):
        experiments.settings("intro_clustering", nn=3)
    with pytest.raises(ValueError, match="mode"):
        experiments.settings("intro_clustering", "medium")


def test_cache_recomputes_when_parameters_or_code_change(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENDYNAMICS_DATA", str(tmp_path))
    calls = []

    def compute():
        calls.append(1)
        return {"x": np.arange(3.0) * len(calls)}

    a = cache.cached("demo", {"n": 3}, compute, code=[compute])
    b = cache.cached("demo", {"n": 3}, compute, code=[compute])
    assert len(calls) == 1 and np.array_equal(a["x"], b["x"])
    cache.cached("demo", {"n": 4}, compute, code=[compute])
    assert len(calls) == 2
    assert cache.describe("demo")["params"] == {"n": 4}

    def other():
        return {"x": np.zeros(1)}

    cache.cached("demo", {"n": 4}, compute, code=[compute, other])  # code fingerprint changed
    assert len(calls) == 3
    with pytest.raises(TypeError, match="plain data"):
        cache.cached("demo", {"f": object()}, compute)


def test_savefig_writes_png_and_refuses_empty_figures(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENDYNAMICS_FIGDIR", str(tmp_path / "figs"))
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="no data"):
        plotting.savefig(fig, "empty")
    ax.plot([0, 1], [0, 1])
    path = plotting.savefig(fig, "line")
    assert path.exists() and path.read_bytes()[:4] == b"\x89PNG"
    plt.close(fig)


def test_angle_paths_break_at_jumps():
    theta = np.array([[3.0], [3.2], [3.4]])  # crosses pi
    out = plotting.unwrap_for_plot(theta)
    assert np.isnan(out[1, 0]) and abs(out[0, 0] - 3.0) < 1e-15


def test_widgets_are_built_live_but_not_in_the_headless_build(monkeypatch):
    monkeypatch.delenv("TOKENDYNAMICS_HEADLESS", raising=False)
    assert plotting.live_widgets()
    monkeypatch.setenv("TOKENDYNAMICS_HEADLESS", "1")
    assert not plotting.live_widgets()
    from tokendynamics.book.explorers import cone_explorer

    assert cone_explorer() is None  # builds nothing headless
