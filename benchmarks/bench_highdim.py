#!/usr/bin/env python
"""Linear attention at n = 2000, d = 100: the Sigma form and the projective reduction vs the dense field.

    make bench        (or: .venv/bin/python benchmarks/bench_highdim.py [--T 30] [--repeat 5])

Linear attention on the sphere, Case 2 of paper 2 (A = I, V symmetric with top eigenvalue 2),
n = 2000 uniform tokens in d = 100, integrated on [0, T] with the same solver and tolerances by

1. the particle system with the field through the second moment, V Sigma A^T x (no n x n matrix),
   ``simulate(..., backend="auto")``;
2. the exact projective reduction x_k = Phi x_k(0) / |Phi x_k(0)| (a d x d ODE),
   ``tokendynamics.projective.projective_flow``;
3. the particle system with the dense n x n attention matrix, ``simulate(..., backend="dense")``.

Printed: wall times, the ratios dense / Sigma and dense / Phi (one run each, in this process), the
number of field evaluations, and the largest difference between the final tokens (same accuracy);
also the ratio for one evaluation of the field (median of repeats).

BLAS runs on one thread unless OPENBLAS_NUM_THREADS / OMP_NUM_THREADS say otherwise: on a shared
2-core machine, threaded BLAS on these small products slowed every variant down by up to 20x when
other processes were running, which makes ratios meaningless.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from _results import machine_line, record  # noqa: E402  (this folder is on sys.path when run as a script)
from bench_core import median_time  # noqa: E402
from tokendynamics import metrics, projective, sample_sphere, simulate, velocity  # noqa: E402
from tokendynamics.book.studies import highdim as hd  # noqa: E402


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--T", type=float, default=30.0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rtol", type=float, default=1e-8)
    args = parser.parse_args(argv)
    n, d, T, rtol, atol = args.n, args.d, args.T, args.rtol, args.rtol * 1e-2
    print(machine_line(f"BLAS threads {os.environ['OPENBLAS_NUM_THREADS']}"))
    print(
        f"linear attention, Case 2 (A = I, lambda_1(V) = 2), n = {n}, d = {d}, beta = 1, T = {T:g}, "
        f"DOP853 rtol {rtol:g} atol {atol:g}\n"
    )
    mc = hd.case2(d, 2.0)
    layer = mc.layer("linear")
    X0 = sample_sphere(n, d, 0)

    t_sig = median_time(lambda: velocity(X0, layer), args.repeat)
    t_den = median_time(lambda: velocity(X0, layer, backend="dense"), args.repeat)
    print(
        f"one field evaluation (median of {args.repeat}): Sigma {t_sig * 1e3:.2f} ms, dense n x n "
        f"{t_den * 1e3:.1f} ms, ratio dense / Sigma = {t_den / t_sig:.1f}"
    )

    t_eval = [0.0, T]
    common = dict(method="adaptive", sphere=True, solver="DOP853", rtol=rtol, atol=atol, t_eval=t_eval)
    sig, s_sig = timed(lambda: simulate(X0, layer, T, **common))
    phi, s_phi = timed(
        lambda: projective.projective_flow(X0, layer, T, t_eval=t_eval, solver="DOP853", rtol=rtol, atol=atol)
    )
    den, s_den = timed(lambda: simulate(X0, layer, T, backend="dense", **common))
    R2 = metrics.order_parameters(sig.final)[1]
    print(f"whole run to T = {T:g} (R2 at T = {R2:.4f}):")
    print(f"  Sigma form     {s_sig:8.2f} s   {sig.info['nfev']:5d} evaluations")
    print(f"  projective Phi {s_phi:8.2f} s   {phi.info['nfev']:5d} evaluations")
    print(f"  dense n x n    {s_den:8.2f} s   {den.info['nfev']:5d} evaluations")
    print(f"  ratio dense / Sigma = {s_den / s_sig:.1f}   ratio dense / Phi = {s_den / s_phi:.1f}")
    print(
        f"  max |x_k(T)| difference: Sigma vs dense {np.max(np.abs(sig.final - den.final)):.1e}, "
        f"Phi vs dense {np.max(np.abs(phi.final - den.final)):.1e}"
    )
    record(
        {
            "highdim.field_dense_over_sigma": t_den / t_sig,
            "highdim.run_dense_over_sigma": s_den / s_sig,
            "highdim.run_dense_over_projective": s_den / s_phi,
        }
    )


if __name__ == "__main__":
    main()
