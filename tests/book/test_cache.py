"""The result cache (tokendynamics.book.cache): damaged files, atomic writes, checksums, the code fingerprint."""

from __future__ import annotations

import json
import os
import shutil
import stat
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from tokendynamics.book import cache
from tokendynamics.book.experiments import settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENDYNAMICS_DATA", str(tmp_path))
    calls = []

    def compute():
        calls.append(1)
        return {"x": np.arange(4.0), "k": np.array([3, 1], dtype=np.int64)}

    return tmp_path, compute, calls


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(b"this is not a zip file at all" * 10)
    elif how == "pickled":  # a valid npz whose metadata needs pickle (object array)
        np.savez(path, __meta__=np.array([{"params": 1}], dtype=object), x=np.zeros(2))
    else:  # the metadata is not JSON
        np.savez(path, __meta__=np.array("{not json"), x=np.zeros(2))


@pytest.mark.parametrize("how", ["truncated", "empty", "garbage", "pickled", "bad-json"])
def test_a_damaged_cache_file_is_recomputed_and_replaced_with_a_warning_naming_it(store, how):
    folder, compute, calls = store
    cache.cached("demo", {"n": 1}, compute)
    path = folder / "demo.npz"
    _damage(path, how)
    with pytest.warns(cache.CacheWarning, match="demo.npz") as record:
        out = cache.cached("demo", {"n": 1}, compute)
    assert "damaged" in str(record[0].message)
    assert len(calls) == 2 and np.array_equal(out["x"], np.arange(4.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the replaced file is good: no warning, no recomputation
        again = cache.cached("demo", {"n": 1}, compute)
    assert len(calls) == 2 and np.array_equal(again["k"], [3, 1])


def test_the_checksum_of_the_arrays_is_verified_on_load(store):
    folder, compute, calls = store
    cache.cached("demo", {"n": 1}, compute)
    path = folder / "demo.npz"
    meta, _ = cache._read(path)  # the stored metadata itself
    expected = {"x": np.arange(4.0), "k": np.array([3, 1], dtype=np.int64)}
    assert len(meta["sha256"]) == 64 and meta["sha256"] == cache.arrays_digest(expected)
    # same metadata, altered array: a stale or tampered file that still parses
    np.savez_compressed(path, __meta__=np.array(json.dumps(meta)), x=np.arange(4.0) + 1, k=np.array([3, 1]))
    with pytest.warns(cache.CacheWarning, match="checksum"):
        out = cache.cached("demo", {"n": 1}, compute)
    assert len(calls) == 2 and np.array_equal(out["x"], np.arange(4.0))


def test_writes_are_atomic_an_interrupted_write_keeps_the_old_file(store, monkeypatch):
    folder, compute, calls = store
    cache.cached("demo", {"n": 1}, compute)
    before = (folder / "demo.npz").read_bytes()

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # e.g. the reader interrupts the chapter while it writes

    monkeypatch.setattr(np, "savez_compressed", crash)
    with pytest.raises(KeyboardInterrupt):
        cache.cached("demo", {"n": 2}, compute)
    assert (folder / "demo.npz").read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) == ["demo.npz"]  # no temporary file left


def test_cache_files_get_the_permissions_of_any_new_file(store):
    folder, compute, calls = store
    old = os.umask(0o022)
    try:
        cache.cached("demo", {"n": 1}, compute)
    finally:
        os.umask(old)
    assert stat.S_IMODE((folder / "demo.npz").stat().st_mode) == 0o644  # not mkstemp's private 0o600


def test_an_unwritable_data_folder_still_returns_the_result(store, monkeypatch):
    folder, compute, calls = store

    def refuse(*args, **kwargs):
        raise PermissionError("read-only")

    monkeypatch.setattr(cache.tempfile, "mkstemp", refuse)
    out = cache.cached("demo", {"n": 1}, compute)
    assert np.array_equal(out["x"], np.arange(4.0)) and not (folder / "demo.npz").exists()


def test_the_fingerprint_covers_every_module_of_the_package(tmp_path, monkeypatch):
    copy = tmp_path / "tokendynamics"
    shutil.copytree(cache.PACKAGE_ROOT, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc"))
    base = cache.fingerprint(root=copy)
    assert base == cache.fingerprint()  # the copy has the same sources
    sources = cache.package_sources(copy)
    assert {p.name for p in sources} >= {
        "gaussian.py",
        "attention.py",
        "cache.py",
        "experiments.py",
        "experiments.toml",
        "validation.py",
    }
    for path in sources:  # editing any module, the book layer included, changes the fingerprint
        text = path.read_text(encoding="utf-8")
        path.write_text(text + "\n# edited\n", encoding="utf-8")
        assert cache.fingerprint(root=copy) != base, path.name
        path.write_text(text, encoding="utf-8")
    assert cache.fingerprint(root=copy) == base
    (copy / "new_module.py").write_text("x = 1\n")
    assert cache.fingerprint(root=copy) != base
    (copy / "new_module.py").unlink()
    (copy / "metrics.py").rename(copy / "metrics2.py")  # a rename counts too
    assert cache.fingerprint(root=copy) != base


def test_editing_a_function_the_result_depends_on_invalidates_the_cache(store, tmp_path, monkeypatch):
    """The stale-cache bug: changing gaussian.covariance_eigenvalues left the rank histograms as they were."""
    folder, compute, calls = store
    copy = tmp_path / "pkg" / "tokendynamics"
    shutil.copytree(cache.PACKAGE_ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cache, "PACKAGE_ROOT", copy)
    cache.cached("demo", {"n": 1}, compute)
    cache.cached("demo", {"n": 1}, compute)
    assert len(calls) == 1
    gaussian = copy / "gaussian.py"
    gaussian.write_text(
        gaussian.read_text().replace(
            "return np.linalg.eigvalsh(_sym(cov))[..., ::-1]", "return np.linalg.eigvalsh(cov)[..., ::-1]"
        )
    )
    cache.cached("demo", {"n": 1}, compute)
    assert len(calls) == 2


def test_extra_code_objects_still_enter_the_fingerprint(store):
    def helper():
        return 1

    assert cache.fingerprint([helper]) != cache.fingerprint()


def test_the_data_folder_is_the_repository_data_folder(monkeypatch):
    monkeypatch.delenv("TOKENDYNAMICS_DATA", raising=False)
    assert cache.data_dir() == ROOT / "data"
    assert (ROOT / "data" / "README.md").exists()


@pytest.mark.parametrize("row", sorted(settings("gaussian_F6")["rows"]))
def test_committed_caches_are_readable_checksummed_and_made_with_the_current_settings(row, monkeypatch):
    monkeypatch.delenv("TOKENDYNAMICS_DATA", raising=False)
    meta = cache.describe(f"gaussian_F6_{row}")
    _, arrays = cache._read(cache.data_dir() / f"gaussian_F6_{row}.npz")
    assert meta["sha256"] == cache.arrays_digest(arrays)
    p = settings("gaussian_F6")
    expected = {k: v for k, v in p.items() if k != "rows"} | {"row": p["rows"][row]}
    assert meta["params"] == cache._plain(cache._canonical(expected))
    assert settings("gaussian_F6", "full") == p  # one cache serves both settings
    assert row in (ROOT / "data" / "README.md").read_text()


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


@pytest.mark.parametrize(
    "first, second",
    [
        ({1: "a"}, {"1": "a"}),
        ({"x": True}, {"x": 1}),
        ({"x": 1}, {"x": 1.0}),
        ({"x": None}, {"x": "None"}),
        ({"x": [1, 2]}, {"x": np.array([1, 2], dtype=np.int32)}),
        ({"x": 0.1 + 0.2}, {"x": 0.3}),
    ],
)
def test_cache_keys_of_different_parameters_never_collide(first, second, tmp_path, monkeypatch):
    """Parameters are compared by value and type: each pair is two results, never one served for the other."""
    monkeypatch.setenv("TOKENDYNAMICS_DATA", str(tmp_path))
    a = cache.cached("key", first, lambda: {"x": np.array([1.0])})
    b = cache.cached("key", second, lambda: {"x": np.array([2.0])})
    assert a["x"][0] == 1.0 and b["x"][0] == 2.0


def test_a_nan_parameter_hits_its_own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENDYNAMICS_DATA", str(tmp_path))
    calls = []

    def compute():
        calls.append(1)
        return {"x": np.zeros(1)}

    for _ in range(2):
        cache.cached("nan", {"eps": float("nan"), "n": (1, 2)}, compute)
    assert len(calls) == 1
    assert np.isnan(cache.describe("nan")["params"]["eps"])


def test_cache_refuses_what_it_could_not_read_back_and_a_non_bool_refresh(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENDYNAMICS_DATA", str(tmp_path))
    with pytest.raises(TypeError, match="dtype object"):
        cache.cached("bad", {}, lambda: {"x": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(ValueError, match="__meta__"):
        cache.cached("bad", {}, lambda: {"__meta__": np.zeros(1)})
    with pytest.raises(TypeError, match="refresh must be True or False"):
        cache.cached("bad", {}, lambda: {"x": np.zeros(1)}, refresh="yes")
    assert not list(tmp_path.glob("bad*"))


def test_temporary_files_of_a_killed_writer_are_removed_at_the_next_write(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENDYNAMICS_DATA", str(tmp_path))
    stale = tmp_path / ".demo.999999999.abc.tmp"  # no such process
    stale.write_bytes(b"half a file")
    cache.cached("demo", {"n": 1}, lambda: {"x": np.zeros(1)})
    assert not stale.exists() and (tmp_path / "demo.npz").exists()


_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.floats(allow_nan=True), st.text(max_size=4)
)
_params = st.dictionaries(
    st.text(min_size=1, max_size=4),
    st.recursive(
        _scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 9)), inner, max_size=3),
        ),
        max_leaves=6,
    ),
    max_size=4,
)


@hsettings(max_examples=40, deadline=None)
@given(_params, _params, st.lists(st.floats(-1e300, 1e300), min_size=1, max_size=5))
def test_the_cache_round_trips_and_two_parameter_sets_share_a_file_only_if_they_are_equal(tmp_path_factory, p, q, xs):
    """A stored result comes back equal (arrays bit for bit) for the same parameters, by value and type;
    different parameters (``1`` vs ``True``, ``{1: x}`` vs ``{"1": x}``) recompute instead of returning it."""
    folder = tmp_path_factory.mktemp("cache")
    before = os.environ.get("TOKENDYNAMICS_DATA")
    os.environ["TOKENDYNAMICS_DATA"] = str(folder)
    try:
        first = cache.cached("prop", p, lambda: {"x": np.array(xs)})
        again = cache.cached("prop", p, lambda: pytest.fail("the same parameters recomputed"))
        np.testing.assert_array_equal(again["x"], first["x"])
        calls = []
        cache.cached("prop", q, lambda: calls.append(1) or {"x": np.array(xs) + 1})
        assert bool(calls) == (cache._canonical(q) != cache._canonical(p))
    finally:
        if before is None:
            os.environ.pop("TOKENDYNAMICS_DATA", None)
        else:
            os.environ["TOKENDYNAMICS_DATA"] = before
