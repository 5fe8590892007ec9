"""Sweeps: the same results serially, on local processes (joblib) and on a real Dask cluster."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from tokendynamics.phase import cluster_statistics
from tokendynamics.sweeps import grid, mean_by, sweep

# a small but real phase-diagram point: two temperatures, a few clouds, two depths
FIXED = dict(recipe="gaussian", betas=[0.5, 2.0], depths=[1.0, 2.0], n=6, d=3, clouds=4, dt=0.5)
POINTS = grid(kind=["softmax", "linear", "sigmoid"], seed=[0, 1])


def _assert_identical(a, b):
    assert len(a) == len(b)
    for ra, rb in zip(a, b):
        assert ra.keys() == rb.keys()
        for key in ra:
            if key in ("seconds", "cpu_seconds"):
                continue
            assert np.array_equal(ra[key], rb[key]), key  # bit for bit


def test_sweep_on_local_processes_equals_the_serial_run_bit_for_bit():
    serial = sweep(cluster_statistics, POINTS, progress=False, **FIXED)
    local = sweep(cluster_statistics, POINTS, n_jobs=2, progress=False, **FIXED)
    _assert_identical(serial, local)
    assert [r["single"].shape for r in serial] == [(2, 2, 4)] * len(POINTS)


def test_dask_without_a_client_says_what_to_do():
    pytest.importorskip("distributed", reason="the [cluster] extra is not installed (make setup installs it)")
    from distributed import get_client

    try:
        get_client()
        pytest.skip("a default Dask client exists in this session")
    except ValueError:
        pass
    with pytest.raises(ValueError, match="no.*Client|there is none"):
        sweep(cluster_statistics, POINTS[:1], backend="dask", progress=False, **FIXED)
    with pytest.raises(TypeError, match="dask.distributed.Client"):
        sweep(cluster_statistics, POINTS[:1], client=object(), progress=False, **FIXED)


@pytest.mark.cluster
def test_sweep_on_a_real_dask_local_cluster_equals_the_serial_run_bit_for_bit():
    distributed = pytest.importorskip(
        "distributed", reason="the [cluster] extra (dask, distributed) is not installed; `make setup` installs it"
    )
    serial = sweep(cluster_statistics, POINTS, progress=False, **FIXED)
    start = time.perf_counter()
    cluster = distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, host="127.0.0.1", dashboard_address=None
    )
    client = distributed.Client(cluster)
    try:
        with distributed.get_task_stream(client=client) as stream:
            on_dask = sweep(cluster_statistics, POINTS, client=client, progress=False, **FIXED)
        _assert_identical(serial, on_dask)
        # the work really went to the worker processes of the cluster
        ran = [task for task in stream.data if "cluster_statistics" in str(task.get("key", ""))]
        assert len(ran) >= len(POINTS), stream.data[:3]
        assert {task["worker"] for task in ran} <= set(client.scheduler_info()["workers"])
        # backend="dask" uses the current default client (this one)
        again = sweep(cluster_statistics, POINTS[:2], backend="dask", progress=False, **FIXED)
        _assert_identical(serial[:2], again)
    finally:
        client.close()
        cluster.close()
    print(f"LocalCluster test: {time.perf_counter() - start:.1f} s")


def test_mean_by_averages_sweep_results_over_seeds_per_parameter_value():
    rows = [
        {"d": 10, "seed": 0, "t_level": 2.0},
        {"d": 5, "seed": 0, "t_level": 1.0},
        {"d": 10, "seed": 1, "t_level": 4.0},
        {"d": 5, "seed": 1, "t_level": math.inf},
    ]
    xs, means = mean_by(rows, "d")
    np.testing.assert_array_equal(xs, [5.0, 10.0])
    assert means[0] == math.inf and means[1] == 3.0
    with pytest.raises(ValueError, match="entries"):
        mean_by(rows, "beta")
