"""Cached expensive results, stored with the parameters and the code that made them.

``cached(name, params, compute)`` returns the arrays stored in ``data/<name>.npz`` when the stored
parameters and code fingerprint are the same as now; otherwise it calls ``compute()``, stores its
arrays with the parameters and the fingerprint, and returns them. A reader can always see what
produced a cached file (:func:`describe`).

* **What invalidates a result.** The fingerprint (:func:`fingerprint`) is a hash of the source of
  the *whole* ``tokendynamics`` package (every ``.py`` file and every ``.toml`` file, the parameter
  table ``experiments.toml`` and the claims registry ``claims.toml``, sorted by path, with its
  path), plus the source of any extra objects passed as ``code`` (e.g. a function defined outside
  the package). Listing by hand the functions a result depends on missed some (a change of
  ``gaussian.covariance_eigenvalues`` left the rank histograms stale); hashing the package cannot
  miss one, at the price of recomputing after any change of the library.
* **Integrity.** The metadata stores a SHA-256 of the arrays (names, dtypes, shapes and bytes),
  checked on every load. A truncated, empty, garbage or tampered file is recomputed and replaced,
  with a :class:`CacheWarning` naming the file.
* **Atomic writes.** A result is written to a temporary file in the same folder and moved over the
  old one with ``os.replace``: an interrupted write never leaves a half-written cache behind.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import pickle
import tempfile
import warnings
import zipfile
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "PACKAGE_ROOT",
    "CacheWarning",
    "data_dir",
    "package_sources",
    "fingerprint",
    "arrays_digest",
    "cached",
    "describe",
]

#: The folder of the ``tokendynamics`` package whose sources make the code fingerprint.
PACKAGE_ROOT = Path(__file__).resolve().parents[1]

# what np.load can raise on a damaged .npz (truncated zip, garbage, a pickled object, bad header)
_UNREADABLE = (
    OSError,
    EOFError,
    ValueError,
    KeyError,
    zipfile.BadZipFile,
    zlib.error,
    pickle.UnpicklingError,
)


class CacheWarning(UserWarning):
    """A cache file could not be used as it is (damaged, or its checksum does not match) and is recomputed."""


def data_dir() -> Path:
    """The cache folder: ``$TOKENDYNAMICS_DATA`` or the repository's ``data/`` folder.

    Returns
    -------
    pathlib.Path
        The value of the environment variable ``TOKENDYNAMICS_DATA`` when it is set and non-empty,
        otherwise the absolute path of the ``data/`` folder at the repository root (three levels above
        this package's ``book/`` folder). The folder is not created and need not exist.
    """
    env = os.environ.get("TOKENDYNAMICS_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "data"


def _jsonable(obj: Any):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.floating, np.integer, np.bool_)):
        return obj.item()
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    raise TypeError(f"cache parameters must be plain data (numbers, strings, lists, arrays), got {type(obj).__name__}")


def package_sources(root: Path | None = None) -> list[Path]:
    """Every ``.py`` file of the package and its ``.toml`` parameter table, sorted by relative path.

    Parameters
    ----------
    root : pathlib.Path, optional
        Package folder.

    Returns
    -------
    list of pathlib.Path
    """
    root = PACKAGE_ROOT if root is None else Path(root)
    files = [p for pattern in ("*.py", "*.toml") for p in root.rglob(pattern) if "__pycache__" not in p.parts]
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def fingerprint(code: Iterable[Any] = (), *, root: Path | None = None) -> str:
    """SHA-256 (first 16 hex digits) of the package's source files and of the source of the extra ``code`` objects.

    Every ``.py`` (and ``.toml``) file of the package enters with its path relative to the package,
    so editing, adding, removing or renaming any module changes the fingerprint.

    Parameters
    ----------
    code : iterable of objects
        Extra functions or classes whose source enters the fingerprint.
    root : pathlib.Path, optional
        Package folder.

    Returns
    -------
    str
        16 hex digits.
    """
    root = PACKAGE_ROOT if root is None else Path(root)
    h = hashlib.sha256()
    for path in package_sources(root):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    for obj in code:
        h.update(inspect.getsource(obj).encode())
    return h.hexdigest()[:16]


def arrays_digest(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 of a dict of arrays: names, dtypes, shapes and bytes, in sorted name order.

    Parameters
    ----------
    arrays : dict of str to array
        The arrays.

    Returns
    -------
    str
        Hex digest.
    """
    h = hashlib.sha256()
    for key in sorted(arrays):
        arr = np.ascontiguousarray(arrays[key])
        h.update(key.encode())
        h.update(b"\0")
        h.update(arr.dtype.str.encode())
        h.update(repr(arr.shape).encode())
        h.update(arr.tobytes())
    return h.hexdigest()


def _read(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """Metadata and arrays of a cache file; raises one of ``_UNREADABLE`` if the file is damaged."""
    with np.load(path, allow_pickle=False) as f:
        meta = json.loads(str(f["__meta__"]))
        arrays = {k: f[k] for k in f.files if k != "__meta__"}
    if not isinstance(meta, dict):
        raise ValueError("the metadata is not a JSON object")
    return meta, arrays


def _write_atomic(path: Path, meta: dict, arrays: dict[str, np.ndarray]) -> None:
    """Write ``path`` through a temporary file in the same folder and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            payload: dict[str, Any] = {"__meta__": np.array(json.dumps(meta, sort_keys=True)), **arrays}
            np.savez_compressed(fh, **payload)
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes the file private; a cache is as readable as any file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cached(
    name: str,
    params: dict,
    compute: Callable[[], dict[str, np.ndarray]],
    *,
    code: Iterable[Any] = (),
    refresh: bool = False,
) -> dict[str, np.ndarray]:
    """Load ``data/<name>.npz`` if made with the same ``params`` and code; else compute and store.

    ``compute`` returns a dict of arrays. The code fingerprint covers the whole package plus the
    extra objects in ``code`` (:func:`fingerprint`). A damaged file, or one whose arrays do not
    match their stored checksum, is recomputed and replaced with a :class:`CacheWarning`. If the
    data folder is not writable the result is computed and returned without being stored.

    Parameters
    ----------
    name : str
        File stem under the data folder.
    params : dict
        The parameters (JSON-able) that made the result.
    compute : callable
        ``compute() -> dict of arrays``.
    code : iterable of objects
        Extra code whose source enters the fingerprint.
    refresh : bool
        Recompute even if the file is valid.

    Returns
    -------
    dict of str to array
    """
    if not isinstance(name, str) or not name.replace("-", "_").replace(".", "_").isidentifier():
        raise ValueError(f"cache name must be a simple identifier-like stem, got {name!r}")
    wanted = {"params": _jsonable(params), "code": fingerprint(code)}
    path = data_dir() / f"{name}.npz"
    if path.exists() and not refresh:
        try:
            meta, arrays = _read(path)
        except _UNREADABLE as exc:
            warnings.warn(
                f"cache file {path} is damaged and cannot be read ({type(exc).__name__}: {exc}); "
                "recomputing it and replacing the file",
                CacheWarning,
                stacklevel=2,
            )
        else:
            same = meta.get("params") == wanted["params"] and meta.get("code") == wanted["code"]
            if same and meta.get("sha256") == arrays_digest(arrays):
                return arrays
            if same:
                warnings.warn(
                    f"cache file {path} does not match its stored checksum (its arrays were altered); "
                    "recomputing it and replacing the file",
                    CacheWarning,
                    stacklevel=2,
                )
    result = compute()
    if not isinstance(result, dict) or not result:
        raise TypeError("compute() must return a non-empty dict of arrays")
    arrays = {k: np.asarray(v) for k, v in result.items()}
    meta = {**wanted, "sha256": arrays_digest(arrays)}
    try:
        _write_atomic(path, meta, arrays)
    except OSError:
        pass
    return arrays


def describe(name: str) -> dict:
    """Parameters, code fingerprint and array checksum stored with ``data/<name>.npz``.

    Parameters
    ----------
    name : str
        Stem of a file in ``data/``, e.g. ``"gaussian_F6_softmax-identity"``.

    Returns
    -------
    dict
        ``params``, ``code`` and ``sha256``.
    """
    meta, _ = _read(data_dir() / f"{name}.npz")
    return meta
