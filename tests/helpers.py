"""Reference formulas and constants shared by several test modules.

Written here independently of the library, so that a wrong library formula makes a test fail; the one
library call here is :func:`linear_reference`, the core's particle run that reductions are checked against.
Fixtures (seeded generators, random layers, unit tokens) are in ``tests/conftest.py``.
"""

from __future__ import annotations

import functools
import http.server
import math
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import yaml

from tokendynamics import Attention, Trajectory, simulate

I2 = np.eye(2)

# a Gaussian N(M0, S0) used by the Gaussian and gradient-flow tests
M0 = np.array([0.3, -0.2])
S0 = np.array([[0.5, 0.1], [0.1, 0.3]])
# mild parameters: A + A^T negative definite, so finite samples have no self-attending outliers
A_MILD = np.array([[-0.5, 0.4], [-0.2, -0.3]])
V_MILD = np.array([[1.0, 0.3], [-0.5, 0.8]])
Q_MILD = np.array([[0.6, -0.3], [0.2, 0.5]])
K_MILD = np.array([[-0.7, 0.1], [0.3, -0.4]])


def sigmoid(u):
    return 1.0 / (1.0 + math.exp(-u))


def random_layer(rng, scale=1.0):
    """Random planar (A, V, beta): A, V standard normal times ``scale``, beta uniform in [0.3, 2.5]."""
    return scale * rng.standard_normal((2, 2)), scale * rng.standard_normal((2, 2)), float(rng.uniform(0.3, 2.5))


def w_table(A, V):
    """The w-table of the authors' code for planar linear attention (1-indexed entries a_ij, v_ij)."""
    (a11, a12), (a21, a22) = A
    (v11, v12), (v21, v22) = V
    return {
        0: v11 * a21 + v12 * a22 - v21 * a11 - v22 * a12,
        1: v11 * a11 + v12 * a12 - v21 * a21 - v22 * a22,
        2: -v11 * a21 - v12 * a22 - v21 * a11 - v22 * a12,
        3: v11 * a21 - v12 * a22 - v21 * a11 + v22 * a12,
        4: v11 * a22 + v12 * a21 - v21 * a12 - v22 * a11,
        5: v11 * a11 - v12 * a12 - v21 * a21 + v22 * a22,
        6: v11 * a12 + v12 * a11 - v21 * a22 - v22 * a21,
        7: v11 * a21 - v12 * a22 + v21 * a11 - v22 * a12,
        8: v11 * a22 + v12 * a21 + v21 * a12 + v22 * a11,
    }


def bc_from_w(A, V):
    """The Daido coefficients b1, b2, b3, c1, c2 from the w-table."""
    w = w_table(A, V)
    return {
        "b1": (1j * w[5] + w[6] + w[7] - 1j * w[8]) / 16,
        "b2": (1j * w[5] - w[6] + w[7] + 1j * w[8]) / 16,
        "b3": (1j * w[1] - w[2]) / 8,
        "c1": (-w[3] + 1j * w[4]) / 8,
        "c2": -w[0] / 4,
    }


def linear_reference(X0, A, V, T, t_eval, *, beta=1.0, rtol=1e-11, atol=1e-13) -> Trajectory:
    """The core's tightly integrated particle run of linear attention on the sphere (adaptive steps) from
    ``X0`` to ``T``, stored at ``t_eval``: the reference of the angle equations, Watanabe-Strogatz and the
    explorers' loose runs."""
    layer = Attention("linear", A=A, V=V, beta=beta)
    return simulate(X0, layer, T, method="adaptive", sphere=True, t_eval=t_eval, rtol=rtol, atol=atol)


# ---- the built book and the browser (tests/test_book.py, tests/test_browser.py, tests/test_lab.py)

ROOT = Path(__file__).resolve().parents[1]

