"""Cached expensive results, stored with the parameters and the code that made them.

``cached(name, params, compute, code=[...])`` returns the arrays stored in ``data/<name>.npz`` when
the stored parameters and the fingerprint of the listed code (source of functions or modules) are
the same as now; otherwise it calls ``compute()``, stores its arrays with the parameters and the
fingerprint, and returns them. A result is therefore recomputed whenever the parameters or the
code that makes it change, and a reader can always see what produced a cached file
(:func:`describe`).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["data_dir", "fingerprint", "cached", "describe"]


def data_dir() -> Path:
    """The cache folder: ``$TOKENDYNAMICS_DATA`` or the repository's ``data/`` folder."""
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


def fingerprint(code: Iterable[Any]) -> str:
    """SHA-256 (first 16 hex digits) of the source code of the given functions, classes or modules."""
    h = hashlib.sha256()
    for obj in code:
        h.update(inspect.getsource(obj).encode())
    return h.hexdigest()[:16]


def cached(
    name: str,
    params: dict,
    compute: Callable[[], dict[str, np.ndarray]],
    *,
    code: Iterable[Any] = (),
    refresh: bool = False,
) -> dict[str, np.ndarray]:
    """Load ``data/<name>.npz`` if made with the same ``params`` and ``code``; else compute and store.

    ``compute`` returns a dict of arrays. If the data folder is not writable the result is
    computed and returned without being stored.
    """
    if not name.replace("-", "_").replace(".", "_").isidentifier():
        raise ValueError(f"cache name must be a simple identifier-like stem, got {name!r}")
    meta = {"params": _jsonable(params), "code": fingerprint(code)}
    key = json.dumps(meta, sort_keys=True)
    path = data_dir() / f"{name}.npz"
    if path.exists() and not refresh:
        with np.load(path, allow_pickle=False) as f:
            stored = str(f["__meta__"]) if "__meta__" in f.files else ""
            if stored == key:
                return {k: f[k] for k in f.files if k != "__meta__"}
    result = compute()
    if not isinstance(result, dict) or not result:
        raise TypeError("compute() must return a non-empty dict of arrays")
    arrays = {k: np.asarray(v) for k, v in result.items()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(path, __meta__=np.array(key), **arrays)
    except OSError:
        pass
    return arrays


def describe(name: str) -> dict:
    """Parameters and code fingerprint stored with ``data/<name>.npz``."""
    with np.load(data_dir() / f"{name}.npz", allow_pickle=False) as f:
        return json.loads(str(f["__meta__"]))
