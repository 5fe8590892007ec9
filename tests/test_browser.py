r"""The reader's view: the built book in a real browser (headless Chromium driven by Playwright).

Run after `make book` (``make test`` does, after the other book checks): ``pytest -m browser``
(``make test-browser``). Every page of the table of contents is opened at 1400 px and at 400 px
width (a phone), served by ``http.server`` on 127.0.0.1; every request to another host is recorded
and refused (the browser's only proxy is a closed port): the book must read offline. One page load per (page, width) collects everything (two
pages load at a time, one browser); each test below checks one kind of defect and names the page,
the section id, the element and a snippet of its text. Everything is also written to
``_build/browser-report.json``, with a screenshot of each view in
``_build/screenshots/<page>-<width>.jpg``: its first screen, or the whole page (the top 6 000 px of
an API reference page) where a check fails and, for every view, with
``TOKENDYNAMICS_SCREENSHOTS=whole`` (``make screenshots``). The last three tests prove every check on synthetic
pages: it passes on a good one and reports each planted defect of a bad one. Before them, the
reader's actions: the menu and contents buttons, enlarging a figure, playing an animation, the
print stylesheet and the book's PDF (``make pdf``).

The checks, and what counts (documented decisions):

* *MathJax*: the page's MathJax script is the book's copy (``_static/mathjax/startup.js`` on
  127.0.0.1), ``MathJax.startup.promise`` resolved, no ``mjx-merror`` and no undefined macro
  (MathJax's ``noundefined`` draws those in red, without an error element).
* *Raw TeX* is searched in every visible text node (prose, headings, captions, tables, admonitions,
  the sidebar, HTML outputs of cells), except in ``mjx-container`` (typeset math) and in
  ``pre``/``code``/``kbd``/``samp``/highlighted blocks (code cells, their stream and ``text/plain``
  outputs). An untypeset formula left in a ``.math`` element *is* found.
* *Internal labels* (``spec`` + section sign, section sign + digit, our notes folder, claim labels ``\bC\d{1,2}\b``,
  figure labels ``\bF\d{1,2}\b``) are searched in the same text plus the text outputs of code
  cells (streams, ``text/plain``: a reader reads them) and inline ``code`` in prose; code cell
  inputs, code blocks and API signatures (``dt.sig``) are code and are skipped. Identifiers such as
  ``gaussian_F5`` do not match (no word boundary after ``_``).
* *Display equations*: the formula must fit its box, or sit in a box that scrolls sideways (the
  theme's ``mjx-container {overflow: auto}``: nothing is lost, such formulas are listed in the
  report as ``scrolled_equations``); a clipping box fails; the equation number must not overlap
  the visible part of the formula.
* *Images*: every ``<img>`` complete with ``naturalWidth > 0`` (lazy images are made eager).
* *Console*: ``console.error`` messages and uncaught page errors; "Failed to load resource" for a
  request already reported by the network check is not counted twice.
* *Network*: any request to a host other than 127.0.0.1 (blocked), and local requests that fail.
* *Figure text* (1400 px only; a phone shrinks every figure): smallest text as displayed, px =
  pt x dpi / 72 x displayed width / natural width, must be at least ``MIN_TEXT_PX``. The dpi and the
  smallest size in points come from the PNG the page shows: the book build's IPython start-up file
  (scripts/figure_text_startup.py) writes a ``tokendynamics:text`` chunk into every figure PNG.
  Without it the smallest size is assumed to be the book style's legend size (marked "assumed").
  Animations are measured the same way on their first frame.
* *Animations* (matplotlib ``to_jshtml``): displayed width at least ``ANIMATION_MIN_FILL`` of the
  column and not wider than it; every button shows an icon (an SVG, or a font glyph whose font face
  has loaded).
* *Weight*: the HTML at most ``MAX_HTML_BYTES``, the first load (every file requested until the page
  has loaded and MathJax has typeset it, before lazy images further down) at most
  ``MAX_FIRST_LOAD_BYTES`` (``tests/helpers.py``; ``make bench`` prints them).
* *Figures*: each enlarges on a click (``_static/book.js``) and its alt text is words, not a file
  name (that it is the caption: tests/test_book.py).
* *Tables* wider than their column scroll sideways with a visible cue above them.
* *Icons*: every visible font-awesome ``<i>`` icon is drawn (its glyph's font has loaded).
"""

from __future__ import annotations

import base64
import functools
import io
import json
import os
import re
import shutil
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

