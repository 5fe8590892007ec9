"""Parameter sweeps through joblib, with a progress bar: serially, on the local cores, or on a Dask cluster
(the extra ``[cluster]``). Each point is a call of a module-level function with its own seed, so results depend
neither on the order nor on the worker."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterable, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from .validation import validate_flag

__all__ = ["grid", "sweep", "mean_by"]


def grid(**axes: Iterable[Any]) -> list[dict[str, Any]]:
    """Cartesian product of the given axes as a list of keyword dicts (the last axis varying fastest).

    Parameters
    ----------
    **axes : iterable
        One list of values per keyword.

    Returns
    -------
    list of dict

    References
    ----------
    Book: ``chapters/07_phase_diagrams.md``.

    Examples
    --------
    >>> grid(beta=[1, 2], d=[10])
    [{'beta': 1, 'd': 10}, {'beta': 2, 'd': 10}]
    """
    values: dict[str, list] = {}
    for name, v in axes.items():
        if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
            raise ValueError(f"axis {name!r} of the grid must be a list of values, got {v!r:.60}")
        values[name] = list(v)
        if not values[name]:
            raise ValueError(f"axis {name!r} of the grid is empty")
    return [dict(zip(values, combo)) for combo in itertools.product(*values.values())]


def sweep(
    fn: Callable[..., Any],
    points: Iterable[Mapping[str, Any]],
    *,
    n_jobs: int = 1,
    backend: str | None = None,
    client=None,
    progress: bool = True,
    desc: str | None = None,
    **fixed: Any,
) -> list[Any]:
    """Evaluate ``fn(**fixed, **point)`` for every point, in parallel through joblib.

    Parameters
    ----------
    fn, points
        A module-level (picklable) function of keywords, and the grid (dicts, e.g. from :func:`grid`).
    n_jobs, backend, client
        joblib workers (1: serial, here; -1: all cores; on Dask, tasks in flight, default all workers); ``None``
        (joblib's ``"loky"``), ``"threading"`` or ``"dask"`` (the cluster of ``client``, a
        ``dask.distributed.Client``, or of the current default client).
    progress, desc
        Show a progress bar (tqdm, on stderr) as results arrive, and its label.
    **fixed
        Keyword arguments shared by every point.

    Returns
    -------
    list
        ``[fn(**fixed, **p) for p in points]``.

    References
    ----------
    joblib (https://joblib.readthedocs.io) and Dask (https://www.dask.org); book:
    ``chapters/06_high_dimensional.md`` and ``chapters/07_phase_diagrams.md``.
    """
    from joblib import Parallel, delayed
    from tqdm import tqdm

    if not callable(fn):
        raise TypeError(f"fn must be a callable (a module-level function), got {type(fn).__name__}")
    pts = []
    for k, p in enumerate(points):
        if not isinstance(p, Mapping):
            raise ValueError(f"points must be keyword dicts (e.g. from grid), got {type(p).__name__} at points[{k}]")
        pts.append(dict(p))
    clash = [sorted(set(p) & set(fixed)) for p in pts if set(p) & set(fixed)]
    if clash:
        raise ValueError(f"parameters {clash[0]} are given both in the grid and as fixed keywords")
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs == 0:
        raise ValueError(f"n_jobs must be a non-zero integer, got {n_jobs!r}")
    progress = validate_flag(progress, "progress")
    jobs = (delayed(fn)(**fixed, **p) for p in pts)
    out = []
    with (
        tqdm(total=len(pts), desc=desc, disable=not progress, file=sys.stderr) as bar,
        _backend_context(backend, client) as dask_jobs,
    ):
        workers = -1 if dask_jobs and n_jobs == 1 else n_jobs  # on Dask, n_jobs=1 would mean "serial, here"
        parallel = Parallel(n_jobs=workers, backend=None if dask_jobs else backend, return_as="generator")
        for result in parallel(jobs):
            out.append(result)
            bar.update(1)
    return out


@contextmanager
def _backend_context(backend, client):
    """joblib's Dask backend for ``client`` (or the default client) inside ``parallel_config``; else nothing."""
    if client is None and backend != "dask":
        yield False
        return
    if backend not in (None, "dask"):
        raise ValueError(f"client= runs on Dask; it cannot be combined with backend={backend!r}")
    try:
        import distributed
    except ImportError:  # pragma: no cover - depends on the installation
        raise ImportError(
            "sweeps on Dask need dask.distributed: install the extra (pip install -e .[cluster])"
        ) from None
    from joblib import parallel_config

    if client is None:
        try:
            client = distributed.get_client()
        except ValueError:
            raise ValueError(
                "backend='dask' uses the current dask.distributed.Client, and there is none: create one "
                "(Client(LocalCluster()) or Client('tcp://host:8786')) or pass client=..."
            ) from None
    if not isinstance(client, distributed.Client):
        raise TypeError(f"client must be a dask.distributed.Client, got {type(client).__name__}")
    with parallel_config(backend="dask", client=client):
        yield True


def mean_by(results: Iterable[Mapping[str, Any]], key: str, value: str = "t_level"):
    """Group sweep results by ``result[key]`` and average ``result[value]`` in each group (e.g. over seeds).

    Parameters
    ----------
    results, key, value
        Results of :func:`sweep` (dicts), the entry to group by, and the entry to average.

    Returns
    -------
    xs, means : arrays
        The distinct values of ``key``, increasing, and the mean of ``value`` in each group (``inf`` if one is).

    References
    ----------
    Book: ``chapters/06_high_dimensional.md`` (clustering-time scaling).

    Examples
    --------
    >>> mean_by([{"d": 2, "t": 1.0}, {"d": 1, "t": 3.0}, {"d": 2, "t": 2.0}], "d", "t")
    (array([1., 2.]), array([3. , 1.5]))
    """
    rows = list(results)
    if not rows:
        raise ValueError("results is empty: no results to group")
    if not all(isinstance(r, Mapping) for r in rows):
        raise ValueError("results must be a list of dicts (e.g. from sweep)")
    missing = [k for k in (key, value) if any(k not in r for r in rows)]
    if missing:
        raise ValueError(f"every result needs the entries {missing}")
    xs = sorted({r[key] for r in rows})
    means = [float(np.mean([r[value] for r in rows if r[key] == x])) for x in xs]
    return np.array(xs, dtype=float), np.array(means)
