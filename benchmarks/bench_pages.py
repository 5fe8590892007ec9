#!/usr/bin/env python
"""What each page of the built book weighs: its HTML and its first load, at 1400 px and at 400 px.

    make bench   (or: .venv/bin/python benchmarks/bench_pages.py [--top 3] [--html _build/html])

Reads ``_build/html`` (run ``make book`` first) and opens every page of the table of contents in
headless Chromium (the system's ``chromium``, as the browser tests). *HTML* is the page's
document; *first load* is every file the browser asked for until the page had loaded and MathJax
had typeset it (scripts, styles, fonts, the images of the first screen; lazy images further down
and the frames of an animation nobody played are not part of it), counted from the files, as a
first visit without a cache downloads them. The limits (``MAX_HTML_BYTES``, ``MAX_FIRST_LOAD_BYTES`` in
``tests/helpers.py``) are checked by ``tests/test_browser.py``; a page over one is flagged here.
Each number is also recorded in ``_build/bench/results.json`` as ``pages.<page>.<what>``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _results import record

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.helpers import (  # noqa: E402
    CHROMIUM_ARGS,
    MAX_FIRST_LOAD_BYTES,
    MAX_HTML_BYTES,
    PAGE_WEIGHT_JS,
    RESOURCE_BUFFER_JS,
    StaticServer,
    find_chromium,
    page_weight,
    toc_files,
)

WIDTHS = (1400, 400)


def weigh(context, server: StaticServer, rel: str, wait_ms: int = 30_000) -> dict:
    """The weight of the page ``rel`` (see :func:`tests.helpers.page_weight`), loaded in ``context``."""
    page = context.new_page()
    try:
        page.goto(f"{server.url}/{rel}", wait_until="load", timeout=120_000)
        return page_weight(page.evaluate(PAGE_WEIGHT_JS, wait_ms), server.root, server.url)
    finally:
        page.close()


def mb(n: float) -> str:
    return f"{n / 1e6:6.2f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html", help="the built book")
    parser.add_argument("--top", type=int, default=0, help="also list each page's N heaviest resources")
    args = parser.parse_args(argv)
    if not (args.html / "index.html").exists():
        print(f"bench_pages: no built book in {args.html}: run `make book` first", file=sys.stderr)
        return 2
    chromium = find_chromium()
    if chromium is None:
        print("bench_pages: chromium is not installed (apt-get install -y chromium)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    results, over = {}, []
    header = f"{'page':34s} {'HTML MB':>8s} " + " ".join(f"{f'first load {w} px':>20s}" for w in WIDTHS)
    print(
        f"page weights of {args.html} (limits: HTML {mb(MAX_HTML_BYTES).strip()} MB, first load "
        f"{mb(MAX_FIRST_LOAD_BYTES).strip()} MB)\n{header}"
    )
    with StaticServer(args.html) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        contexts = {}
        try:
            for w in WIDTHS:
                contexts[w] = browser.new_context(viewport={"width": w, "height": 900}, service_workers="block")
                contexts[w].add_init_script(RESOURCE_BUFFER_JS)
            for rel in (f"{f}.html" for f in toc_files()):
                weights = {w: weigh(contexts[w], server, rel) for w in WIDTHS}
                html = weights[WIDTHS[0]]["html"]
                first = {w: weights[w]["first_load"] for w in WIDTHS}
                heavy = max(first.values()) > MAX_FIRST_LOAD_BYTES
                reference = "/api/" in f"/{rel}"  # the API reference: first load not bounded (tests/test_browser.py)
                flag = " OVER" if html > MAX_HTML_BYTES or (heavy and not reference) else ""
                flag = flag or (" (over, a reference page: not bounded)" if heavy else "")
                print(f"{rel:34s} {mb(html):>8s} " + " ".join(f"{mb(first[w]):>20s}" for w in WIDTHS) + flag)
                if flag == " OVER":
                    over.append(rel)
                name = Path(rel).with_suffix("").as_posix()
                results[f"pages.{name}.html_bytes"] = html
                results.update({f"pages.{name}.first_load_bytes_{w}px": first[w] for w in WIDTHS})
                for size, path in weights[WIDTHS[-1]]["files"][: args.top]:
                    print(f"    {mb(size)} MB  {path}")
        finally:
            for context in contexts.values():
                context.close()
            browser.close()
    record(results)
    if over:
        print(f"{len(over)} page(s) over a limit: {', '.join(over)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
