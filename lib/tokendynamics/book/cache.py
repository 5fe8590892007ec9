"""Cached expensive results, stored with the parameters and the code that made them.

``cached(name, params, compute)`` returns the arrays stored in ``data/<name>.npz`` when the stored
parameters and code fingerprint are the same as now; otherwise it calls ``compute()``, stores its
arrays with the parameters and the fingerprint, and returns them. A reader can always see what
produced a cached file (:func:`describe`).

* **What invalidates a result.** The fingerprint (:func:`fingerprint`) is a hash of the source of
  the *whole* ``tokendynamics`` package (every ``.py`` file and the parameter table
  ``experiments.toml``, sorted by path, with its path; not the claims registry, which computes
  nothing), plus the source of any extra objects passed as ``code`` (e.g. a function defined outside
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


def _canonical(obj: Any):
    """A type-aware, JSON-able encoding of plain data: equal exactly when the values and their types are.

    ``{1: 'a'}`` and ``{'1': 'a'}``, ``True`` and ``1``, ``1`` and ``1.0`` encode differently; floats are
    stored exactly (``float.hex``), so a NaN parameter matches itself; numpy scalars encode as the Python
    number of their kind and arrays with their dtype and shape; tuples and lists are both sequences.
    """
    if isinstance(obj, (bool, np.bool_)):
        return ["bool", bool(obj)]
    if isinstance(obj, (int, np.integer)):
        return ["int", int(obj)]
    if isinstance(obj, (float, np.floating)):
        return ["float", float(obj).hex()]
    if isinstance(obj, str):
        return ["str", obj]
    if obj is None:
        return ["none"]
    if isinstance(obj, dict):
        items = [[_canonical(k), _canonical(v)] for k, v in obj.items()]
        return ["dict", sorted(items, key=lambda kv: json.dumps(kv[0]))]
    if isinstance(obj, (list, tuple)):
        return ["seq", [_canonical(v) for v in obj]]
    if isinstance(obj, np.ndarray) and obj.dtype.kind in "biuf":
        return ["array", obj.dtype.str, list(obj.shape), [_canonical(v) for v in obj.ravel().tolist()]]
    raise TypeError(
        f"cache parameters must be plain data (numbers, strings, None, lists, dicts, numeric arrays), "
        f"got {type(obj).__name__}"
    )


def _plain(code):
    """The plain value of a :func:`_canonical` encoding (for :func:`describe`)."""
    if not (isinstance(code, list) and code and isinstance(code[0], str)):
        return code  # a file written before the encoding was type-aware
    tag = code[0]
    if tag == "float":
        return float.fromhex(code[1])
    if tag == "none":
        return None
    if tag == "dict":
        return {repr(_plain(k)) if k[0] != "str" else k[1]: _plain(v) for k, v in code[1]}
    if tag == "seq":
        return [_plain(v) for v in code[1]]
    if tag == "array":
        return np.array([_plain(v) for v in code[3]], dtype=code[1]).reshape(code[2])
    return code[1]


def package_sources(root: Path | None = None) -> list[Path]:
    """Every ``.py`` file of the package and its ``.toml`` parameter table (not the claims registry), sorted by path.

    Parameters
    ----------
    root : pathlib.Path, optional
        Package folder.

    Returns
    -------
    list of pathlib.Path
    """
    root = PACKAGE_ROOT if root is None else Path(root)
    files = [
        p
        for pattern in ("*.py", "*.toml")
        for p in root.rglob(pattern)
        if "__pycache__" not in p.parts and p.relative_to(root).as_posix() not in _NOT_CODE
    ]
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


#: Package files that are data about the book, not code that computes (the claims registry).
_NOT_CODE = ("book/claims.toml",)


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
    for old in path.parent.glob(f".{path.stem}.*.tmp"):  # left by a writer that was killed
        pid = old.name[len(path.stem) + 2 :].split(".", 1)[0]
        if not (pid.isdigit() and _alive(int(pid))):
            old.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
        The parameters (plain data) that made the result, compared by value and type
        (``True`` is not ``1``, ``{1: x}`` is not ``{"1": x}``; a NaN matches a NaN).
    compute : callable
        ``compute() -> dict of arrays``.
    code : iterable of objects
        Extra code whose source enters the fingerprint.
    refresh : bool
        Recompute even if the file is valid (``True`` or ``False`` only).

    Returns
    -------
    dict of str to array
    """
    if not isinstance(name, str) or not name.replace("-", "_").replace(".", "_").isidentifier():
        raise ValueError(f"cache name must be a simple identifier-like stem, got {name!r}")
    if not isinstance(refresh, (bool, np.bool_)):
        raise TypeError(f"refresh must be True or False, got {refresh!r}")
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict of plain data, got {type(params).__name__}")
    wanted = {"params": _canonical(params), "code": fingerprint(code)}
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
    for key, arr in arrays.items():  # what np.load(allow_pickle=False) could not read back is refused now
        if not isinstance(key, str) or key == "__meta__" or not key:
            raise ValueError(f"compute() returned the array name {key!r}: names are non-empty strings, not '__meta__'")
        if arr.dtype.kind not in "biufcUS":
            raise TypeError(f"compute() returned {key!r} of dtype {arr.dtype}: a cache stores numeric or string arrays")
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
        ``params`` (as plain Python values), ``code`` and ``sha256``.
    """
    meta, _ = _read(data_dir() / f"{name}.npz")
    return {**meta, "params": _plain(meta["params"])}
