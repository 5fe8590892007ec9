#!/usr/bin/env python
"""Accurate mode (solve_ivp) against the faithful projected Euler scheme on the F1 grid (paper 1).

    make bench        (or: .venv/bin/python benchmarks/bench_gaussian.py [--repeat 3])

The F1 grid: 100 trace-one initial covariances, softmax attention with the official matrices
(tokendynamics.book.gaussian_figures.figure_setup("F1")); every run converges towards zero.

1. Official settings: projected Euler with the official step h = 0.3 and stopping rules, then the
   accurate solver (DOP853, rtol 1e-10) to the same stopping times. Prints both times, their ratio,
   and the largest difference of the final covariances (the first-order Euler error at h = 0.3).
2. Equal accuracy: all 100 runs to the common time T = 1500; the Euler step is halved until every
   final covariance agrees with the accurate one to 1e-6. Prints the step reached and the time ratio.

Euler runs use the compiled loop when numba is installed and the numpy batch otherwise (both
are timed when numba is present). Times are medians over --repeat runs after one warm-up.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from _results import machine_line, record, repeat_args  # noqa: E402  (benchmarks/_results.py; this folder is on sys.path)
from tokendynamics import _gaussian_kernels
from tokendynamics.book.gaussian_figures import figure_setup
from tokendynamics.gaussian import projected_euler, solve_gaussian

TOL = 1e-6


def median_time(fn, repeat: int):
    out = fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def accurate(inits, layer, times):
    return np.array(
        [solve_gaussian(np.zeros(2), S, layer, float(t), t_eval=[float(t)]).final_cov for S, t in zip(inits, times)]
    )


def main(argv=None):
    args = repeat_args(__doc__, argv, repeat=3)
    backends = ["numba", "numpy"] if _gaussian_kernels.HAVE_NUMBA else ["numpy"]
    print(machine_line(f"numba {'yes' if _gaussian_kernels.HAVE_NUMBA else 'no'}; medians of {args.repeat} runs\n"))
    setup = figure_setup("F1")
    layer = setup.layers["softmax"]
    inits = setup.inits
    opts = setup.solver["softmax"]

    print(f"1. F1 grid ({len(inits)} runs), official step h = {opts['step']}, tol_low = {opts['tol_low']}")
    t_eu = {}
    for b in backends:
        t_eu[b], runs = median_time(
            lambda b=b: projected_euler(inits, layer, save="final", backend=b, **opts), args.repeat
        )
    t_acc, acc = median_time(lambda: accurate(inits, layer, runs.exit_time), args.repeat)
    diff = np.abs(acc - runs.cov_last).max()
    for b in backends:
        print(
            f"   projected Euler ({b:5s}) {t_eu[b]:8.3f} s   accurate {t_acc:8.3f} s   "
            f"ratio accurate / Euler = {t_acc / t_eu[b]:7.1f}"
        )
    results = {f"gaussian.F1_accurate_over_euler_{b}": t_acc / t_eu[b] for b in backends}
    print(f"   largest |Sigma_Euler - Sigma_accurate| at the stopping times: {diff:.2e} (first-order error of h = 0.3)")

    T = 1500.0
    print(f"\n2. equal accuracy: all runs to T = {T:g}, Euler step halved until max |difference| < {TOL:g}")
    t_acc, acc = median_time(lambda: accurate(inits, layer, np.full(len(inits), T)), args.repeat)
    h = opts["step"]
    while True:
        runs = projected_euler(
            inits, layer, step=h, tol_low=0.0, t_max=T, max_iter=10**7, save="final", backend=backends[0]
        )
        err = np.abs(runs.cov_last - acc).max()
        print(f"   h = {h:.6f}: max |difference| = {err:.2e}")
        if err < TOL:
            break
        h /= 2
    t_eu, _ = median_time(
        lambda: projected_euler(
            inits, layer, step=h, tol_low=0.0, t_max=T, max_iter=10**7, save="final", backend=backends[0]
        ),
        args.repeat,
    )
    print(
        f"   same final Sigma to {TOL:g}: projected Euler ({backends[0]}, h = {h:g}) {t_eu:8.3f} s   "
        f"accurate {t_acc:8.3f} s   ratio accurate / Euler = {t_acc / t_eu:6.2f}"
    )
    results["gaussian.equal_accuracy_accurate_over_euler"] = t_acc / t_eu
    record(results)


if __name__ == "__main__":
    main()
