"""Tests of ``tokendynamics.book.plotting``: figure files, angle paths, widgets in the headless build."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from tokendynamics.book import plotting


def test_savefig_writes_png_and_refuses_empty_figures(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENDYNAMICS_FIGDIR", str(tmp_path / "figs"))
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="no data"):
        plotting.savefig(fig, "empty")
    ax.plot([0, 1], [0, 1])
    path = plotting.savefig(fig, "line")
    assert path.exists() and path.read_bytes()[:4] == b"\x89PNG"
    plt.close(fig)


def test_unwrap_for_plot_breaks_angle_paths_at_jumps():
    theta = np.array([[3.0], [3.2], [3.4]])  # crosses pi
    out = plotting.unwrap_for_plot(theta)
    assert np.isnan(out[1, 0]) and abs(out[0, 0] - 3.0) < 1e-15


def test_live_widgets_are_built_live_but_not_in_the_headless_build(monkeypatch):
    monkeypatch.delenv("TOKENDYNAMICS_HEADLESS", raising=False)
    assert plotting.live_widgets()
    monkeypatch.setenv("TOKENDYNAMICS_HEADLESS", "1")
    assert not plotting.live_widgets()
    from tokendynamics.book.explorers import cone_explorer

    assert cone_explorer() is None  # builds nothing headless