# headless Chromium as the browser tests launch it (no GPU, no background traffic)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def find_chromium() -> str | None:
    """The system Chromium (Debian's ``chromium``), or ``$CHROME_BIN``, or None."""
    return (
        shutil.which("chromium")
        or os.environ.get("CHROME_BIN")
        or shutil.which("chromium-browser")
        or shutil.which("google-chrome")
    )


def toc_files() -> list[str]:
    """The book's pages in table-of-contents order, as ``_toc.yml`` names them (no suffix)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(entries):
        for e in entries or []:
            if "file" in e:
                files.append(e["file"])
            walk(e.get("sections"))
            walk(e.get("chapters"))

    walk(toc.get("chapters"))
    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    return files


class StaticServer:
    """``http.server`` on 127.0.0.1 and a free port, in a thread stopped through its own handle."""

    def __init__(self, root: Path):
        handler = functools.partial(_QuietHandler, directory=str(root))
        self.root = Path(root)
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


#: Page weights (``benchmarks/bench_pages.py`` prints them, ``tests/test_browser.py`` bounds them).
#: First load: the bytes a first visit downloads before the page is read, the document and
#: everything requested until its load event and MathJax's typesetting (scripts, styles, fonts,
#: the images the first screen shows). Lazy images further down and frames of an animation nobody
#: played are not part of it. Counted from the files the requests name (a cached file still counts:
#: a first visit has no cache).
MAX_HTML_BYTES = 1_000_000
MAX_FIRST_LOAD_BYTES = 2_000_000

#: Run in the page (Playwright ``page.evaluate``) once it has loaded: waits for MathJax, then returns
#: ``{"document": its address, "resources": [address of every resource requested so far]}``.
#: Needs the resource timing buffer raised before the page's scripts run (:data:`RESOURCE_BUFFER_JS`,
#: an init script), or entries past the 250th are dropped.
PAGE_WEIGHT_JS = r"""
async (waitMs) => {
  const timeout = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await Promise.race([MathJax.startup.promise.catch(() => null), timeout(waitMs)]);
  }
  if (document.fonts) { await Promise.race([document.fonts.ready, timeout(waitMs)]); }
  await timeout(200);  // requests started by the last scripts
  return {document: location.href, resources: performance.getEntriesByType('resource').map((e) => e.name)};
}
"""
RESOURCE_BUFFER_JS = "performance.setResourceTimingBufferSize(100000);"


def page_weight(found: dict, root: Path, base_url: str) -> dict:
    """HTML and first-load bytes of a page from what :data:`PAGE_WEIGHT_JS` found, read from the files
    under ``root`` that ``base_url`` serves (other addresses weigh nothing: the book is read offline).

    Returns ``{"html": bytes, "first_load": bytes, "files": [(bytes, path), ...] heaviest first}``.
    """
    from urllib.parse import unquote, urlsplit

    def file_of(url: str) -> Path | None:
        if not url.startswith(base_url):
            return None
        path = root / unquote(urlsplit(url).path).lstrip("/")
        return path if path.is_file() else None

    document = file_of(found["document"])
    files = {f for f in map(file_of, [found["document"], *found["resources"]]) if f is not None}
    sizes = sorted(((f.stat().st_size, f.relative_to(root).as_posix()) for f in files), reverse=True)
    return {
        "html": document.stat().st_size if document else 0,
        "first_load": sum(s for s, _ in sizes),
        "files": sizes,
    }


def loop_normalised(X, w, kernel, value):
    """x_i -> sum_j w_j k(x_i, x_j) value(x_j) / sum_j w_j k(x_i, x_j), with loops."""
    n, d = X.shape
    out = np.zeros((n, d))
    for i in range(n):
        num, den = np.zeros(d), 0.0
        for j in range(n):
            k = w[j] * kernel(i, j)
            num += k * value(X[j])
            den += k
        out[i] = num / den
    return out


def loop_sum(X, w, kernel, value):
    n, d = X.shape
    out = np.zeros((n, d))
    for i in range(n):
        for j in range(n):
            out[i] += w[j] * kernel(i, j) * value(X[j])
    return out


def paper1_tokens():
    """Tokens (11, 2) and generic matrices A, V for the tests of paper 1's variants, and their generator."""
    rng = np.random.default_rng(2024)
    X = rng.uniform(-1, 1, (11, 2))
    A = np.array([[-1.0, 0.5], [-0.5, -0.5]]) + 0.3 * rng.standard_normal((2, 2))
    V = np.eye(2) + 0.4 * rng.standard_normal((2, 2))
    return X, A, V, rng


