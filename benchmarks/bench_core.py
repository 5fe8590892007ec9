#!/usr/bin/env python
"""Speed of the attention core, as ratios against baselines measured in the same run.

    make bench        (or: .venv/bin/python benchmarks/bench_core.py [--repeat 7])

1. softmax velocity (n = 2000, d = 64) / its floor measured in the same run: the two matrix
   products it cannot avoid, S = (beta X A) X^T and P (X V^T), plus one exp over the n x n scores
   (target: ratio <= 1.3); and / the two products alone;
2. linear attention through the second moment Sigma / the dense n x n form (n = 2000, d = 100),
   with the difference between the two results.

(A fused numba kernel for the field of one layer was measured here until numpy, in blocks of rows,
won everywhere; the compiled kernel of batched runs is benchmarks/bench_phase.py.)

Times are medians over repeats; the ratios, not the absolute times, are the result. They are also
written to ``_build/bench/results.json`` (benchmarks/_results.py).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from _results import machine_line, record, repeat_args  # benchmarks/_results.py
from tokendynamics import Attention, velocity


def median_time(fn, repeat: int) -> float:
    fn()  # warm-up (and numba compilation)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def softmax_vs_matmuls(repeat: int):
    rng = np.random.default_rng(0)
    n, d = 2000, 64
    X = rng.standard_normal((n, d)) / np.sqrt(d)
    A = rng.standard_normal((d, d)) / np.sqrt(d)
    V = rng.standard_normal((d, d)) / np.sqrt(d)
    layer = Attention("softmax", A=A, V=V)
    P = np.full((n, n), 1.0 / n)

    def two_products():
        S = (X @ A) @ X.T
        return S, P @ (X @ V.T)

    def floor():
        S = (X @ A) @ X.T
        E = np.exp(S, out=S)
        return E @ (X @ V.T)

    t_field = median_time(lambda: velocity(X, layer), repeat)
    t_mm = median_time(two_products, repeat)
    t_floor = median_time(floor, repeat)
    return t_field, t_mm, t_floor


def linear_sigma_vs_dense(repeat: int):
    rng = np.random.default_rng(1)
    n, d = 2000, 100
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    layer = Attention("linear", A=rng.standard_normal((d, d)) / np.sqrt(d), V=rng.standard_normal((d, d)) / np.sqrt(d))
    t_sigma = median_time(lambda: velocity(X, layer), repeat)
    t_dense = median_time(lambda: velocity(X, layer, backend="dense"), repeat)
    err = np.max(np.abs(velocity(X, layer) - velocity(X, layer, backend="dense")))
    scale = np.max(np.abs(velocity(X, layer)))
    return t_sigma, t_dense, err / scale


def main(argv=None):
    args = repeat_args(__doc__, argv, repeat=7)
    print(machine_line(f"medians of {args.repeat} runs\n"))

    t_field, t_mm, t_floor = softmax_vs_matmuls(args.repeat)
    print("1. softmax velocity, n = 2000, d = 64")
    print(
        f"   velocity {t_field * 1e3:8.1f} ms   floor (two products + one exp) {t_floor * 1e3:8.1f} ms   "
        f"two products {t_mm * 1e3:8.1f} ms"
    )
    print(
        f"   ratio velocity / floor = {t_field / t_floor:5.2f} (target <= 1.3)   "
        f"ratio velocity / products = {t_field / t_mm:5.2f}"
    )
    results = {
        "core.softmax_velocity_over_floor": t_field / t_floor,
        "core.softmax_velocity_over_two_products": t_field / t_mm,
    }

    t_sigma, t_dense, rel = linear_sigma_vs_dense(args.repeat)
    print("2. linear attention, n = 2000, d = 100")
    print(
        f"   via Sigma {t_sigma * 1e3:8.2f} ms   dense n x n {t_dense * 1e3:8.1f} ms   "
        f"ratio dense / Sigma = {t_dense / t_sigma:6.1f}   relative difference {rel:.1e}"
    )
    results["core.linear_dense_over_sigma"] = t_dense / t_sigma

    record(results)


if __name__ == "__main__":
    main()
