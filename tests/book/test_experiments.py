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


def test_load_experiments_reads_every_table_with_its_types():
    """The package's TOML table: every experiment has a fast setting, at most a full one, and the full
    setting only overrides keys the fast one has; integers stay integers (token counts, seeds)."""
    table = experiments.load_experiments()
    assert table == experiments.EXPERIMENTS and len(table) > 40
    for name, entry in table.items():
        assert set(entry) <= set(experiments.MODES) and "fast" in entry, name
        assert set(entry.get("full", {})) <= set(entry["fast"]), name
    p = experiments.settings("intro_clustering")
    assert type(p["n"]) is int and type(p["beta"]) is float
    assert experiments.settings("kuramoto_snic", "full")["a"][:3] == [0.0, 0.025, 0.05]


def test_load_experiments_refuses_a_table_without_a_fast_setting(tmp_path):
    good = tmp_path / "good.toml"
    good.write_text("[demo.fast]\nn = 3\n\n[demo.full]\nn = 30\n", encoding="utf-8")
    assert experiments.load_experiments(good) == {"demo": {"fast": {"n": 3}, "full": {"n": 30}}}
    bad = tmp_path / "bad.toml"
    bad.write_text("[demo.full]\nn = 30\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"\[demo.fast\]"):
        experiments.load_experiments(bad)
    odd = tmp_path / "odd.toml"
    odd.write_text("[demo.fast]\nn = 3\n\n[demo.medium]\nn = 10\n", encoding="utf-8")
    with pytest.raises(ValueError, match="at most"):
        experiments.load_experiments(odd)