# ---- the static explorers (tests/test_browser_static_explorers.py, benchmarks/bench_static_explorers.py)

#: Installed on a ``.static-explorer`` box (``locator.evaluate``): the time of each key press and of
#: each load of its image, in ``box.bookMoves`` (what the reader waits for: key down to picture shown).
STATIC_EXPLORER_PROBE_JS = r"""
(box) => {
  const img = box.querySelector('img.static-explorer-image');
  box.bookMoves = [];
  box.addEventListener('keydown', () => { box.bookKey = performance.now(); }, true);
  const at = () => performance.now() - box.bookKey;
  img.addEventListener('load', () => box.bookMoves.push({ms: at(), src: img.getAttribute('src')}));
  img.addEventListener('error', () => box.bookMoves.push({ms: null, src: img.getAttribute('src'), error: true}));
  return JSON.parse(box.querySelector('script.static-explorer-states').textContent);
}
"""

#: What the reader sees in a box after a move, once its image has loaded ``n`` times (``wait``) or after two
#: animation frames (a move to the same picture loads nothing); the last load's time and address.
STATIC_EXPLORER_VIEW_JS = r"""
async (box, {n, wait, timeout}) => {
  const frame = () => new Promise((ok) => requestAnimationFrame(ok));
  const start = performance.now();
  while (wait && box.bookMoves.length < n && performance.now() - start < timeout) await frame();
  if (!wait) { await frame(); await frame(); }
  const img = box.querySelector('img.static-explorer-image');
  const status = box.querySelector('.static-explorer-status');
  return {src: img.getAttribute('src'), complete: img.complete, natural_width: img.naturalWidth,
          status: status.textContent, error_class: status.classList.contains('static-explorer-error'),
          values: Array.from(box.querySelectorAll('[data-axis]')).map((f) => Number(f.value)),
          shown: Array.from(box.querySelectorAll('output')).map((o) => o.textContent),
          loads: box.bookMoves.length, last: box.bookMoves[box.bookMoves.length - 1] || null};
}
"""


def walk_static_explorer(page, box, timeout_ms: int = 15_000) -> tuple[dict, list[dict]]:
    """Move every control of the static explorer ``box`` (a Playwright locator) through all its values with the
    arrow keys: each from where it is to its last value, then to its first. Returns the twin's JSON and one
    record per key press: ``axis``, the expected state ``k``, whether its picture differs from the previous
    one (``new_picture``), the view after it (:data:`STATIC_EXPLORER_VIEW_JS`, once the new picture has
    loaded) and ``ms``, key down to that picture loaded (None where the picture stayed the same)."""
    box.scroll_into_view_if_needed()
    box.locator("img").evaluate("(img) => { img.loading = 'eager'; return img.decode(); }")
    data = box.evaluate(STATIC_EXPLORER_PROBE_JS)
    shape, loads = data["shape"], 0
    at = box.evaluate(STATIC_EXPLORER_VIEW_JS, {"n": 0, "wait": False, "timeout": 0})["values"]
    index = lambda pos: int(np.ravel_multi_index(pos, shape))  # noqa: E731
    moves = []
    for axis, field in enumerate(box.locator("[data-axis]").all()):
        up, down = ("ArrowRight", "ArrowLeft") if field.get_attribute("type") == "range" else ("ArrowDown", "ArrowUp")
        field.focus()
        for key in [up] * (shape[axis] - 1 - at[axis]) + [down] * (shape[axis] - 1):
            before = index(at)
            at = [*at[:axis], at[axis] + (1 if key == up else -1), *at[axis + 1 :]]
            k = index(at)
            new_picture = data["frames"][k] != data["frames"][before]
            loads += new_picture
            page.keyboard.press(key)
            view = box.evaluate(STATIC_EXPLORER_VIEW_JS, {"n": loads, "wait": new_picture, "timeout": timeout_ms})
            last = view.pop("last") or {}
            moves.append(
                {"axis": axis, "key": key, "k": k, "before": before, "new_picture": new_picture, "view": view,
                 "ms": last.get("ms") if new_picture else None, "loaded_src": last.get("src") if new_picture else None}
            )  # fmt: skip
    return data, moves


