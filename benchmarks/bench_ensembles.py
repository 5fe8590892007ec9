#!/usr/bin/env python
"""Batched ensembles against the loop over `simulate`, measured in one run.

    make bench        (or: .venv/bin/python benchmarks/bench_ensembles.py [--repeat 3])

The same B independent systems are integrated twice: by ``simulate_batch`` (one batched field
evaluation per RK4 stage for the whole batch) and by a Python loop of ``simulate`` calls, one per
system; the final tokens are compared (they agree to round-off). Printed: both wall times (best of
``--repeat``, timed alternately), the ratio loop / batch and the largest difference, for

1. softmax attention on the sphere, B = 64 clouds of n = 32 tokens in d = 3 (goal: ratio >= 5);
2. softmax attention on the sphere, B = 16, n = 200, d = 100 (large clouds: the work per system
   dominates and the batch saves only the Python overhead, so expect a ratio near 1);
3. the chapter-6 workload: one point of the phase diagram (softmax, Q = K = V = I, seven values
   of beta, n = 32, d = 3, RK4 with step 0.5 to depth 24), with 16 clouds per beta here.

The ratios are also merged into ``_build/bench/results.json`` (name -> value, with the machine
and the versions). BLAS runs on one thread unless OPENBLAS_NUM_THREADS / OMP_NUM_THREADS say
otherwise (see bench_highdim.py).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import time  # noqa: E402

import numpy as np  # noqa: E402

from _results import RESULTS, machine_line, record, repeat_args  # noqa: E402  (benchmarks/_results.py)
from tokendynamics import Attention, simulate  # noqa: E402
from tokendynamics.ensembles import recipe_stack, sample_clouds, simulate_batch  # noqa: E402


def compare(X0, layers, per_system, T, dt, repeat, **kw):
    """(loop seconds, batch seconds, max difference) for the same systems: ``layers`` drives the
    batch, ``per_system[b]`` the b-th run of the loop. The two are timed alternately (best of
    ``repeat`` each), so that a change of the machine's load hits both alike."""
    t_batch = t_loop = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        batch = simulate_batch(X0, layers, T, dt=dt, **kw)
        t_batch = min(t_batch, time.perf_counter() - start)
        start = time.perf_counter()
        loop = [simulate(X0[b], per_system[b], T, dt=dt, **kw).final for b in range(len(X0))]
        t_loop = min(t_loop, time.perf_counter() - start)
    err = float(np.max(np.abs(batch.final - np.array(loop))))
    return t_loop, t_batch, err


def main(argv=None):
    args = repeat_args(__doc__, argv, repeat=3)
    print(machine_line(f"BLAS threads {os.environ['OPENBLAS_NUM_THREADS']}; best of {args.repeat} runs\n"))
    results = {}

    X0 = sample_clouds(64, 32, 3, 0)
    lay = Attention("softmax", A=np.eye(3), V=np.eye(3), beta=4.0)
    t_loop, t_batch, err = compare(X0, lay, [lay] * len(X0), 5.0, 0.1, args.repeat, sphere=True)
    ratio = t_loop / t_batch
    print("1. softmax on the sphere, B = 64, n = 32, d = 3, RK4 dt = 0.1 to T = 5 (goal: ratio >= 5)")
    print(f"   loop {t_loop:6.2f} s   batch {t_batch:6.2f} s   ratio loop / batch = {ratio:5.1f}   max diff {err:.1e}")
    results["ensembles.softmax_B64_n32_d3.loop_over_batch"] = round(ratio, 2)

    rng = np.random.default_rng(1)
    d = 100
    A = rng.standard_normal((d, d)) / np.sqrt(d)
    X0 = sample_clouds(16, 200, d, 2)
    lay = Attention("softmax", A=A, V=np.eye(d), beta=1.0)
    t_loop, t_batch, err = compare(X0, lay, [lay] * len(X0), 1.0, 0.1, args.repeat, sphere=True)
    ratio = t_loop / t_batch
    print("2. softmax on the sphere, B = 16, n = 200, d = 100, RK4 dt = 0.1 to T = 1")
    print(f"   loop {t_loop:6.2f} s   batch {t_batch:6.2f} s   ratio loop / batch = {ratio:5.1f}   max diff {err:.1e}")
    results["ensembles.softmax_B16_n200_d100.loop_over_batch"] = round(ratio, 2)

    betas = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]
    clouds = 16
    stack = recipe_stack("softmax", "identity", 3, np.repeat(betas, clouds), rng=1)
    X0 = np.tile(sample_clouds(clouds, 32, 3, 0), (len(betas), 1, 1))
    layers = [stack.member(b) for b in range(len(stack))]
    t_loop, t_batch, err = compare(X0, stack, layers, 24.0, 0.5, 1, sphere=True)
    ratio = t_loop / t_batch
    print(
        f"3. chapter 7: one phase-diagram point, softmax, {len(betas)} betas x {clouds} clouds, n = 32, d = 3, "
        "RK4 dt = 0.5 to depth 24"
    )
    print(f"   loop {t_loop:6.2f} s   batch {t_batch:6.2f} s   ratio loop / batch = {ratio:5.1f}   max diff {err:.1e}")
    results["ensembles.chapter6_phase_point.loop_over_batch"] = round(ratio, 2)

    record(results)
    print(f"\nratios merged into {RESULTS}")


if __name__ == "__main__":
    main()
