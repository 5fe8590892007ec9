#!/usr/bin/env python
"""The static explorers as a reader meets them: time from a move to the new picture, and what they weigh.

    make bench   (or: .venv/bin/python benchmarks/bench_static_explorers.py [--html _build/html])

Reads ``_build/html`` (run ``make book`` first), serves it on 127.0.0.1 and opens, in headless Chromium
at 1400 px, every page with a static explorer (``tokendynamics.book.static_explorers``). For each
twin, every control is moved through all its values with the arrow keys
(``tests.helpers.walk_static_explorer``, as the browser test does); a move's time runs from the key
press to the ``load`` event of the new picture (the twin prefetches the neighbours of the state it
shows, so most moves are served from the browser's cache). Printed per chapter: the median and the
slowest move, the page's first load (every file until it has loaded and MathJax has typeset it),
the twins' share of it (their markup in the HTML and any state picture fetched by then), and the
chapter's frames: the twins' state pictures and the animations' frames (files, each counted once).
Recorded in ``_build/bench/results.json`` as ``static_explorers.<page>.<what>``.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

from _results import record

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.helpers import (  # noqa: E402
    CHROMIUM_ARGS,
    PAGE_WEIGHT_JS,
    RESOURCE_BUFFER_JS,
    StaticServer,
    find_chromium,
    page_weight,
    toc_files,
    walk_static_explorer,
)

TWIN = re.compile(r'<div class="static-explorer">.*?</script>\n</div>', re.S)
FILES = {
    "states": re.compile(r'"([^"]*_images/states/[0-9a-f]+\.png)"'),
    "frames": re.compile(r'"([^"]*_images/frames/[^"]+)"'),
}
MAX_FRAMES_BYTES = 6_000_000  # a chapter's frames, states and animations together
MAX_MOVE_MS = 100.0  # median, key press to the new picture loaded, from a local server


def frame_bytes(html: str, page: Path) -> dict[str, int]:
    """Bytes of the distinct state pictures and animation frames the page ``html`` (file ``page``) names."""
    return {
        kind: sum((page.parent / f).resolve().stat().st_size for f in set(pattern.findall(html)))
        for kind, pattern in FILES.items()
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html", help="the built book")
    args = parser.parse_args(argv)
    chromium = find_chromium()
    if not (args.html / "index.html").exists() or chromium is None:
        print("bench_static_explorers: needs the built book (make book) and chromium", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    pages = [f"{f}.html" for f in toc_files() if (args.html / f"{f}.html").exists()]
    pages = [p for p in pages if 'class="static-explorer"' in (args.html / p).read_text("utf-8")]
    results, every, over = {}, [], []
    print(
        f"static explorers of {args.html}: key press to new picture loaded (ms), first load and frames (MB)\n"
        f"{'page':34s} {'twins':>5s} {'moves':>5s} {'median':>7s} {'slowest':>7s} {'first load':>10s} "
        f"{'of which twins':>14s} {'states':>7s} {'animations':>10s}"
    )
    with StaticServer(args.html) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            for rel in pages:
                context = browser.new_context(viewport={"width": 1400, "height": 900}, service_workers="block")
                context.add_init_script(RESOURCE_BUFFER_JS)
                page = context.new_page()
                page.goto(f"{server.url}/{rel}", wait_until="load", timeout=120_000)
                weight = page_weight(page.evaluate(PAGE_WEIGHT_JS, 30_000), server.root, server.url)
                html = (args.html / rel).read_text("utf-8")
                early = sum(s for s, f in weight["files"] if "_images/states/" in f)
                twins = sum(len(m.encode()) for m in TWIN.findall(html)) + early
                ms = []
                for box in page.locator(".static-explorer").all():
                    _, moves = walk_static_explorer(page, box)
                    ms += [m["ms"] for m in moves if m["ms"] is not None]
                context.close()
                sizes = frame_bytes(html, args.html / rel)
                median, slowest = statistics.median(ms), max(ms)
                every += ms
                flag = " OVER" if median > MAX_MOVE_MS or sum(sizes.values()) > MAX_FRAMES_BYTES else ""
                over += [rel] if flag else []
                n_twins = html.count('class="static-explorer"')
                print(
                    f"{rel:34s} {n_twins:5d} {len(ms):5d} {median:7.1f} {slowest:7.1f} "
                    f"{weight['first_load'] / 1e6:10.2f} {twins / 1e6:14.3f} {sizes['states'] / 1e6:7.2f} "
                    f"{sizes['frames'] / 1e6:10.2f}{flag}"
                )
                name = Path(rel).with_suffix("").as_posix()
                results.update({
                    f"static_explorers.{name}.median_move_ms": median,
                    f"static_explorers.{name}.slowest_move_ms": slowest,
                    f"static_explorers.{name}.first_load_bytes": weight["first_load"],
                    f"static_explorers.{name}.twins_first_load_bytes": twins,
                    f"static_explorers.{name}.state_bytes": sizes["states"],
                    f"static_explorers.{name}.animation_frame_bytes": sizes["frames"],
                })  # fmt: skip
        finally:
            browser.close()
    if every:
        results["static_explorers.median_move_ms"] = statistics.median(every)
        print(f"all moves: median {statistics.median(every):.1f} ms over {len(every)} moves (bound {MAX_MOVE_MS:g} ms)")
    record(results)
    if over:
        print(f"over a bound (median move {MAX_MOVE_MS:g} ms, frames {MAX_FRAMES_BYTES / 1e6:g} MB): {', '.join(over)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
