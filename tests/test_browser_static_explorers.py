"""The static explorers as a reader moves them: the built book in headless Chromium (run after `make book`).

Every chapter with a live explorer shows its kernel-free twin (``tokendynamics.book.static_explorers``);
on each page, every control of every twin is moved through all its values with the arrow keys
(``tests.helpers.walk_static_explorer``): after each move the image shows the state's own picture, loaded
from the local server, the status line is that state's, the slider's value beside it too, and no request
leaves 127.0.0.1 and nothing reaches the console. At load the page fetches no state but the lazy first
picture; the first focus fetches the neighbours of the start. At 400 px and in the dark theme each twin
fits its column and its text keeps its contrast; the focused control shows an outline. Each twin is
photographed at 1400 and 400 px in both themes (``_build/static-explorer-screenshots/``).
"""

from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import (
    CHROMIUM_ARGS,
    RESOURCE_BUFFER_JS,
    StaticServer,
    find_chromium,
    toc_files,
    walk_static_explorer,
)

pytestmark = [pytest.mark.book, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "static-explorer-screenshots"
#: The chapters with a live explorer, each of which shows its twin.
CHAPTERS = ("01_well_posedness", "02_gaussian_preservation", "03_gradient_flow", "04_kuramoto_reduction",
            "06_high_dimensional", "08_transformer")  # fmt: skip
WIDE, NARROW = 1400, 400
LOAD_TIMEOUT_MS = 120_000

CHROMIUM = find_chromium()
if CHROMIUM is None:
    pytest.skip("chromium is not installed: apt-get install -y chromium", allow_module_level=True)

from playwright.sync_api import sync_playwright  # noqa: E402


def _pages() -> list[str]:
    if not (HTML / "index.html").exists():
        return []
    pages = [f"{f}.html" for f in toc_files()]
    return [p for p in pages if (HTML / p).exists() and 'class="static-explorer"' in (HTML / p).read_text("utf-8")]


PAGES = _pages()

# relative luminance and contrast ratio (WCAG 2) of two computed CSS colours
CONTRAST_JS = r"""
(box) => {
  const rgb = (c) => (c.match(/[\d.]+/g) || []).slice(0, 3).map(Number);
  const linear = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  const lum = (c) => { const [r, g, b] = rgb(c).map(linear); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const bg = getComputedStyle(box).backgroundColor;
  const of = (sel) => { const e = box.querySelector(sel); return ratio(getComputedStyle(e).color, bg); };
  return {background: bg, status: of('.static-explorer-status'), caption: of('.static-explorer-caption'),
          label: of('.static-explorer-control span'), theme: document.documentElement.dataset.theme};
}
"""
FITS_JS = r"""
(box) => {
  const b = box.getBoundingClientRect();
  const inside = Array.from(box.querySelectorAll('label, img, .static-explorer-status, .static-explorer-caption'))
    .filter((e) => { const r = e.getBoundingClientRect(); return r.left < b.left - 1 || r.right > b.right + 1; })
    .map((e) => e.tagName + '.' + e.className);
  const img = box.querySelector('img');
  const column = box.parentElement.getBoundingClientRect().width;
  return {overflow: box.scrollWidth - box.clientWidth, outside: inside, box: b.width, column,
          img: img.getBoundingClientRect().width, natural: img.naturalWidth};
}
"""


def _local(url: str) -> bool:
    return url.startswith(("http://127.0.0.1", "data:", "blob:", "about:"))


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium whose only proxy refuses connections: requests to other hosts fail and are recorded."""
    with socket.socket() as refusing, sync_playwright() as p:
        refusing.bind(("127.0.0.1", 0))
        proxy = {"server": f"http://127.0.0.1:{refusing.getsockname()[1]}", "bypass": "127.0.0.1"}
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, proxy=proxy)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def site():
    if not (HTML / "index.html").exists():
        pytest.fail("the book is not built: run `make book` first")
    with StaticServer(HTML) as server:
        yield server


@pytest.fixture(scope="module")
def views(browser, site):
    """``views(rel, width)``: the page ``rel`` loaded at ``width`` px, once for all the tests (a page load is
    most of their time), with what it asked of other hosts and printed to the console."""
    contexts, pages = {}, {}

    def view(rel: str, width: int):
        if (rel, width) not in pages:
            if width not in contexts:
                contexts[width] = browser.new_context(viewport={"width": width, "height": 900}, service_workers="block")
                contexts[width].add_init_script(RESOURCE_BUFFER_JS)
            page = contexts[width].new_page()
            found: dict[str, list] = {"external": [], "console": [], "failed": []}
            page.on("request", lambda r: not _local(r.url) and found["external"].append(r.url))
            page.on("console", lambda m: m.type == "error" and found["console"].append(m.text))
            page.on("pageerror", lambda e: found["console"].append(str(e)))
            page.on("requestfailed", lambda r: found["failed"].append(r.url))
            page.on("response", lambda r: r.status >= 400 and found["failed"].append(r.url))
            page.goto(f"{site.url}/{rel}", wait_until="load", timeout=LOAD_TIMEOUT_MS)
            pages[rel, width] = page, found
        return pages[rel, width]

    yield view
    for context in contexts.values():
        context.close()


def _states_fetched(page) -> set[str]:
    return set(
        page.evaluate(
            "() => performance.getEntriesByType('resource').map((e) => e.name)"
            ".filter((n) => n.includes('/_images/states/'))"
        )
    )


def test_every_chapter_with_a_live_explorer_shows_its_twin():
    assert PAGES, "no static explorer in the built book (run `make book`)"
    assert {Path(p).stem for p in PAGES} >= set(CHAPTERS), f"chapters without a static explorer: {PAGES}"


@pytest.mark.parametrize("rel", PAGES)
def test_every_control_of_every_static_explorer_shows_its_states(views, rel):
    """Every control moved through all its values by the keyboard: each move shows the precomputed state's own
    picture (changed where the picture differs, loaded from 127.0.0.1) and status line; nothing is fetched
    from elsewhere and nothing reaches the console. The page loads no state but the first pictures; a twin's
    first focus fetches its start's neighbours, and a move shows them from the cache."""
    page, found = views(rel, WIDE)
    boxes = page.locator(".static-explorer").all()
    assert boxes and len(_states_fetched(page)) <= len(boxes), "states fetched before any control moved"
    for n, box in enumerate(boxes):
        fetched = _states_fetched(page)
        data, moves = walk_static_explorer(page, box)
        assert len(data["frames"]) == len(data["status"]) > 1 and len(data["shape"]) in (1, 2, 3)
        assert len(_states_fetched(page)) > len(fetched) + 1, "the neighbours were not fetched"
        ranges = [a for a in range(len(data["shape"])) if box.locator(f"input[type=range][data-axis='{a}']").count()]
        changed, loads = dict.fromkeys(range(len(data["shape"])), 0), 0
        for move in moves:
            k, view, where = move["k"], move["view"], f"{rel} twin {n + 1}, axis {move['axis']}, state {move['k']}"
            assert view["values"] == list(np.unravel_index(k, data["shape"])), (where, view)
            assert view["src"] == data["frames"][k] and view["status"] == data["status"][k], (where, view)
            assert view["shown"] == [data["labels"][a][view["values"][a]] for a in ranges], (where, view)
            assert view["complete"] and view["natural_width"] > 0, f"{where}: image not loaded"
            assert view["error_class"] == (k in data["errors"]), where
            loads += move["new_picture"]
            assert view["loads"] == loads, f"{where}: {view['loads']} image loads after {loads} new pictures"
            if move["new_picture"]:
                assert move["loaded_src"] == data["frames"][k] and move["ms"] is not None, where
                changed[move["axis"]] += 1
        assert all(changed.values()), f"{rel} twin {n + 1}: a control that never changes the picture: {changed}"
        statuses = {data["status"][m["k"]] for m in moves}
        assert len(statuses) > 1, f"{rel} twin {n + 1}: the status line never changed"
    assert not found["external"], f"requests to other hosts: {found['external'][:5]}"
    assert not found["console"] and not found["failed"], (found["console"][:5], found["failed"][:5])


@pytest.mark.parametrize("width", [WIDE, NARROW])
def test_static_explorers_fit_the_column_keep_their_contrast_and_show_focus(views, width):
    """At 1400 and 400 px, in the light and the dark theme: each twin fits its column (nothing sticks out, the
    image is scaled down only where the column is narrower than it), its text contrasts with its background
    (at least 4.5:1), and a control focused from the keyboard shows an outline. Each twin is photographed."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for rel in PAGES:
        page, found = views(rel, width)
        for theme in ("light", "dark"):  # as the theme's switch does: the attribute its stylesheets read
            page.evaluate(f"document.documentElement.dataset.theme = document.documentElement.dataset.mode = '{theme}'")
            for n, box in enumerate(page.locator(".static-explorer").all()):
                box.scroll_into_view_if_needed()
                box.locator("img").evaluate("(img) => { img.loading = 'eager'; return img.decode(); }")
                fits = box.evaluate(FITS_JS)
                where = f"{rel} twin {n + 1} at {width} px ({theme})"
                assert fits["overflow"] <= 1 and not fits["outside"], (where, fits)
                assert fits["box"] <= fits["column"] + 1, (where, fits)
                if fits["natural"] + 30 <= fits["column"]:
                    assert abs(fits["img"] - fits["natural"]) <= 1, f"{where}: image scaled down: {fits}"
                contrast = box.evaluate(CONTRAST_JS)
                assert contrast["theme"] == theme, (where, contrast)
                assert min(contrast["status"], contrast["label"], contrast["caption"]) >= 4.5, (where, contrast)
                field = box.locator("[data-axis]").first
                field.focus()
                page.keyboard.press("Shift")  # a key: the focus is a keyboard focus
                outline = field.evaluate(
                    "(f) => [f.matches(':focus-visible'), getComputedStyle(f).outlineStyle,"
                    " getComputedStyle(f).outlineWidth]"
                )
                assert outline[0] and outline[1] != "none" and float(outline[2].removesuffix("px")) >= 2, (
                    where,
                    outline,
                )
                box.screenshot(path=str(SHOTS / f"{Path(rel).stem}-{n + 1}-{width}-{theme}.png"))
        assert not found["external"] and not found["console"], (rel, found)
