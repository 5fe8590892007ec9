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


def test_plot_claims_overview_draws_one_row_per_chapter_with_claims_labelled_by_its_title():
    """The claims page's figure: one row per chapter that shows claims, in book order, labelled by the
    chapter's title (a file prefix named the wrong chapter and drew two chapters on one row), and each
    row's bars count exactly that chapter's claims, by tag and measured."""
    from tokendynamics.book.claims import CHAPTERS, TAGS, claims_for

    fig, ax = plt.subplots()
    plotting.plot_claims_overview(ax)
    stems = [s for s in CHAPTERS if claims_for(s)]
    labels = [" ".join(t.get_text().split()) for t in ax.get_yticklabels()]
    assert labels == [CHAPTERS[s] for s in stems] and len(set(labels)) == len(stems) >= 7
    rows = list(ax.get_yticks())
    assert len(set(rows)) == len(stems)
    *by_tag, measured = ax.containers
    assert len(by_tag) == len(TAGS)
    for row, stem in zip(rows, stems):
        bars = [b for container in by_tag for b in container if b.get_y() + b.get_height() / 2 == row]
        assert sum(b.get_width() for b in bars) == len(claims_for(stem)), stem
        (hatched,) = [b for b in measured if b.get_y() + b.get_height() / 2 == row]
        assert hatched.get_width() == sum(c.measured is not None for c in claims_for(stem)), stem
    plt.close(fig)
