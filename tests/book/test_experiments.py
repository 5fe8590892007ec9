"""Tests of ``tokendynamics.book.experiments``: the fast and full settings of every experiment."""

from __future__ import annotations

import pytest

from tokendynamics.book import experiments


def test_settings_fast_and_full_differ_and_reader_overrides_apply():
    fast = experiments.settings("intro_clustering")
    full = experiments.settings("intro_clustering", "full")
    assert fast["n"] == full["n"] == 32 and full["dt"] < fast["dt"]
    assert experiments.settings("intro_clustering", n=64)["n"] == 64
    with pytest.raises(KeyError, match="no parameter"):
        experiments.settings("intro_clustering", nn=3)
    with pytest.raises(ValueError, match="mode"):
        experiments.settings("intro_clustering", "medium")