from tests.helpers import (
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

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
HTML = BUILD / "html"
SCREENSHOTS = BUILD / "screenshots"
REPORT = BUILD / "browser-report.json"

# `book` too: it needs the built book, so the library-only run (-m "not book") leaves it out
pytestmark = [pytest.mark.book, pytest.mark.browser]

CHROMIUM = find_chromium()
if CHROMIUM is None:
    pytest.skip("chromium is not installed: apt-get install -y chromium", allow_module_level=True)

from playwright.sync_api import sync_playwright  # noqa: E402

WIDE, NARROW = 1400, 400
MIN_TEXT_PX = 9.0  # smallest legible figure text on screen (px); body text is 16 px
ANIMATION_MIN_FILL = 0.8  # an animation should use at least this fraction of the column width
MATHJAX_LOCAL = "/_static/mathjax/startup.js"

# Raw TeX in visible text: a backslash command, a TeX line break, $...$, TeX delimiters, _{ or ^{.
RAW_TEX = re.compile(r"\\[A-Za-z]{2,}|\\\\|\$[^$\s](?:[^$\n]{0,200}?[^$\s])?\$|\$\$|\\[()\[\]]|[_^]\{")
LABELS = {
    "spec + section sign": re.compile("spec\\s*\u00a7"),
    "section sign + digit": re.compile("\u00a7\\s*\\d"),
    "notes folder": re.compile(r"\.\.[/]shared"),
    "claim label": re.compile(r"\bC\d{1,2}\b"),
    "figure label": re.compile(r"\bF\d{1,2}\b"),
}


# --------------------------------------------------------------------------------------------
# serving and browsing


def _local(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("data", "blob", "about") or parts.hostname in ("127.0.0.1", "localhost")


# The in-page collection: one call after load (MathJax finished, images decoded).
COLLECT_JS = r"""
async ({wait_ms}) => {
  const out = {};
  const cut = (s, n) => Array.from(s || '').slice(0, n).join('');  // never splits a surrogate pair
  const timeout = (ms) => new Promise((resolve) => setTimeout(() => resolve('timeout'), ms));
  const imgs = Array.from(document.images);
  imgs.forEach((i) => { i.loading = 'eager'; });
  await Promise.race([Promise.all(imgs.map((i) => i.decode().catch(() => null))), timeout(wait_ms)]);

  // ---- MathJax
  const mjScript = Array.from(document.scripts).find((s) => /mathjax|tex-(mml-)?chtml|tex-svg/i.test(s.src));
  const mj = {script: mjScript ? mjScript.src : null, present: !!window.MathJax, version: null,
              typeset: false, status: null, errors: [], undefined: [], containers: 0};
  const texOf = new Map();
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    mj.status = await Promise.race([MathJax.startup.promise.then(() => 'done', (e) => 'failed: ' + e), timeout(wait_ms)]);
    mj.typeset = mj.status === 'done';
    mj.version = MathJax.version || null;
    if (document.fonts) { await Promise.race([document.fonts.ready, timeout(wait_ms)]); }
    const doc = MathJax.startup.document;
    if (doc && doc.math) {
      for (const item of doc.math) {
        if (item.typesetRoot) texOf.set(item.typesetRoot, item.math);
        if (!item.root || !item.root.walkTree) continue;
        item.root.walkTree((node) => {
          if (node.isKind && node.isKind('mtext') && node.attributes && node.attributes.get('mathcolor') === 'red') {
            const text = node.childNodes.map((c) => (c.getText ? c.getText() : (c.text || ''))).join('');
            if (text.startsWith('\\')) mj.undefined.push({macro: text, tex: cut(item.math, 160)});
          }
        });
      }
    }
  }
  document.querySelectorAll('mjx-merror').forEach((e) => {
    const c = e.closest('mjx-container');
    mj.errors.push({error: e.getAttribute('data-mjx-error') || e.textContent, tex: cut(texOf.get(c), 160)});
  });
  mj.containers = document.querySelectorAll('mjx-container').length;
  out.mathjax = mj;
  const nav = performance.getEntriesByType('navigation')[0];
  out.load_ms = nav ? Math.round(nav.loadEventEnd || nav.duration) : null;

  // ---- visible text, by block, for two scopes
  const BLOCK = 'p, li, td, th, dt, dd, figcaption, caption, h1, h2, h3, h4, h5, h6, pre, blockquote, summary, .admonition-title, div, nav, section, article';
  const TEX_SKIP = 'script, style, noscript, template, pre, code, kbd, samp, .highlight, .cell_input, .headerlink';
  const LABEL_SKIP = 'script, style, noscript, template, .cell_input, dt.sig, .headerlink, .highlight-python, .highlight-default, .highlight-ipython3, code, kbd, samp';
  const visible = (el) => (el.checkVisibility ? el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true}) : !!el.offsetParent);
  const blocks = {tex: new Map(), label: new Map(), outtex: new Map()};
  const push = (scope, el, text) => {
    const block = el.closest(BLOCK) || document.body;
    if (!blocks[scope].has(block)) blocks[scope].set(block, []);
    blocks[scope].get(block).push(text);
  };
  // acceptNode runs in document order: typeset math leaves a placeholder and its subtree is skipped
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT, {
    acceptNode: (n) => {
      if (n.nodeType !== 1) return NodeFilter.FILTER_ACCEPT;
      const tag = n.tagName.toLowerCase();
      if (tag === 'script' || tag === 'style' || tag === 'template' || tag === 'noscript') return NodeFilter.FILTER_REJECT;
      if (tag === 'mjx-container') {
        if (visible(n)) { push('tex', n, ' ⟨math⟩ '); push('label', n, ' ⟨math⟩ '); }
        return NodeFilter.FILTER_REJECT;
      }
      return NodeFilter.FILTER_SKIP;
    }});
  let node;
  while ((node = walker.nextNode())) {
    const el = node.parentElement;
    if (!el || !node.nodeValue.trim() || !visible(el)) continue;
    if (!el.closest(TEX_SKIP)) push('tex', el, node.nodeValue);
    if (!el.closest(LABEL_SKIP)) {
      const inCode = el.closest('pre, .highlight');
      if (!inCode || el.closest('.cell_output')) push('label', el, node.nodeValue);
      if (inCode && el.closest('.cell_output')) push('outtex', el, node.nodeValue);  // reported, not failed
    }
  }
  const describe = (el) => {
    const cls = (el.className && typeof el.className === 'string') ? '.' + el.className.trim().split(/\s+/).slice(0, 2).join('.') : '';
    const sec = el.closest('section[id]');
    return {where: el.tagName.toLowerCase() + cls, section: sec ? sec.id : null};
  };
  out.text = {};
  for (const scope of ['tex', 'label', 'outtex']) {
    out.text[scope] = [];
    for (const [el, parts] of blocks[scope]) {
      out.text[scope].push({text: parts.join('').replace(/\s+/g, ' '), ...describe(el)});
    }
  }

  // ---- display equations
  const article = document.querySelector('article') || document.querySelector('main') || document.body;
  const cs = getComputedStyle(article);
  const column = article.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
  out.column = column;
  out.equations = [];
  document.querySelectorAll('mjx-container[display="true"]').forEach((c) => {
    const m = c.querySelector('mjx-math');
    if (!m) return;
    const block = c.closest('div.math') || c.parentElement;
    const r = m.getBoundingClientRect();
    const br = block.getBoundingClientRect();
    // the nearest ancestor (up to the block) that does not let the formula overflow visibly decides:
    // auto/scroll = a reader can scroll to the hidden part, hidden/clip = it is cut off
    let box = null, mode = 'visible';
    for (let e = m.parentElement; e && e !== block.parentElement; e = e.parentElement) {
      const ox = getComputedStyle(e).overflowX;
      if (ox !== 'visible') { box = e; mode = (ox === 'auto' || ox === 'scroll') ? 'scrolls' : 'clips'; break; }
    }
    const bx = box ? box.getBoundingClientRect() : br;
    const col = article.getBoundingClientRect();
    const eq = block.querySelector('span.eqno');
    let overlap = 0, eqno = null;
    if (eq) {
      const er = eq.getBoundingClientRect();
      eqno = eq.textContent.trim();
      // only the part of the formula a reader sees (inside a scrolling or clipping box) counts
      const vl = box ? Math.max(r.left, bx.left) : r.left, vr = box ? Math.min(r.right, bx.right) : r.right;
      const ox = Math.min(vr, er.right) - Math.max(vl, er.left);
      const oy = Math.min(r.bottom, er.bottom) - Math.max(r.top, er.top);
      if (ox > 1 && oy > 1) overlap = ox;
    }
    out.equations.push({tex: cut(texOf.get(c), 160), eqno, math_left: r.left, math_right: r.right,
                        math_width: r.width, block_left: br.left, block_right: br.right, block_width: br.width,
                        mode, box_left: bx.left, box_right: bx.right, box_width: bx.width,
                        column_left: col.left, column_right: col.right, overlap, ...describe(block)});
  });
  // inline formulas in table cells (MathJax never breaks them): each must fit its cell, or scroll in it
  out.inline_in_cells = [];
  document.querySelectorAll('td mjx-container:not([display="true"]), th mjx-container:not([display="true"])').forEach((c) => {
    const cell = c.closest('td, th');
    let box = c;
    for (let e = c; e && e !== cell; e = e.parentElement) {
      const ox = getComputedStyle(e).overflowX;
      if (ox === 'auto' || ox === 'scroll') { box = e; break; }
    }
    const r = box.getBoundingClientRect(), cr = cell.getBoundingClientRect();
    if (r.width > 0 && (r.right > cr.right + 1 || r.left < cr.left - 1)) {
      out.inline_in_cells.push({tex: cut(texOf.get(c), 160), width: r.width, cell_width: cr.width,
                                scrolls: box !== c, ...describe(cell)});
    }
  });

  // ---- images, figures, animations
  out.images = imgs.map((i) => ({src: i.currentSrc || i.src, complete: i.complete, natural_width: i.naturalWidth,
                                 natural_height: i.naturalHeight, width: i.getBoundingClientRect().width,
                                 animation: !!i.closest('.animation'), ...describe(i)}));
  const caption = (i) => {
    const fig = i.closest('figure');
    const cap = fig && fig.querySelector('figcaption');
    return cap ? cut(cap.innerText.replace(/\s+/g, ' '), 90) : null;
  };
  out.figures = imgs.filter((i) => !i.closest('.animation') && /\/_images\//.test(i.currentSrc || i.src))
    .map((i) => ({src: i.currentSrc || i.src, natural_width: i.naturalWidth, width: i.getBoundingClientRect().width,
                  caption: caption(i), alt: i.getAttribute('alt'), enlargeable: i.classList.contains('book-enlargeable'),
                  ...describe(i)}));
  // icons: an <svg>, or an <i> whose ::before glyph comes from a font face that has loaded
  const loadedFaces = new Set();
  if (document.fonts) document.fonts.forEach((f) => { if (f.status === 'loaded') loadedFaces.add(f.family.replace(/["']/g, '') + '|' + f.weight); });
  const iconDrawn = (icon) => {
    if (!icon) return false;
    if (icon.tagName.toLowerCase() === 'svg') return icon.getBoundingClientRect().width > 0;
    const before = getComputedStyle(icon, '::before');
    if (!before.content || before.content === 'none' || before.content === 'normal') return false;
    const family = before.fontFamily.split(',')[0].trim().replace(/["']/g, '');
    return icon.getBoundingClientRect().width > 0 && loadedFaces.has(family + '|' + before.fontWeight);
  };
  out.icons = Array.from(document.querySelectorAll('i[class*="fa-"]')).filter((i) => visible(i))
    .map((i) => ({icon: i.className, drawn: iconDrawn(i), ...describe(i.closest('button, a') || i)}));
  // tables wider than the box they scroll in, and whether a visible cue says so
  out.scrolling_tables = [];
  document.querySelectorAll('article table').forEach((table) => {
    let box = null;
    for (let e = table.parentElement; e && e !== article; e = e.parentElement) {
      const ox = getComputedStyle(e).overflowX;
      if (ox === 'auto' || ox === 'scroll') { box = e; break; }
    }
    if (!box || !visible(table) || box.scrollWidth <= box.clientWidth + 1) return;
    const hint = box.previousElementSibling;
    const cue = !!(hint && hint.classList.contains('book-scroll-hint') && visible(hint) && hint.getBoundingClientRect().height > 0);
    out.scrolling_tables.push({width: box.scrollWidth, box_width: box.clientWidth, cue,
                               head: cut(table.innerText.replace(/\s+/g, ' '), 60), ...describe(box)});
  });
  out.animations = Array.from(document.querySelectorAll('.animation')).map((a) => {
    const i = a.querySelector('img');
    const icons = Array.from(a.querySelectorAll('.anim-buttons button')).map((b) => {
      const icon = b.querySelector('svg, i');
      return {title: b.title, icon_width: icon ? icon.getBoundingClientRect().width : 0, drawn: iconDrawn(icon)};
    });
    return {width: i ? i.getBoundingClientRect().width : 0, natural_width: i ? i.naturalWidth : 0,
            frame: i ? (i.currentSrc || i.src || null) : null, icons, ...describe(a)};
  });
  return out;
}
"""


@dataclass
class Audit:
    page: str
    width: int
    seconds: float = 0.0
    console_errors: list = field(default_factory=list)
    page_errors: list = field(default_factory=list)
    external_requests: list = field(default_factory=list)
    failed_local: list = field(default_factory=list)
    data: dict = field(default_factory=dict)
    screenshot: str | None = None


LOAD_TIMEOUT_MS = 120_000  # the API page typesets ~1200 formulas: 20 s on a busy 2-core machine
# Screenshots: every view's first screen; the whole page for a view that fails a check, and for
# every view with TOKENDYNAMICS_SCREENSHOTS=whole (`make screenshots`). A whole-page screenshot
# repaints the page at its full height: the 19 views take 35-40 s more on a 2-core machine, twice
# what the checks take, so the test run takes them only where there is something to see.
WHOLE_PAGES = os.environ.get("TOKENDYNAMICS_SCREENSHOTS", "") == "whole"
MAX_SCREENSHOT_HEIGHT = 30_000  # px; every chapter fits (the longest is ~26 000 px at 1400 px)
# The API reference pages are 9 000-66 000 px of entries laid out alike: their top shows the layout.
REFERENCE_SCREENSHOT_HEIGHT = 6_000
SCREENSHOT_QUALITY = 80  # JPEG: a quarter of the CPU time of a PNG of a 20 000-px page, text still sharp


def _screenshot_height(rel: str) -> int:
    return REFERENCE_SCREENSHOT_HEIGHT if "/api/" in f"/{rel}" else MAX_SCREENSHOT_HEIGHT


def _new_context(browser, width: int):
    """A browser context at ``width`` px (one per width: its pages share the HTTP and code caches).

    Its pages keep every resource timing entry (the page weights count them all)."""
    context = browser.new_context(
        viewport={"width": width, "height": 900}, device_scale_factor=1, service_workers="block"
    )
    context.add_init_script(RESOURCE_BUFFER_JS)
    return context


def _open(context, server: StaticServer, rel: str, width: int):
    """Start loading ``rel`` in a new page of ``context``, offline but for 127.0.0.1."""
    result = Audit(page=rel, width=width)
    page = context.new_page()

    # the browser's proxy refuses every connection; requests to 127.0.0.1 bypass it (see `browser`)
    page.on(
        "request",
        lambda r: not _local(r.url) and result.external_requests.append({"url": r.url, "type": r.resource_type}),
    )
    page.on(
        "console",
        lambda m: (
            m.type == "error"
            and result.console_errors.append({"text": m.text[:300], "url": (m.location or {}).get("url", "")})
        ),
    )
    page.on("pageerror", lambda e: result.page_errors.append(str(e)[:300]))
    page.on(
        "response",
        lambda r: r.status >= 400 and _local(r.url) and result.failed_local.append({"url": r.url, "status": r.status}),
    )
    page.on(
        "requestfailed",
        lambda r: _local(r.url) and result.failed_local.append({"url": r.url[:200], "status": r.failure}),
    )
    started = time.perf_counter()
    page.goto(f"{server.url}/{rel}", wait_until="commit", timeout=LOAD_TIMEOUT_MS)
    return result, page, started, server


def _finish(opened, screenshot: Path | None, wait_ms: int, whole: Callable[[Audit], bool] | None = None) -> Audit:
    """Wait for the load event, collect, screenshot, close the page.

    The screenshot is of the whole page (up to its cap) when ``whole(audit)`` says so, else of the
    first screen, as a reader first sees the page.
    """
    result, page, started, server = opened
    try:
        page.wait_for_load_state("load", timeout=LOAD_TIMEOUT_MS)
        # the weight first: the collection below makes every lazy image load
        weight = page_weight(page.evaluate(PAGE_WEIGHT_JS, wait_ms), server.root, server.url)
        result.data = page.evaluate(COLLECT_JS, {"wait_ms": wait_ms})
        result.data["weight"] = {**weight, "files": weight["files"][:5]}
        height = page.evaluate("document.documentElement.scrollHeight")
        result.data["page_height"] = height
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            full, clip = whole is not None and whole(result), None
            if full and height > _screenshot_height(result.page):  # an API reference page: its top only
                clip = {"x": 0, "y": 0, "width": result.width, "height": _screenshot_height(result.page)}
                result.data["screenshot_cut_at"] = clip["height"]
            page.screenshot(
                path=str(screenshot),
                full_page=full,
                clip=clip,
                type="jpeg",
                quality=SCREENSHOT_QUALITY,
                timeout=LOAD_TIMEOUT_MS,
            )
            result.screenshot = str(screenshot.relative_to(screenshot.parents[1]))
            result.data["screenshot_kind"] = "whole page" if full else "first screen"
    finally:
        page.close()
    result.seconds = round(time.perf_counter() - started, 2)
    return result


def audit_page(
    browser,
    server: StaticServer,
    rel: str,
    width: int,
    screenshot: Path | None = None,
    wait_ms: int = 15000,
    whole: Callable[[Audit], bool] | None = None,
) -> Audit:
    """Open ``rel`` at ``width`` px, offline but for 127.0.0.1, and collect everything the checks need."""
    context = _new_context(browser, width)
    try:
        return _finish(_open(context, server, rel, width), screenshot, wait_ms, whole)
    finally:
        context.close()


def audit_pages(
    browser,
    server: StaticServer,
    views,
    screenshots: Path | None,
    *,
    window: int = 2,
    wait_ms: int = 15000,
    whole: Callable[[Audit], bool] | None = None,
) -> dict:
    """Audit ``views`` [(rel, width)], keeping up to ``window`` pages loading at once (one browser).

    Pages of one width share a context, hence its cache: MathJax's script and fonts are fetched
    and compiled once, as for a reader moving from page to page. ``whole(audit)`` decides which
    pages are photographed whole (see :func:`_finish`).
    """
    contexts = {}
    pending, active, audits = list(views), [], {}
    try:
        while pending or active:
            while pending and len(active) < window:
                rel, width = pending.pop(0)
                if width not in contexts:
                    contexts[width] = _new_context(browser, width)
                active.append(((rel, width), _open(contexts[width], server, rel, width)))
            (rel, width), opened = active.pop(0)
            shot = screenshots / f"{Path(rel).stem}-{width}.jpg" if screenshots else None
            audits[(rel, width)] = _finish(opened, shot, wait_ms, whole)
    finally:
        for context in contexts.values():
            context.close()
    return audits


# --------------------------------------------------------------------------------------------
# the checks: each returns a list of human-readable failures (empty = pass)


def _snippet(text: str, m: re.Match, width: int = 45) -> str:
    a, b = max(0, m.start() - width), min(len(text), m.end() + width)
    return ("…" if a else "") + text[a:b].strip() + ("…" if b < len(text) else "")


def _where(item: dict) -> str:
    return f"[{item.get('section') or '-'} {item.get('where', '')}]"


def check_mathjax(a: Audit) -> list[str]:
    mj = a.data.get("mathjax", {})
    out = []
    script = urlsplit(mj.get("script") or "")
    if mj.get("script") and not (script.hostname == "127.0.0.1" and script.path.endswith(MATHJAX_LOCAL)):
        out.append(f"MathJax is not loaded from the book's copy ({MATHJAX_LOCAL}): {mj['script']}")
    if mj.get("present") and not mj.get("typeset"):
        out.append(f"MathJax did not finish typesetting (status: {mj.get('status')}, version {mj.get('version')})")
    if mj.get("typeset") and not str(mj.get("version", "")).startswith("3."):
        out.append(f"MathJax version {mj.get('version')} is not 3.x")
    for e in mj.get("errors", []):
        out.append(f"mjx-merror {e['error']!r} in: {e['tex']}")
    for u in mj.get("undefined", []):
        out.append(f"undefined macro {u['macro']} in: {u['tex']}")
    return out


def _raw_tex(a: Audit, where: str) -> list[str]:
    """Raw TeX in the text blocks of kind ``where`` ("tex": visible prose, "outtex": text outputs)."""
    out = []
    for block in a.data.get("text", {}).get(where, []):
        for m in RAW_TEX.finditer(block["text"]):
            out.append(f"{m.group(0)!r} {_where(block)}: {_snippet(block['text'], m)}")
    return out


def find_raw_tex(a: Audit) -> list[str]:
    return _raw_tex(a, "tex")


def raw_tex_in_text_outputs(a: Audit) -> list[str]:
    """Raw TeX in the text outputs of code cells (streams, text/plain): visible, but not a failure
    (the check excludes pre/code); reported so that printed tables can be made readable."""
    return _raw_tex(a, "outtex")


def find_labels(a: Audit) -> list[str]:
    out = []
    for block in a.data.get("text", {}).get("label", []):
        for name, pattern in LABELS.items():
            for m in pattern.finditer(block["text"]):
                out.append(f"{name} {m.group(0)!r} {_where(block)}: {_snippet(block['text'], m)}")
    return out


def check_equations(a: Audit) -> list[str]:
    """A display formula must fit its block, or sit in a box that scrolls horizontally (nothing is
    lost), and that box must stay inside the column; its number must not overlap it. An inline
    formula in a table cell must fit the cell, or scroll inside it."""
    out = []
    for eq in a.data.get("equations", []):
        label = f"{eq['eqno'] or 'unnumbered'} {_where(eq)} {eq['tex'][:90]!r}"
        if eq["mode"] == "scrolls":
            box_wide = eq["box_right"] > eq["column_right"] + 1 or eq["box_left"] < eq["column_left"] - 1
            if box_wide:
                out.append(f"equation {label}: its scrolling box ({eq['box_width']:.0f} px) sticks out of the column")
        else:
            wide = eq["math_right"] > eq["box_right"] + 1 or eq["math_left"] < eq["box_left"] - 1
            if wide:
                out.append(
                    f"equation {label}: {eq['math_width']:.0f} px wide in a {eq['box_width']:.0f} px box "
                    f"({'clipped: its end is cut off' if eq['mode'] == 'clips' else 'overflows'})"
                )
        if eq["overlap"] > 0:
            out.append(f"equation {label}: its number overlaps the formula by {eq['overlap']:.0f} px")
    for m in a.data.get("inline_in_cells", []):
        out.append(
            f"inline formula {_where(m)} {m['tex'][:90]!r}: {m['width']:.0f} px wide in a {m['cell_width']:.0f} px "
            "table cell (it runs under the next cell)"
        )
    return out


def scrolled_equations(a: Audit) -> list[str]:
    """Formulas wider than their box that a reader must scroll sideways (allowed; reported)."""
    return [
        f"{eq['eqno'] or 'unnumbered'} {_where(eq)}: {eq['math_width']:.0f} px in {eq['box_width']:.0f} px: "
        f"{eq['tex'][:90]!r}"
        for eq in a.data.get("equations", [])
        if eq["mode"] == "scrolls" and eq["math_width"] > eq["box_width"] + 1
    ]


def check_images(a: Audit) -> list[str]:
    out = []
    for img in a.data.get("images", []):
        if not (img["complete"] and img["natural_width"] > 0):
            src = img["src"] if not img["src"].startswith("data:") else img["src"][:40] + "…"
            out.append(f"image not loaded {_where(img)}: {src}")
    return out


def check_console(a: Audit) -> list[str]:
    blocked = {r["url"] for r in a.external_requests} | {r["url"] for r in a.failed_local}
    out = [f"pageerror: {e}" for e in a.page_errors]
    for c in a.console_errors:
        if c["url"] in blocked and "Failed to load resource" in c["text"]:
            continue  # reported by check_network
        out.append(f"console error: {c['text']} ({c['url'] or 'inline'})")
    return out


def check_network(a: Audit) -> list[str]:
    out = [f"external request ({r['type']}): {r['url']}" for r in a.external_requests]
    out += [f"local request failed ({r['status']}): {r['url']}" for r in a.failed_local]
    return out


def _png_text_info(png: bytes) -> tuple[dict | None, float | None]:
    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        info = im.info
    chunk = info.get("tokendynamics:text")
    meta = json.loads(chunk) if chunk else None
    dpi = info.get("dpi", (None,))[0]
    return meta, (round(float(dpi)) if dpi else None)


@functools.lru_cache(maxsize=1)
def _assumed_min_pt() -> float:
    """Without metadata: the smallest text the book style sets (legend), in points."""
    from matplotlib import font_manager, rcParams

    from tokendynamics.book.plotting import BOOK_STYLE

    base = rcParams["font.size"]
    sizes = [BOOK_STYLE.get(k, rcParams[k]) for k in ("legend.fontsize", "xtick.labelsize", "ytick.labelsize")]
    return min(base * font_manager.font_scalings.get(s, 1.0) if isinstance(s, str) else float(s) for s in sizes)


def figure_text_sizes(a: Audit, root: Path) -> list[dict]:
    """Per figure: smallest text as displayed (px), with how it was obtained."""
    rows = []
    for fig in a.data.get("figures", []):
        if not fig.get("natural_width"):
            continue  # a broken image: check_images reports it
        path = root / unquote(urlsplit(fig["src"]).path).lstrip("/")
        meta, dpi = _png_text_info(path.read_bytes()) if path.exists() else (None, None)
        rows.append(_text_row(fig, meta, dpi, path.name))
    for k, anim in enumerate(a.data.get("animations", [])):
        meta, dpi = (None, None)
        frame = anim.get("frame") or ""
        if frame.startswith("data:image/png"):
            meta, dpi = _png_text_info(base64.b64decode(frame.split(",", 1)[1]))
        elif frame:
            path = root / unquote(urlsplit(frame).path).lstrip("/")
            meta, dpi = _png_text_info(path.read_bytes()) if path.exists() else (None, None)
        rows.append(_text_row(anim, meta, dpi, f"animation {k + 1}"))
    return rows


def _text_row(item: dict, meta: dict | None, dpi: float | None, name: str) -> dict:
    scale = item["width"] / item["natural_width"] if item.get("natural_width") else None
    if meta and "min_pt" in meta:
        pt, how, dpi = meta["min_pt"], f"metadata ({meta.get('min_text', '')!r})", meta.get("dpi", dpi)
    else:
        pt, how = _assumed_min_pt(), "assumed (no tokendynamics:text chunk)"
    px = pt * dpi / 72 * scale if (dpi and scale) else None
    return {
        "figure": name,
        "caption": item.get("caption"),
        "section": item.get("section"),
        "min_pt": pt,
        "dpi": dpi,
        "natural_width": item.get("natural_width"),
        "displayed_width": round(item.get("width", 0)),
        "scale": round(scale, 3) if scale else None,
        "min_px": round(px, 1) if px else None,
        "how": how,
    }


def check_figure_text(a: Audit, root: Path) -> list[str]:
    out = []
    for row in figure_text_sizes(a, root):
        if row["min_px"] is None:
            out.append(f"{row['figure']} [{row['section']}]: cannot estimate its text size (dpi {row['dpi']})")
        elif row["min_px"] < MIN_TEXT_PX:
            out.append(
                f"{row['figure']} [{row['section']}] {row['caption'] or ''}: smallest text "
                f"{row['min_px']:.1f} px < {MIN_TEXT_PX} px ({row['min_pt']} pt at {row['dpi']:.0f} dpi, "
                f"shown at {row['scale']:.2f} x; {row['how']})"
            )
    return out


def check_animations(a: Audit) -> list[str]:
    out = []
    column = a.data.get("column", 0)
    for k, anim in enumerate(a.data.get("animations", [])):
        where = f"animation {k + 1} {_where(anim)}"
        if anim["width"] > column + 1:
            out.append(f"{where}: {anim['width']:.0f} px wide, wider than the {column:.0f} px column")
        elif anim["width"] < ANIMATION_MIN_FILL * column:
            out.append(
                f"{where}: {anim['width']:.0f} px wide in a {column:.0f} px column "
                f"(< {ANIMATION_MIN_FILL:.0%}; natural width {anim['natural_width']} px)"
            )
        empty = [b["title"] for b in anim["icons"] if b["icon_width"] <= 0 or not b.get("drawn")]
        if empty:
            out.append(f"{where}: buttons without icons: {', '.join(empty)}")
    return out


def _is_reference(rel: str) -> bool:
    return "/api/" in f"/{rel}"


def check_weight(a: Audit) -> list[str]:
    """The page's HTML at most ``MAX_HTML_BYTES``; its first load at most ``MAX_FIRST_LOAD_BYTES``, except
    on the API reference pages (their own HTML is up to 0.7 MB of entries: 2.1-2.2 MB in all, printed
    by ``make bench``)."""
    w = a.data.get("weight")
    if not w:
        return ["page weight not measured"]
    out = []
    heaviest = ", ".join(f"{path} {size / 1e6:.2f} MB" for size, path in w["files"][:3])
    if w["html"] > MAX_HTML_BYTES:
        out.append(f"HTML {w['html'] / 1e6:.2f} MB > {MAX_HTML_BYTES / 1e6:.1f} MB")
    if w["first_load"] > MAX_FIRST_LOAD_BYTES and not _is_reference(a.page):
        out.append(f"first load {w['first_load'] / 1e6:.2f} MB > {MAX_FIRST_LOAD_BYTES / 1e6:.1f} MB ({heaviest})")
    return out


FILE_NAME_ALT = re.compile(r"(^|/)[^/\s]+\.(png|jpe?g|gif|svg|webp)$", re.IGNORECASE)


def check_figures(a: Audit) -> list[str]:
    """Every figure of the book enlarges on a click (``_static/book.js``) and has words, not a file
    name, as alt text (that they are its caption's words is checked on the HTML, tests/test_book.py)."""
    out = []
    for fig in a.data.get("figures", []):
        name = Path(urlsplit(fig["src"]).path).name
        alt = (fig.get("alt") or "").strip()
        if not fig.get("enlargeable"):
            out.append(f"figure {name} {_where(fig)}: does not enlarge on a click")
        if not alt or FILE_NAME_ALT.search(alt):
            out.append(f"figure {name} {_where(fig)}: alt text {alt!r} is not words")
    return out


def check_tables(a: Audit) -> list[str]:
    """A table wider than its column (it scrolls sideways) has a visible cue saying so."""
    return [
        f"table {_where(t)} {t['head']!r}: {t['width']} px scrolling in {t['box_width']} px with no visible cue"
        for t in a.data.get("scrolling_tables", [])
        if not t["cue"]
    ]


def check_icons(a: Audit) -> list[str]:
    """Every visible font-awesome icon is drawn (its glyph's font has loaded)."""
    return [f"icon {i['icon']!r} {_where(i)} is not drawn" for i in a.data.get("icons", []) if not i["drawn"]]


# --------------------------------------------------------------------------------------------
# the book's pages


def _toc_pages() -> list[str]:
    return [f"{f}.html" for f in toc_files()]


PAGES = _toc_pages()
INTRO = f"{yaml.safe_load((ROOT / '_toc.yml').read_text())['root']}.html"
VIEWS = [(p, w) for w in (WIDE, NARROW) for p in PAGES]
VIEW_IDS = [f"{Path(p).stem}-{w}" for p, w in VIEWS]


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium whose only proxy is a 127.0.0.1 port that refuses connections.

    Every request to another host fails there (the pages' ``request`` events record it), while
    127.0.0.1 bypasses the proxy: the book is read offline without routing every request through
    the test (routing would also switch off the browser's cache).
    """
    with socket.socket() as refusing, sync_playwright() as p:
        refusing.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        proxy = {"server": f"http://127.0.0.1:{refusing.getsockname()[1]}", "bypass": "127.0.0.1"}
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, proxy=proxy)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def book(browser):
    """Audits of every (page, width) of the built book, loaded once; writes the JSON report."""
    if not (HTML / "index.html").exists():
        pytest.fail("the book is not built: run `make book` first")
    start = time.perf_counter()
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)  # no screenshot of an earlier build or run
    with StaticServer(HTML) as server:
        audits = audit_pages(browser, server, VIEWS, SCREENSHOTS, whole=lambda a: WHOLE_PAGES or _has_defect(a))
    total = time.perf_counter() - start
    _write_report(audits, total)
    return audits


# what every view must satisfy: behaviour (the test id and the report's key) -> (check, what it finds)
PAGE_CHECKS = {
    "mathjax_is_local_and_typesets_without_errors": (check_mathjax, "MathJax problem(s)"),
    "no_raw_tex_in_visible_text": (find_raw_tex, "raw TeX instance(s)"),
    "no_internal_labels_in_visible_text": (find_labels, "internal label(s)"),
    "display_equations_fit_their_column_and_number": (check_equations, "equation layout problem(s)"),
    "every_image_loads": (check_images, "broken image(s)"),
    "no_console_errors": (check_console, "console error(s)"),
    "page_needs_no_network": (check_network, "request(s) off the book"),
    "animations_fill_the_column_and_have_button_icons": (check_animations, "animation problem(s)"),
    "page_is_light": (check_weight, "page weight problem(s)"),
    "figures_enlarge_and_have_their_caption_as_alt_text": (check_figures, "figure problem(s)"),
    "scrolling_tables_say_that_they_scroll": (check_tables, "table(s) without a scroll cue"),
    "icons_are_drawn": (check_icons, "icon(s) not drawn"),
}


def _has_defect(a: Audit) -> bool:
    """Whether any check fails on the view ``a`` (its screenshot is then of the whole page)."""
    return any(check(a) for check, _ in PAGE_CHECKS.values()) or (a.width == WIDE and bool(check_figure_text(a, HTML)))


def _write_report(audits: dict, total: float) -> None:
    report = {"seconds": round(total, 1), "min_text_px": MIN_TEXT_PX, "pages": []}
    for (rel, width), a in audits.items():
        entry = {
            "page": rel,
            "width": width,
            "seconds": a.seconds,
            "screenshot": a.screenshot,
            "screenshot_kind": a.data.get("screenshot_kind"),
            "page_height": a.data.get("page_height"),
            "screenshot_cut_at": a.data.get("screenshot_cut_at"),
            "load_ms": a.data.get("load_ms"),
            "mathjax": {
                k: v for k, v in a.data.get("mathjax", {}).items() if k in ("script", "version", "status", "containers")
            },
            "figure_text": figure_text_sizes(a, HTML),
        }
        entry.update({name: check(a) for name, (check, _) in PAGE_CHECKS.items()})
        entry["figure_text_failures"] = check_figure_text(a, HTML)
        entry["weight"] = a.data.get("weight")
        entry["scrolled_equations"] = scrolled_equations(a)
        entry["raw_tex_in_text_outputs"] = raw_tex_in_text_outputs(a)
        report["pages"].append(entry)
    REPORT.write_bytes(json.dumps(report, indent=1, ensure_ascii=False).encode("utf-8", "replace"))


def _assert_none(failures: list[str], what: str, rel: str, width: int):
    assert not failures, f"{rel} at {width} px: {len(failures)} {what}\n  " + "\n  ".join(failures)


@pytest.mark.parametrize("behaviour", PAGE_CHECKS)
@pytest.mark.parametrize(("rel", "width"), VIEWS, ids=VIEW_IDS)
def test_page(book, rel, width, behaviour):
    """Each view of each page, for each behaviour of ``PAGE_CHECKS`` (the test id names both)."""
    check, what = PAGE_CHECKS[behaviour]
    _assert_none(check(book[(rel, width)]), what, rel, width)


@pytest.mark.parametrize("rel", PAGES, ids=[Path(p).stem for p in PAGES])
def test_figure_text_is_legible(book, rel):
    _assert_none(check_figure_text(book[(rel, WIDE)], HTML), "figure(s) with small text", rel, WIDE)


def test_screenshots_were_written(book):
    """Every view has its screenshot: the whole page if a check failed there or if asked for, else its first screen."""
    for (rel, width), a in book.items():
        assert a.screenshot and (BUILD / a.screenshot).stat().st_size > 10_000, f"no screenshot of {rel} at {width}"
        whole = WHOLE_PAGES or _has_defect(a)
        assert a.data["screenshot_kind"] == ("whole page" if whole else "first screen"), (rel, width)


# --------------------------------------------------------------------------------------------
# what a reader does: the menu and contents buttons, enlarging a figure, playing an animation,
# printing, the PDF (each at both widths where the width matters)

READER_PAGE = "chapters/01_well_posedness.html"  # a chapter with sections, figures and animations
NEXT_CHAPTER = "02_gaussian_preservation.html"
PDF = BUILD / "pdf" / "book.pdf"


@pytest.fixture(scope="module")
def site():
    if not (HTML / "index.html").exists():
        pytest.fail("the book is not built: run `make book` first")
    with StaticServer(HTML) as server:
        yield server


@pytest.fixture
def reader(browser, site, request):
    """A page of ``READER_PAGE`` at the width the test is parametrized with, loaded, MathJax done."""
    context = _new_context(browser, request.param)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{site.url}/{READER_PAGE}", wait_until="load", timeout=LOAD_TIMEOUT_MS)
    page.evaluate("async () => { if (window.MathJax && MathJax.startup) await MathJax.startup.promise; }")
    yield page
    context.close()
    assert not errors, f"page errors: {errors}"


def _visible_one(page, selector: str):
    """The one visible element of ``selector`` (a button shown twice, or not at all, is a defect)."""
    found = page.locator(f"{selector} >> visible=true")
    assert found.count() == 1, f"{found.count()} visible {selector} at {page.viewport_size['width']} px"
    return found


@pytest.mark.parametrize("reader", [NARROW, WIDE], indirect=True, ids=["400", "1400"])
def test_menu_button_opens_the_chapter_list_or_collapses_the_sidebar(reader):
    """Below 992 px the menu button opens a drawer whose chapter list is visible and leads to a chapter;
    at desktop width it collapses the sidebar, and a second click brings it back."""
    from playwright.sync_api import expect

    page, width = reader, reader.viewport_size["width"]
    menu = _visible_one(page, ".primary-toggle")
    if width < 992:
        menu.click()
        drawer = page.locator("#pst-primary-sidebar-modal")
        expect(drawer).to_have_attribute("open", "")
        link = drawer.locator(f"a[href='{NEXT_CHAPTER}']")
        expect(link).to_be_visible()
        link.click()
        page.wait_for_url(f"**/{NEXT_CHAPTER}", timeout=LOAD_TIMEOUT_MS)
    else:
        sidebar = page.locator("#pst-primary-sidebar")
        expect(sidebar.locator(f"a[href='{NEXT_CHAPTER}']")).to_be_visible()
        menu.click()
        expect(sidebar).to_be_hidden()
        expect(page.locator("#pst-primary-sidebar-modal")).not_to_have_attribute("open", "")
        menu.click()
        expect(sidebar.locator(f"a[href='{NEXT_CHAPTER}']")).to_be_visible()


@pytest.mark.parametrize("reader", [NARROW, WIDE], indirect=True, ids=["400", "1400"])
def test_contents_button_opens_the_sections_of_the_page(reader):
    """The "Contents" button opens a drawer listing the page's sections, whose links lead to them (at
    desktop width, where the contents are shown beside the page, it toggles them the same way)."""
    from playwright.sync_api import expect

    page = reader
    contents = page.locator("#pst-secondary-sidebar")
    toggles = page.locator(".secondary-toggle >> visible=true")
    if toggles.count() == 0:  # the contents sit beside the page: nothing to open
        expect(contents.locator("nav a[href^='#']").first).to_be_visible()
        return
    _visible_one(page, ".secondary-toggle").click()
    drawer = page.locator("#pst-secondary-sidebar-modal")
    expect(drawer).to_have_attribute("open", "")
    link = drawer.locator("nav a[href^='#']").nth(1)
    expect(link).to_be_visible()
    target = link.get_attribute("href")
    link.click()
    page.wait_for_function("(hash) => location.hash === hash", arg=target)


@pytest.mark.parametrize("reader", [NARROW, WIDE], indirect=True, ids=["400", "1400"])
def test_a_figure_enlarges_to_its_full_size_on_a_click_and_closes(reader):
    """A click on a figure opens it at its own size (a phone shows it at under half that), in a dialog
    that scrolls; Escape closes it. The figure is also reachable from the keyboard (Enter)."""
    from playwright.sync_api import expect

    page = reader
    figure = page.locator("figure img.book-enlargeable").first
    figure.scroll_into_view_if_needed()
    # a lazy image may still be loading when it scrolls into view: wait for it (decode resolves once loaded)
    figure.evaluate("(i) => i.decode()")
    shown, natural = figure.evaluate("(i) => [i.getBoundingClientRect().width, i.naturalWidth]")
    figure.click()
    dialog = page.locator("dialog.book-zoom")
    expect(dialog).to_have_attribute("open", "")
    big = dialog.locator(".book-zoom-frame img")
    big.evaluate("(i) => i.decode()")
    width = big.evaluate("(i) => i.getBoundingClientRect().width")
    assert width == pytest.approx(natural, abs=1), (shown, natural, width)
    assert dialog.locator(".book-zoom-caption").inner_text().strip(), "the enlarged figure lost its caption"
    page.keyboard.press("Escape")
    expect(dialog).not_to_have_attribute("open", "")
    figure.focus()
    page.keyboard.press("Enter")
    expect(dialog).to_have_attribute("open", "")


@pytest.mark.parametrize("reader", [WIDE], indirect=True, ids=["1400"])
def test_animation_frames_are_fetched_when_played(reader):
    """A page fetches the first frame of each animation only; playing one fetches its other frames."""
    page = reader
    frames = lambda: page.evaluate(  # noqa: E731
        "() => performance.getEntriesByType('resource').filter((e) => e.name.includes('/_images/frames/'))"
        ".map((e) => e.name)"
    )
    players = page.locator(".animation")
    assert players.count() >= 1
    first = set(frames())
    assert len(first) == players.count(), f"{len(first)} frames fetched at load for {players.count()} animations"
    n = page.evaluate(
        "() => anim"
        + page.locator(".animation img").first.get_attribute("id").removeprefix("_anim_img")
        + ".frames.length"
    )
    players.first.scroll_into_view_if_needed()
    players.first.locator("button[title='Play']").click()
    page.wait_for_function(
        "(n) => new Set(performance.getEntriesByType('resource').filter((e) => e.name.includes('/_images/frames/'))"
        ".map((e) => e.name)).size >= n",
        arg=len(first) + n - 1,
        timeout=30_000,
    )


@pytest.mark.parametrize("reader", [WIDE], indirect=True, ids=["1400"])
def test_print_stylesheet_hides_controls_keeps_figures_whole_and_wraps_code(reader):
    """Printed (and in the PDF): no toggle, copy button or animation control; figures and tables are not
    cut between sheets; long code lines wrap."""
    page = reader
    page.emulate_media(media="print")
    style = page.evaluate(
        """() => {
        const css = (sel, prop) => { const e = document.querySelector(sel); return e ? getComputedStyle(e)[prop] : null; };
        return {controls: css('.anim-controls', 'display'), toggle: css('details.hide > summary', 'display'),
                copy: css('.copybtn', 'display'), header: css('.bd-header', 'display'),
                pre: css('div.highlight pre', 'whiteSpace'), figure: css('figure', 'breakInside'),
                image: css('figure img', 'maxHeight')};
    }"""
    )
    assert style["controls"] == "none" and style["header"] == "none", style
    assert style["toggle"] in ("none", None) and style["copy"] in ("none", None), style
    assert style["pre"] == "pre-wrap" and style["figure"] == "avoid", style
    assert style["image"] not in (None, "none"), style


def _pdf_text(path: Path) -> tuple[int, str]:
    """Pages and text of a PDF (pypdf, from the test extra; else poppler's pdftotext)."""
    try:
        from pypdf import PdfReader
    except ImportError:
        tool = shutil.which("pdftotext")
        if tool is None:
            pytest.fail("reading the PDF needs pypdf (pip install -e '.[test]') or pdftotext (poppler-utils)")
        import subprocess

        text = subprocess.run([tool, "-layout", str(path), "-"], capture_output=True, text=True, check=True).stdout
        return text.count("\f") + (not text.endswith("\f")), text
    reader = PdfReader(str(path))
    return len(reader.pages), "\n".join(page.extract_text() or "" for page in reader.pages)


def test_the_book_pdf_has_every_chapter(site):
    """``make pdf`` prints the whole book into one PDF: it exists, is newer than the built book, has more
    pages than the book has pages of HTML and contains every printed page's title; every page of the
    table of contents is printed (``make test`` leaves out the API reference, ``make pdf`` prints all)."""
    import unicodedata

    from bs4 import BeautifulSoup

    if not PDF.exists():
        pytest.fail(f"no {PDF.relative_to(ROOT)}: run `make pdf` (after `make book`)")
    assert PDF.stat().st_mtime >= (HTML / "index.html").stat().st_mtime, "the PDF is older than the built book"
    printed = json.loads(PDF.with_suffix(".json").read_text(encoding="utf-8"))["pages"]
    chapters = [rel for rel in PAGES if "/api/" not in f"/{rel}"]
    assert set(chapters) <= set(printed) <= set(PAGES), printed
    pages, text = _pdf_text(PDF)
    assert pages > len(printed), f"{pages} PDF pages for {len(printed)} pages of the book"
    flat = " ".join(unicodedata.normalize("NFKC", text).split())  # the ligature "ﬁ" reads as "fi"
    missing = []
    for rel in printed:
        h1 = BeautifulSoup((HTML / rel).read_text(encoding="utf-8"), "html.parser").find("h1")
        for link in h1.select("a.headerlink"):
            link.decompose()
        title = " ".join(h1.get_text(" ").split())
        if title not in flat:
            missing.append(title)
    assert not missing, f"page titles missing from the PDF: {missing}"


# --------------------------------------------------------------------------------------------
# the checks themselves: each one passes on a good synthetic page and fails on a bad one

_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><link rel="icon" href="data:,">
<style>body {{ margin: 0; }} article {{ width: 770px; padding: 0 20px; }} span.eqno {{ float: right; }}
.narrow {{ width: 300px; }}
div.math.over {{ position: relative; }} div.math.over span.eqno {{ position: absolute; right: 0; top: 45%; }}
div.math.flex {{ display: flex; flex-direction: row-reverse; overflow: hidden; }}
div.math.flex mjx-container {{ flex-grow: 1; overflow: auto; }} .anim-buttons svg {{ width: 12px; height: 12px; }}
table.cells {{ table-layout: fixed; width: 300px; }} table.cells td {{ width: 100px; }}
td.scroll mjx-container {{ display: inline-block; max-width: 100%; overflow-x: auto; overflow-y: hidden; }}</style>
<script>window.MathJax = {{loader: {{load: ["core", "input/tex", "output/chtml", "a11y/assistive-mml"]}}, tex: {{macros: {{R: "\\\\mathbb{{R}}"}}}}}};</script>
<script defer src="{mathjax}"></script>
</head><body><article><section id="s1">
{body}
</section></article></body></html>"""

_GOOD_BODY = r"""
<p>A token \(x_i \in \R^d\) moves; inline math is typeset and the identifier gaussian_F5 is not a label.</p>
<div class="math"><span class="eqno">(1)</span>\[\dot x_i = \frac{1}{n}\sum_j x_j\]</div>
<div class="math flex narrow"><span class="eqno">(5)</span>\[g_1 + g_2 + g_3 + g_4 + g_5 + g_6 + g_7 + g_8 + g_9 + g_{10} + g_{11} + g_{12} + g_{13} + g_{14} = h\]</div>
<table class="cells"><tr><td class="scroll">\(t_1 + t_2 + t_3 + t_4 + t_5 + t_6 + t_7 + t_8 + t_9 + t_{10}\)</td><td>next</td></tr></table>
<figure><img src="_images/good.png" alt="A legible figure." class="book-enlargeable"><figcaption>A legible figure.</figcaption></figure>
<div class="cell_input"><pre>settings("F5")  # C16: code is code</pre></div>
<div class="animation"><img src="{frame}" style="width: 100%"><div class="anim-buttons">
<button title="Play"><svg viewBox="0 0 10 10"><path d="M0 0L10 5L0 10z"/></svg></button></div></div>
"""

_BAD_BODY = r"""
<p>Raw math $\beta$ and \frac{1}{2} in prose; see spec SECTION3.2, claims C1–C3 and figure F5 (NOTES/notes).</p>
<p>An undefined macro \(\nosuchmacro x\) and an error \(\begin{nosuchenv} x \end{nosuchenv}\).</p>
<div class="math narrow"><span class="eqno">(2)</span>\[a_1 + a_2 + a_3 + a_4 + a_5 + a_6 + a_7 + a_8 + a_9 + a_{10} + a_{11} + a_{12} + a_{13} + a_{14} = b\]</div>
<div class="math narrow" style="overflow: hidden"><span class="eqno">(3)</span>\[c_1 + c_2 + c_3 + c_4 + c_5 + c_6 + c_7 + c_8 + c_9 + c_{10} + c_{11} + c_{12} + c_{13} + c_{14} = d\]</div>
<div class="math over"><span class="eqno">(4)</span>\[e_1 + e_2 + e_3 + e_4 + e_5 + e_6 + e_7 + e_8 + e_9 + e_{10} + e_{11} + e_{12} + e_{13} + e_{14} + e_{15} + e_{16} + e_{17} + e_{18} + e_{19} + e_{20} + e_{21} + e_{22} = f\]</div>
<table class="cells"><tr><td>\(u_1 + u_2 + u_3 + u_4 + u_5 + u_6 + u_7 + u_8 + u_9 + u_{10}\)</td><td>next</td></tr></table>
<figure><img src="_images/small.png" alt="_images/small.png" style="width: 50%"><figcaption>Tiny text.</figcaption></figure>
<div class="pst-scrollable-table-container" style="overflow-x: auto"><table><tr><td style="white-space: nowrap">WIDETABLE</td></tr></table></div>
<script src="heavy.js"></script>
<img src="_images/missing.png" alt="missing"><img src="http://example.invalid/remote.png" alt="remote">
<div class="animation"><img src="{frame}" style="width: 200px"><div class="anim-buttons">
<button title="Play"><i class="fa fa-play"></i></button></div></div>
<div class="cell_output"><div class="highlight"><pre>[('case $\lambda_1$', 'sec §7.1')]</pre></div></div>
<script>console.error("boom from the page"); window.setTimeout(() => noSuchFunction(), 0);</script>
"""


def _png(min_pt: float, dpi: int = 100, size=(7.0, 3.0)) -> bytes:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=dpi)
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1])
    ax.tick_params(labelsize=min_pt)
    buf = io.BytesIO()
    meta = {"tokendynamics:text": json.dumps({"dpi": dpi, "min_pt": min_pt, "min_text": "tick", "n_texts": 12})}
    fig.savefig(buf, format="png", dpi=dpi, metadata=meta)
    return buf.getvalue()


@pytest.fixture(scope="module")
def synthetic_site(tmp_path_factory):
    mathjax = HTML / "_static" / "mathjax"
    if not (mathjax / "startup.js").exists():
        pytest.fail("the book's MathJax copy is missing (_build/html/_static/mathjax): run `make book`")
    root = tmp_path_factory.mktemp("site")
    (root / "_static").mkdir()
    (root / "_static" / "mathjax").symlink_to(mathjax, target_is_directory=True)
    (root / "_images").mkdir()
    (root / "_images" / "good.png").write_bytes(_png(10.0))
    (root / "_images" / "small.png").write_bytes(_png(5.0))
    frame = "data:image/png;base64," + base64.b64encode(_png(12.0, dpi=60)).decode()
    local = "_static/mathjax/startup.js"
    pages = {
        "good.html": _PAGE.format(mathjax=local, body=_GOOD_BODY.replace("{frame}", frame)),
        "bad.html": _PAGE.format(
            mathjax=local,
            body=_BAD_BODY.replace("{frame}", frame).replace("SECTION", "\u00a7").replace("NOTES", ".." + "/shared"),
        ),
        "cdn.html": _PAGE.format(
            mathjax="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js", body=r"<p>Math \(x^2\) from a CDN.</p>"
        ),
    }
    pages["bad.html"] = pages["bad.html"].replace("WIDETABLE", "a cell too wide for its column " * 12)
    (root / "heavy.js").write_text("// a script heavier than a page's whole budget\n" * 50_000, encoding="utf-8")
    for name, text in pages.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def synthetic(browser, synthetic_site):
    """Audits of the synthetic pages, photographed like the book's (whole where a check fails)."""
    shots = synthetic_site / "screenshots"
    with StaticServer(synthetic_site) as server:
        return {
            name: audit_page(browser, server, name, WIDE, shots / f"{name}.jpg", wait_ms=8000, whole=_fails_a_check)
            for name in ("good.html", "bad.html", "cdn.html")
        }


def _fails_a_check(a: Audit) -> bool:
    return any(check(a) for check, _ in PAGE_CHECKS.values())


def _all_checks(a: Audit, root: Path) -> dict[str, list[str]]:
    return {
        "mathjax": check_mathjax(a),
        "raw_tex": find_raw_tex(a),
        "labels": find_labels(a),
        "equations": check_equations(a),
        "images": check_images(a),
        "console": check_console(a),
        "network": check_network(a),
        "figure_text": check_figure_text(a, root),
        "animations": check_animations(a),
        "weight": check_weight(a),
        "figures": check_figures(a),
        "tables": check_tables(a),
        "icons": check_icons(a),
    }


def test_every_check_passes_on_a_good_page(synthetic, synthetic_site):
    good = synthetic["good.html"]
    assert good.data["mathjax"]["typeset"] and good.data["mathjax"]["containers"] == 4
    failures = {k: v for k, v in _all_checks(good, synthetic_site).items() if v}
    assert not failures, failures
    assert len(scrolled_equations(good)) == 1  # (5) scrolls sideways: allowed, reported
    rows = figure_text_sizes(good, synthetic_site)
    assert rows[0]["how"].startswith("metadata") and rows[0]["min_px"] == pytest.approx(10 * 100 / 72, rel=0.02)


def test_every_check_fails_on_a_bad_page(synthetic, synthetic_site):
    bad = synthetic["bad.html"]
    found = _all_checks(bad, synthetic_site)
    assert not [k for k, v in found.items() if not v], f"checks that missed a defect: {found}"
    text = "\n".join(sum(found.values(), []))
    for expected in (
        "'$\\\\beta$'",
        "'\\\\frac'",
        "spec + section sign",
        "section sign + digit",
        "'C1'",
        "'C3'",
        "'F5'",
        "notes folder",
        "undefined macro \\nosuchmacro",
        "mjx-merror",
        "(2)",
        "overflows",
        "(3)",
        "clipped",
        "(4)",
        "number overlaps",
        "table cell",
        "_images/missing.png",
        "example.invalid",
        "boom from the page",
        "noSuchFunction",
        "small.png",
        "200 px wide",
        "buttons without icons",
        "first load",
        "does not enlarge on a click",
        "'_images/small.png' is not words",
        "with no visible cue",
        "'fa fa-play' [s1 button] is not drawn",
    ):
        assert expected in text, f"{expected!r} not reported in:\n{text}"
    assert not any("gaussian_F5" in f or "C16" in f for f in found["labels"])
    assert any("§7" in f for f in found["labels"])  # a text output is read like prose
    assert not any("lambda_1" in f for f in found["raw_tex"])  # ...but TeX in a <pre> is not failed
    assert any("lambda_1" in f for f in raw_tex_in_text_outputs(bad))  # only reported


def test_mathjax_from_a_cdn_is_reported(synthetic):
    cdn = synthetic["cdn.html"]
    problems = check_mathjax(cdn) + check_network(cdn) + find_raw_tex(cdn)
    text = "\n".join(problems)
    assert "not loaded from the book's copy" in text and "cdn.jsdelivr.net" in text
    assert "did not finish typesetting" in text and "'\\\\('" in text


def test_a_page_with_a_defect_is_photographed_whole_and_a_clean_one_at_its_first_screen(synthetic, synthetic_site):
    assert synthetic["good.html"].data["screenshot_kind"] == "first screen"
    assert synthetic["bad.html"].data["screenshot_kind"] == "whole page"
    assert all((synthetic_site / a.screenshot).stat().st_size > 1000 for a in synthetic.values())
