#!/usr/bin/env python
"""Phase-diagram workloads: the compiled batch kernel against the library and a plain numpy loop.

    make bench        (or: .venv/bin/python benchmarks/bench_phase.py [--repeat 3] [--clouds 2048])

Measured in one run, printed as ratios (the times are the machine's, the ratios the result):

1. B = 1024 clouds of n = 32 tokens, softmax with Q = K = V = I, beta = 4, 100 steps of 0.1 on the
   sphere; Euler and RK4, d = 2 and d = 3. Three implementations of the same scheme:
   the library as it is (``simulate_batch``), a plain numpy loop (einsum scores, exp, row
   normalisation, projection, retraction) and the kernel (``tokendynamics._batch_kernels.run_batch``,
   compiled; and its numpy fallback by blocks of systems). Goal: plain loop / kernel >= 4.
2. The protocol of Geshkovski, Letrouit, Polyanskiy and Rigollet at full resolution: softmax,
   Q = K = V = I, n = 32 tokens on the circle, 2048 clouds x 90 values of beta in [0.1, 9], T = 30,
   Euler with step 0.1 and renormalisation; timed end to end (clouds, kernel, one-cluster
   frequency per beta), beside the exp-throughput floor measured here: the time of
   2048 * 90 * 300 * 32^2 exponentials by ``numpy.exp`` and by numba's ``exp`` in ``prange``, on every
   core (extrapolated from 2^28 of them). Goal: <= 3 minutes on 2 cores.
3. Where the kernel beats the library's ``simulate_batch`` (what ``backend="auto"`` should pick):
   B = 256, 20 Euler steps on the sphere, n = 8..256, d = 2, 3, 8, A = Q^T K with Gaussian Q, K (not
   symmetric: every exponential computed) and A = I (symmetric: half of them).

The machine is shared: the load average is printed before each part; compare ratios of one run.
The ratios are merged into ``_build/bench/results.json`` (benchmarks/_results.py).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from _results import RESULTS, machine_line, record  # noqa: E402  (benchmarks/_results.py)
from tokendynamics import Attention  # noqa: E402
from tokendynamics import _batch_kernels as bk  # noqa: E402
from tokendynamics.ensembles import sample_clouds, simulate_batch  # noqa: E402
from tokendynamics.metrics import is_single_cluster  # noqa: E402

GLPR = {"n": 32, "d": 2, "clouds": 2048, "betas": np.linspace(0.1, 9.0, 90), "T": 30.0, "h": 0.1}


def load() -> str:
    return f"(load average {os.getloadavg()[0]:.2f})"


def plain_loop(X0, A, V, beta, h, steps, scheme):
    """The plain numpy implementation: einsum scores, exp, row normalisation, projection, retraction."""

    def field(Y):
        Y = Y / np.linalg.norm(Y, axis=-1, keepdims=True)
        S = beta * np.einsum("bic,bjc->bij", Y @ A, Y)
        E = np.exp(S - S.max(axis=-1, keepdims=True))
        E /= E.sum(axis=-1, keepdims=True)
        F = E @ (Y @ V.T)
        return F - np.sum(F * Y, axis=-1, keepdims=True) * Y

    X = X0.copy()
    for _ in range(steps):
        k1 = field(X)
        if scheme == "rk4":
            k2 = field(X + h / 2 * k1)
            k3 = field(X + h / 2 * k2)
            k4 = field(X + h * k3)
            X = X + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        else:
            X = X + h * k1
        X /= np.linalg.norm(X, axis=-1, keepdims=True)
    return X


def best_of(fns: dict, repeat: int) -> dict:
    """Best wall time (and last result) of each function, timed alternately so that a change of the
    machine's load hits all alike."""
    best = {k: float("inf") for k in fns}
    out = {}
    for _ in range(repeat):
        for k, fn in fns.items():
            start = time.perf_counter()
            out[k] = fn()
            best[k] = min(best[k], time.perf_counter() - start)
    return {k: (best[k], out[k]) for k in fns}


