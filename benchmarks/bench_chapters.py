#!/usr/bin/env python
"""Where a chapter spends its time: per-chapter totals and the slowest cells, fast and full.

    make bench   (or: .venv/bin/python benchmarks/bench_chapters.py [--top 3])

Reads the executed notebooks the build left behind: ``_build/executed/<chapter>.ipynb`` (the last
``make book``, fast or full) and ``_build/run/<chapter>/<chapter>.ipynb`` (the last
``make chapter NAME=<chapter> PARAMS="-p mode full"``). papermill stores every cell's duration in the
notebook, so this profiles the real runs instead of re-running them. Each chapter's total is also
recorded in ``_build/bench/results.json`` as ``chapters.<mode>.<chapter>.seconds``, with the load
average at the time of the report (times measured on a loaded 2-core machine are longer).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import nbformat

from _results import record

ROOT = Path(__file__).resolve().parents[1]
BUDGET_FULL = 180.0  # seconds: no chapter over 3 minutes in the full setting (the whole book <= 8 min)


def runs():
    """(mode, chapter, notebook) for every executed notebook found."""
    found = []
    for nb_path in sorted((ROOT / "_build" / "executed").glob("*.ipynb")):
        found.append(nb_path)
    for nb_path in sorted((ROOT / "_build" / "run").glob("*/*.ipynb")):
        found.append(nb_path)
    for nb_path in found:
        nb = nbformat.read(nb_path, as_version=4)
        meta = nb.metadata.get("tokendynamics", {})
        mode = meta.get("parameters", {}).get("mode", "fast")
        yield mode, nb_path.stem, nb


def first_line(cell) -> str:
    for line in cell.source.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "---", ":", "tags", "mystnb", "name", "caption")):
            return line[:70]
    return "(cell)"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--top", type=int, default=3, help="slowest cells listed per chapter")
    args = parser.parse_args(argv)
    results, totals = {}, {}
    print(f"{'mode':5s} {'chapter':28s} {'seconds':>8s}   slowest cells")
    for mode, stem, nb in runs():
        cells = [c for c in nb.cells if c.cell_type == "code"]
        durations = [(c.metadata.get("papermill", {}).get("duration") or 0.0, c) for c in cells]
        total = nb.metadata.get("papermill", {}).get("duration") or sum(d for d, _ in durations)
        slowest = sorted(durations, key=lambda dc: -dc[0])[: args.top]
        flag = "  OVER BUDGET" if mode == "full" and total > BUDGET_FULL else ""
        print(f"{mode:5s} {stem:28s} {total:8.1f}{flag}")
        for d, c in slowest:
            print(f"{'':44s}{d:7.1f} s  {first_line(c)}")
        results[f"chapters.{mode}.{stem}.seconds"] = total
        totals[mode] = totals.get(mode, 0.0) + total
    for mode, total in totals.items():
        print(f"{mode:5s} {'all chapters, one after the other':28s} {total:8.1f}")
        results[f"chapters.{mode}.total_seconds"] = total
    if results:
        record(results)
    else:
        print("no executed notebooks under _build/: run `make book` (and `make book MODE=full`) first")


if __name__ == "__main__":
    main()