def _drawn_points(ax) -> np.ndarray:
    """Display coordinates (px) of what ``ax`` plots: line vertices (solid lines sampled every 3 px along
    their segments) and scatter points, kept inside the axes box (clipping hides the rest)."""
    from matplotlib.collections import PathCollection

    out = [np.empty((0, 2))]
    for line in ax.lines:
        xy = line.get_transform().transform(np.asarray(line.get_xydata(), float))
        xy = xy[np.isfinite(xy).all(axis=1)]
        if line.get_visible() and line.get_linestyle() not in ("None", "", " ") and len(xy) > 1:
            seg = np.diff(xy, axis=0)
            n = np.maximum(1, np.ceil(np.hypot(*seg.T) / 3)).astype(int)
            i = np.repeat(np.arange(len(seg)), n)
            frac = (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)) / n[i]
            xy = np.vstack([xy[i] + frac[:, None] * seg[i], xy[-1:]])
        out.append(xy if line.get_visible() else out[0])
    for c in ax.collections:
        if isinstance(c, PathCollection) and c.get_visible() and len(c.get_offsets()):
            out.append(c.get_offset_transform().transform(np.asarray(c.get_offsets(), float)))
    pts = np.vstack(out)
    box = ax.get_window_extent()
    return pts[(pts[:, 0] >= box.x0) & (pts[:, 0] <= box.x1) & (pts[:, 1] >= box.y0) & (pts[:, 1] <= box.y1)]


def legend_overlaps(fig, tol: float = 1.0) -> list[str]:
    """The legends of ``fig`` that lie on its data, one message each (empty: every legend is off the data).

    An axes legend is checked against its axes, a figure legend against every 2-D axes: a plotted point
    (line vertex, a sample of a solid line, scatter point; in display pixels) strictly inside the
    legend's box shrunk by ``tol`` pixels is a hit, and so is the axes' title or axis label overlapping it.
    """
    if not fig.legends and not any(ax.get_legend() for ax in fig.axes):
        return []  # nothing to check, and no draw
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    flat = [ax for ax in fig.axes if ax.name != "3d"]
    legends = [(ax.get_legend(), [ax]) for ax in flat if ax.get_legend()] + [(leg, flat) for leg in fig.legends]
    found = []
    for leg, axes in legends:
        b = leg.get_window_extent(renderer)
        for ax in axes:
            p = _drawn_points(ax)
            hit = (p[:, 0] > b.x0 + tol) & (p[:, 0] < b.x1 - tol) & (p[:, 1] > b.y0 + tol) & (p[:, 1] < b.y1 - tol)
            texts = [t for t in (ax.title, ax.xaxis.label, ax.yaxis.label) if t.get_visible() and t.get_text()]
            hit = int(hit.sum()) + sum(b.overlaps(t.get_window_extent(renderer)) for t in texts)
            if hit:
                names = ", ".join(t.get_text() for t in leg.get_texts())
                found.append(f"legend [{names}] covers {hit} points or labels of axes {ax.get_title()!r}")
    return found