def workloads(repeat: int, results: dict) -> None:
    B, n, beta, h, steps = 1024, 32, 4.0, 0.1, 100
    print(f"1. B = {B}, n = {n}, softmax Q = K = V = I, beta = {beta:g}, {steps} steps of {h:g} on the sphere {load()}")
    print("   times in s; library = simulate_batch with backend='auto' (the compiled kernel where it fits)")
    for d, scheme in ((2, "euler"), (2, "rk4"), (3, "euler"), (3, "rk4")):
        X0 = sample_clouds(B, n, d, 0)
        eye = np.eye(d)
        layer = Attention("softmax", A=eye, V=eye, beta=beta)
        fns = {
            "library": lambda: (
                simulate_batch(X0, layer, steps * h, dt=h, method=scheme, sphere=True, save_every=steps).final
            ),
            "numpy_field": lambda: (
                simulate_batch(
                    X0, layer, steps * h, dt=h, method=scheme, sphere=True, save_every=steps, backend="numpy"
                ).final
            ),
            "plain": lambda: plain_loop(X0, eye, eye, beta, h, steps, scheme),
        }
        if bk.HAVE_NUMBA:
            bk.run_batch(X0[:2], eye, eye, beta, h, 2, scheme=scheme)  # compile (or load the cache)
        t = best_of(fns, repeat)
        ref = t["numpy_field"][1]
        diff = max(float(np.max(np.abs(v[1] - ref))) for v in t.values())
        base = t["library"][0]
        print(
            f"   d = {d}, {scheme:5s}: library (auto) {t['library'][0]:6.3f}  library numpy field "
            f"{t['numpy_field'][0]:6.2f}  plain {t['plain'][0]:6.2f}"
            f"   plain / library = {t['plain'][0] / base:5.1f}x   max diff {diff:.1e}"
        )
        key = f"phase.B1024_n32_d{d}_{scheme}"
        results[f"{key}.plain_over_library"] = t["plain"][0] / base
        results[f"{key}.numpy_field_over_library"] = t["numpy_field"][0] / base
    ratio = results["phase.B1024_n32_d2_euler.plain_over_library"]
    print(f"   goal plain loop / library >= 4 on d = 2, Euler: {ratio:.1f} ({'met' if ratio >= 4 else 'NOT met'})")


def _threads() -> int:
    if bk.HAVE_NUMBA:
        import numba

        return numba.get_num_threads()
    return os.cpu_count() or 1


