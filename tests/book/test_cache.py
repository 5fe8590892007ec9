"""Tests of ``tokendynamics.book.cache``: results cached with their parameters and the code that made them."""

from __future__ import annotations

import numpy as np
import pytest

from tokendynamics.book import cache


def test_cached_recomputes_when_parameters_or_code_change(tmp_path, monkeypatch):
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