def numpy_exp_rate(total: int = 1 << 28, block: int = 1 << 16) -> float:
    """Exponentials per second of numpy.exp on every core (one thread each; the ufunc releases the GIL),
    on cache-resident blocks of scores of the size of the problem (|s| <= 9)."""
    threads = _threads()
    x = np.random.default_rng(0).uniform(-9.0, 9.0, block)
    reps = max(1, total // (block * threads))

    def work():
        out = np.empty_like(x)
        for _ in range(reps):
            np.exp(x, out=out)

    pool = [threading.Thread(target=work) for _ in range(threads)]
    start = time.perf_counter()
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    return reps * block * threads / (time.perf_counter() - start)


def numba_exp_rate(total: int = 1 << 28, block: int = 1 << 16) -> float | None:
    """Exponentials per second of numba's (libm) exp in a ``prange`` loop over every core."""
    if not bk.HAVE_NUMBA:
        return None
    import math

    import numba

    @numba.njit(parallel=True)
    def rep_exp(x, reps):
        acc = np.zeros(x.size)
        for i in numba.prange(x.size):
            s = 0.0
            for r in range(reps):
                s += math.exp(x[i] + r * 1e-12)
            acc[i] = s
        return acc

    x = np.random.default_rng(0).uniform(-9.0, 9.0, block)
    rep_exp(x, 1)
    reps = max(1, total // block)
    start = time.perf_counter()
    rep_exp(x, reps)
    return reps * block / (time.perf_counter() - start)


def glpr(clouds: int, results: dict) -> None:
    p = GLPR
    betas, n, d, h = p["betas"], p["n"], p["d"], p["h"]
    steps = int(round(p["T"] / h))
    exps = clouds * betas.size * steps * n * n
    print(
        f"\n2. GLPR protocol: softmax Q = K = V = I, n = {n} on the circle, {clouds} clouds x {betas.size} betas in "
        f"[{betas[0]:g}, {betas[-1]:g}], T = {p['T']:g}, Euler step {h:g} with renormalisation {load()}"
    )
    if not bk.HAVE_NUMBA:
        print("   numba is not installed: skipped (the numpy blocks would take hours)")
        return
    eye = np.eye(d)
    bk.run_batch(sample_clouds(2, n, d, 0), eye, eye, 1.0, h, 2)  # compile (or load the cache)
    start = time.perf_counter()
    X0 = sample_clouds(clouds, n, d, 2024)
    single = np.empty(betas.size)
    per_call = max(1, 20480 // clouds)  # betas per call: about 20 000 systems (a few hundred MB)
    for k in range(0, betas.size, per_call):
        chunk = betas[k : k + per_call]
        run = bk.run_batch(
            np.tile(X0, (chunk.size, 1, 1)), eye, eye, np.repeat(chunk, clouds), h, steps, save_every=steps
        )
        if np.any(run.status != bk.OK):
            raise RuntimeError("a system of the GLPR protocol was flagged")
        final = run.frames[-1].reshape(chunk.size, clouds, n, d)
        single[k : k + chunk.size] = is_single_cluster(final).mean(axis=1)
    elapsed = time.perf_counter() - start
    rate_np = numpy_exp_rate()
    rate_nb = numba_exp_rate()
    floor_np = exps / rate_np
    verdict = "met" if elapsed <= 180 else "NOT met"
    print(f"   end to end (kernel, {_threads()} threads): {elapsed:6.1f} s   goal <= 180 s on 2 cores: {verdict}")
    print(
        f"   exp floor, {exps:.2e} exponentials: numpy.exp {floor_np:6.1f} s "
        f"({1e9 / rate_np * _threads():.2f} ns each per core)",
        end="",
    )
    if rate_nb is not None:
        print(f", numba exp in prange {exps / rate_nb:6.1f} s", end="")
    print(f"   ratio protocol / numpy.exp floor = {elapsed / floor_np:.2f}")
    print(
        "   (the kernel takes half the exponentials, A = I being symmetric, with its own vectorised exp: "
        "it can run below the floor)"
    )
    shown = [0, 9, 19, 29, 44, 59, 89]
    print("   P(one cluster at T): " + "  ".join(f"beta {betas[i]:.1f}: {single[i]:.3f}" for i in shown))
    results["phase.glpr_full.seconds"] = elapsed
    results["phase.glpr_full.over_numpy_exp_floor"] = elapsed / floor_np
    if rate_nb is not None:
        results["phase.glpr_full.over_numba_exp_floor"] = elapsed * rate_nb / exps


def crossover(repeat: int, results: dict) -> dict:
    print(f"\n3. kernel vs the numpy field of simulate_batch: B = 256, 20 Euler steps of 0.1 on the sphere {load()}")
    if not bk.HAVE_NUMBA:
        print("   numba is not installed: backend='auto' keeps the library's path")
        return {}
    sizes = (8, 16, 32, 64, 128, 256)
    B, h, steps, beta = 256, 0.1, 20, 2.0
    table = {}
    print("   ratio library / kernel (> 1: the kernel is faster)")
    print("   " + " " * 16 + "".join(f"n = {n:<6d}" for n in sizes))
    for d in (2, 3, 8):
        rng = np.random.default_rng(d)
        Q, K = rng.standard_normal((2, d, d)) / np.sqrt(d)
        for label, A in (("A = Q^T K", Q.T @ K), ("A = I", np.eye(d))):
            V = np.eye(d)
            row = []
            for n in sizes:
                X0 = sample_clouds(B, n, d, n)
                layer = Attention("softmax", A=A, V=V, beta=beta)
                bk.run_batch(X0[:2], A, V, beta, h, 2)
                t = best_of(
                    {
                        "library": lambda: (
                            simulate_batch(
                                X0,
                                layer,
                                steps * h,
                                dt=h,
                                method="euler",
                                sphere=True,
                                save_every=steps,
                                backend="numpy",
                            ).final
                        ),
                        "kernel": lambda: bk.run_batch(X0, A, V, beta, h, steps, save_every=steps).frames[-1],
                    },
                    repeat,
                )
                row.append(t["library"][0] / t["kernel"][0])
                results[f"phase.crossover.d{d}_{'sym' if label == 'A = I' else 'gen'}_n{n}.library_over_kernel"] = row[
                    -1
                ]
            print(f"   d = {d}, {label:9s}" + "".join(f"{r:<10.2f}" for r in row))
            wins = 0
            for n, r in zip(sizes, row):
                if r <= 1.0:
                    break
                wins = n
            table.setdefault(d, []).append(wins)
    measured = {d: min(v) for d, v in table.items()}  # the worse of the two matrices
    print(f"   largest n up to which the kernel won (both matrices; 0: never): {measured}")
    print(f"   _batch_kernels.CROSSOVER (what backend='auto' picks) is {bk.CROSSOVER}")
    return measured


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--clouds", type=int, default=GLPR["clouds"], help="clouds per beta of the GLPR protocol")
    parser.add_argument("--skip", nargs="*", default=(), choices=("workloads", "glpr", "crossover"))
    args = parser.parse_args(argv)
    threads = _threads()
    blas = os.environ["OPENBLAS_NUM_THREADS"]
    print(
        machine_line(
            f"numba {'yes' if bk.HAVE_NUMBA else 'no'}, {threads} threads, BLAS threads {blas}; best of {args.repeat}\n"
        )
    )
    results: dict = {}
    if "workloads" not in args.skip:
        workloads(args.repeat, results)
    if "glpr" not in args.skip:
        glpr(args.clouds, results)
    if "crossover" not in args.skip:
        crossover(args.repeat, results)
    record(results)
    print(f"\nratios merged into {RESULTS}")


if __name__ == "__main__":
    main()
