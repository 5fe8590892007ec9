"""The chapters' live explorers in a real front end: JupyterLab in headless Chromium.

One JupyterLab server (the configuration of ``make lab``: ``scripts/lab.py``) runs for the module,
on 127.0.0.1, a free port and a random token; one Chromium page drives it with Playwright.

For each chapter with an explorer the test opens the MyST file as a notebook (the first one by a
double click in the file browser, which checks that jupytext's notebook view is the default
viewer; the others with JupyterLab's open command), runs the cells the explorer needs with
JupyterLab's "run cell" command (``scripts/explorer_cells.py``: the explorer is one call, so usually
the parameters cell and the explorer cell; whole chapters take minutes each on two cores), moves
controls as a reader does (a slider dragged with the mouse, a slider moved with the keyboard, a
dropdown changed) and checks that

* the explorer's figure changes after every move (the PNG in the page, compared byte for byte);
* the explorer cell shows one figure and each control once;
* no cell shows an error, a traceback or stderr output (cell outputs and the widgets' contents);
* the kernel is alive and idle at the end.

To stay within about three minutes, all explorer chapters are opened and their cells started
first (their kernels compute side by side), then each chapter is checked in turn; a checked
notebook is closed without saving and its kernel shut down. A last test opens a notebook whose
cell and whose explorer callback fail and checks that both errors are shown and the page goes on
working. The server is stopped by its own pid at the end (after its kernels, which are shut down
through the server and, if any survived, by their pids).

Runs only with ``-m browser`` (``make test`` and ``make test-browser`` do, with
``TOKENDYNAMICS_REQUIRE_BROWSER=1`` so that a missing browser fails instead of skipping).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import CHROMIUM_ARGS, find_chromium

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import explorer_cells as ec  # noqa: E402
import lab as lab_script  # noqa: E402

pytestmark = pytest.mark.browser

REQUIRE = os.environ.get("TOKENDYNAMICS_REQUIRE_BROWSER", "") in ("1", "true", "yes")
SERVER_START_TIMEOUT = 120  # s (about 10 s on a loaded 2-core machine)
RUN_TIMEOUT = 180_000  # ms for the explorer cells of one chapter, all chapters computing side by side
UPDATE_TIMEOUT = 60_000  # ms for one explorer update to reach the page
SCRATCH = ROOT / "_build" / "lab-test"  # under JupyterLab's root, ignored by git: the failing test notebook
SCREENSHOTS = ROOT / "_build" / "screenshots"  # lab-*.png: each explorer after its moves, the failing notebook

# How to move each explorer's controls, in order: ("drag" | "key", slider label) moves a slider with
# the mouse or the keyboard; ("dropdown", label, option) picks an option. Every move must change the
# figure (chapter 06: `top` is a knob of case2 only, hence case2 first).
MOVES = {
    "01_well_posedness": [("dropdown", "variant", "linear"), ("drag", "beta"), ("key", "A12")],
    "02_gaussian_preservation": [("dropdown", "variant", "l2"), ("drag", "A22"), ("key", "u of Σ0")],
    "03_gradient_flow": [("drag", "a2"), ("key", "theta")],
    "04_kuramoto_reduction": [("drag", "v11"), ("key", "beta")],
    "06_high_dimensional": [("dropdown", "case", "case2"), ("drag", "top"), ("key", "beta")],
    "08_transformer": [("dropdown", "norm", "pre"), ("drag", "blocks L"), ("key", "β")],
}
CHAPTERS = [p.stem for p in ec.explorer_chapters()]


def _missing(message: str):
    if REQUIRE:
        pytest.fail(message + " (TOKENDYNAMICS_REQUIRE_BROWSER=1: this run must not skip)")
    pytest.skip(message)


@pytest.fixture(scope="module")
def requirements():
    for module in ("jupyterlab", "jupytext", "jupyterlab_myst", "ipywidgets"):
        if importlib.util.find_spec(module) is None:
            _missing(f"{module} is not installed: pip install -e .[lab]")
    if importlib.util.find_spec("playwright") is None:
        _missing("playwright is not installed: pip install -e .[test]")
    if find_chromium() is None:
        _missing("chromium not found: apt-get install -y chromium")


# --------------------------------------------------------------------------------------------------
# The server


def _descendants(pid: int) -> set[int]:
    """All descendants of ``pid`` (from /proc; empty where there is no /proc)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    out, todo = set(), [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


class Lab:
    """A JupyterLab server of our own: started here, stopped by its pid."""

    def __init__(self, tmp: Path):
        self.port = lab_script.choose_port(20000 + secrets.randbelow(20000))
        self.token = secrets.token_hex(16)
        self.base = f"http://{lab_script.HOST}:{self.port}"
        config = tmp / "config" / "labconfig"
        config.mkdir(parents=True)
        # No news, no update check: nothing leaves the machine. No autosave: the test runs and moves
        # the chapters but must never write them back (jupytext would rewrite chapters/*.md).
        (config / "default_setting_overrides.json").write_text(
            json.dumps(
                {
                    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
                    "@jupyterlab/docmanager-extension:plugin": {"autosave": False},
                }
            )
        )
        env = lab_script.lab_env()
        env["JUPYTER_CONFIG_PATH"] += os.pathsep + str(tmp / "config")
        env["JUPYTER_RUNTIME_DIR"] = str(tmp / "runtime")
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env.setdefault(var, "1")  # kernels side by side on two cores (see tests/conftest.py)
        extra = [
            "--LabApp.expose_app_in_browser=True",
            f"--LabApp.user_settings_dir={tmp / 'settings'}",
            f"--LabApp.workspaces_dir={tmp / 'workspaces'}",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
        self.log_path = tmp / "jupyterlab.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            lab_script.lab_command(self.port, token=self.token, open_browser=False, extra=extra),
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.kernel_pids: set[int] = set()

    def log_tail(self, n: int = 40) -> str:
        self.log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def api(self, path: str, method: str = "GET"):
        request = urllib.request.Request(
            f"{self.base}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
        return json.loads(body) if body else None

    def wait_ready(self) -> None:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"JupyterLab exited with code {self.proc.returncode}:\n{self.log_tail()}")
            try:
                self.api("/api/status")
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.5)
        pytest.fail(f"JupyterLab did not answer within {SERVER_START_TIMEOUT} s:\n{self.log_tail()}")

    def kernels(self) -> list[dict]:
        return self.api("/api/kernels")

    def shutdown_kernel(self, kernel_id: str) -> None:
        self.kernel_pids |= _descendants(self.proc.pid)
        try:
            self.api(f"/api/kernels/{kernel_id}", method="DELETE")
        except urllib.error.HTTPError as err:
            if err.code != 404:
                raise

    def stop(self) -> None:
        try:
            if self.proc.poll() is None:
                for kernel in self.kernels():
                    self.shutdown_kernel(kernel["id"])
        except (urllib.error.URLError, OSError):
            pass
        finally:
            if self.proc.poll() is None:
                self.kernel_pids |= _descendants(self.proc.pid)
                self.proc.send_signal(signal.SIGTERM)  # JupyterLab shuts its kernels down on SIGTERM
                try:
                    self.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
            for pid in self.kernel_pids:  # a kernel that outlived its server: stopped by its own pid
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            self.log.close()


@pytest.fixture(scope="module")
def lab(requirements, tmp_path_factory):
    clock = time.monotonic()
    server = Lab(tmp_path_factory.mktemp("jupyterlab"))
    try:
        server.wait_ready()
        print(f"\nJupyterLab answered after {time.monotonic() - clock:.1f} s (port {server.port})")
        yield server
    finally:
        server.stop()


# Helpers in the page: find a notebook panel by its path; start cells with JupyterLab's commands.
PAGE_HELPERS = """() => {
  const app = window.jupyterapp;
  window.__td = {
    runs: {},
    panel(path) {
      for (const w of app.shell.widgets('main')) { if (w.context && w.context.path === path) return w; }
      return null;
    },
    kernelStatus(path) {
      const w = this.panel(path);
      const k = w && w.sessionContext.session && w.sessionContext.session.kernel;
      return k ? k.status : null;
    },
    // Run the cells with 'notebook:run-cell' (the toolbar's run button): the notebook must be the
    // current one, which it is right after it was opened or activated.
    start(path, cells) {
      const nb = this.panel(path).content;
      const results = [];
      for (const i of cells) {
        nb.activeCellIndex = i;
        nb.deselectAll();
        results.push(app.commands.execute('notebook:run-cell'));
      }
      const run = {done: false, error: null, results: null};
      this.runs[path] = run;
      Promise.all(results).then(r => { run.results = r; run.done = true; },
                                e => { run.error = String(e); run.done = true; });
    },
  };
}"""


@pytest.fixture(scope="module")
def page(lab):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        clock = time.monotonic()
        browser = p.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
        try:
            pg = browser.new_page(viewport={"width": 1400, "height": 1000})
            pg.set_default_timeout(90_000)
            pg.page_errors = []
            pg.on("pageerror", lambda err: pg.page_errors.append(str(err)))
            pg.goto(f"{lab.base}/lab/tree/chapters?token={lab.token}")
            pg.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell")
            pg.evaluate("async () => { await window.jupyterapp.restored; }")
            pg.evaluate(PAGE_HELPERS)
            print(f"JupyterLab's page loaded after {time.monotonic() - clock:.1f} s")
            yield pg
        finally:
            browser.close()


def _panel(path: str) -> str:
    return f"window.__td.panel({json.dumps(path)})"


def _open(page, path: str, *, double_click: bool) -> None:
    if double_click:  # what a reader does: a double click in the file browser
        folder, name = path.rsplit("/", 1)
        page.evaluate(
            "async (p) => { await window.jupyterapp.commands.execute('filebrowser:go-to-path', {path: p}); }", folder
        )
        page.locator(".jp-DirListing-item").filter(has_text=re.compile(f"^{re.escape(name)}")).first.dblclick()
    else:
        page.evaluate("async (p) => { await window.jupyterapp.commands.execute('docmanager:open', {path: p}); }", path)
    page.wait_for_function(f"""() => {{ const w = {_panel(path)};
        return w && w.context.isReady && w.content && w.content.widgets && w.content.widgets.length > 0; }}""")


def _activate(page, path: str) -> None:
    page.evaluate(f"() => window.jupyterapp.shell.activateById({_panel(path)}.id)")
    # visible and focused: JupyterLab's commands act on the notebook that has the focus
    page.wait_for_function(
        f"() => {{ const w = {_panel(path)}; return w.isVisible && w.node.contains(document.activeElement); }}"
    )


def _wait_kernel(page, path: str, states=("idle",), timeout: float = 90_000) -> str:
    handle = page.wait_for_function(
        """([p, s]) => { const k = window.__td.kernelStatus(p);
                                       return s.includes(k) ? k : false; }""",
        arg=[path, list(states)],
        timeout=timeout,
    )
    return handle.json_value()


def _settle(page, path: str, quiet_ms: int = 1000, timeout: float = 90_000) -> str:
    """Wait until the kernel has been idle for ``quiet_ms`` (queued widget updates all done), or is dead."""
    handle = page.wait_for_function(
        """([p, ms]) => {
        const k = window.__td.kernelStatus(p), now = performance.now(), since = window.__td.idleSince || {};
        window.__td.idleSince = since;
        if (k === 'dead') return 'dead';
        if (k !== 'idle') { since[p] = null; return false; }
        if (!since[p]) since[p] = now;
        return now - since[p] >= ms ? 'idle' : false; }""",
        arg=[path, quiet_ms],
        timeout=timeout,
        polling=100,
    )
    return handle.json_value()


def _close(page, lab, path: str) -> None:
    """Close the notebook without saving (the chapter file is never written) and stop its kernel."""
    kernel_id = page.evaluate(f"""() => {{ const w = {_panel(path)}; const k = w.sessionContext.session.kernel;
        w.context.model.dirty = false; w.dispose(); return k ? k.id : null; }}""")
    if kernel_id:
        lab.shutdown_kernel(kernel_id)


def _problems(page, path: str) -> list[str]:
    """Errors, tracebacks and stderr: in the cells' outputs (the notebook model) and in the page (the
    DOM, which also holds what the output widgets show)."""
    return page.evaluate(f"""() => {{ const w = {_panel(path)}; const found = [];
        w.content.widgets.forEach((cell, i) => {{
            if (cell.model.type !== 'code') return;
            const outputs = cell.model.outputs;
            for (let k = 0; k < outputs.length; k++) {{
                const o = outputs.get(k).toJSON();
                if (o.output_type === 'error') found.push(`cell ${{i}}: ${{o.ename}}: ${{o.evalue}}`);
                if (o.output_type === 'stream' && o.name === 'stderr')
                    found.push(`cell ${{i}} stderr: ${{String(o.text).slice(0, 300)}}`);
            }}
        }});
        const bad = w.node.querySelectorAll("[data-mime-type='application/vnd.jupyter.stderr'], " +
                                            "[data-mime-type='application/vnd.jupyter.error']");
        bad.forEach(e => found.push('page: ' + e.textContent.slice(0, 300)));
        return found; }}""")


def _image(page, path: str, cell: int) -> bytes | None:
    """The last PNG the cell shows (the explorer's figure), as bytes: a data URL (the inline backend) or
    the blob URL of an ``ipywidgets.Image`` (the explorers), read back in the page."""
    src = page.evaluate(
        f"""async (i) => {{ const imgs = {_panel(path)}.content.widgets[i].node
                                          .querySelectorAll('.jp-Cell-outputArea img');
        if (!imgs.length) return null;
        const src = imgs[imgs.length - 1].getAttribute('src');
        if (!src || !src.startsWith('blob:')) return src;
        try {{
            const blob = await (await fetch(src)).blob();
            return await new Promise((ok) => {{ const r = new FileReader(); r.onload = () => ok(r.result);
                                                 r.readAsDataURL(blob); }});
        }} catch (e) {{ return null; }} }}""",  # a blob URL revoked by the next update: read again
        cell,
    )
    if not src or not src.startswith("data:image/png;base64,"):
        return None
    return base64.b64decode(src.split(",", 1)[1])


def _wait_image(page, path: str, cell: int, *, differs_from: bytes | None, what: str) -> bytes:
    deadline = time.monotonic() + UPDATE_TIMEOUT / 1000
    while time.monotonic() < deadline:
        image = _image(page, path, cell)
        if image is not None and image != differs_from:
            return image
        page.wait_for_timeout(150)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / f"lab-failed-{Path(path).stem}.png"
    page.screenshot(path=shot)
    pytest.fail(
        f"{path}: no {'new ' if differs_from else ''}figure within {UPDATE_TIMEOUT / 1000:.0f} s after "
        f"{what} (screenshot {shot}); problems shown: {_problems(page, path)}"
    )


def _cell(page, path: str, index: int):
    """A locator for cell ``index`` of the notebook (its DOM node, marked with a data attribute)."""
    page.evaluate(f"(i) => {_panel(path)}.content.widgets[i].node.setAttribute('data-td-cell', i)", index)
    panel_id = page.evaluate(f"() => {_panel(path)}.id")
    return page.locator(f"[id='{panel_id}'] [data-td-cell='{index}']")


def _labelled(cell, css: str, label: str):
    exact = re.compile(rf"^\s*{re.escape(label)}\s*$")
    found = cell.locator(css).filter(has=cell.page.locator(".widget-label", has_text=exact))
    assert found.count() >= 1, f"no {css} labelled {label!r}"
    return found.first


def _move(page, cell, move: tuple) -> str:
    """Move one control like a reader; returns what was done."""
    kind, label = move[:2]
    if kind == "dropdown":
        select = _labelled(cell, ".widget-dropdown", label).locator("select")
        before = select.evaluate("s => s.options[s.selectedIndex].text")
        select.select_option(label=move[2])
        return f"dropdown {label!r}: {before} -> {move[2]}"
    slider = _labelled(cell, ".widget-slider", label)
    handle, readout = slider.locator(".noUi-handle"), slider.locator(".widget-readout")
    before = readout.inner_text()
    handle.scroll_into_view_if_needed()
    if kind == "drag":  # press the handle, drag it a quarter of the track, release
        track, box = slider.locator(".noUi-base").bounding_box(), handle.bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        target = track["x"] + track["width"] * (0.25 if x > track["x"] + track["width"] / 2 else 0.75)
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move((x + target) / 2, y, steps=4)
        page.mouse.move(target, y, steps=4)
        page.mouse.up()
    else:  # the keyboard: focus the handle, PageUp (five steps, one update)
        handle.focus()
        handle.press("PageUp")
    page.wait_for_function(
        "([el, old]) => el.textContent !== old", arg=[readout.element_handle(), before], timeout=10_000
    )
    return f"slider {label!r} ({kind}): {before} -> {readout.inner_text()}"


@pytest.fixture(scope="module")
def started(lab, page, request):
    """Open every explorer chapter (of the selected tests) and start the cells its explorer needs; their
    kernels compute side by side while the tests below check one chapter after the other."""
    clock = time.monotonic()
    selected = {
        item.callspec.params["chapter"]
        for item in request.session.items
        if hasattr(item, "callspec") and "chapter" in item.callspec.params
    }
    chapters = [c for c in CHAPTERS if c in selected]
    cells = {}
    for k, chapter in enumerate(chapters):  # open them all: their kernels start side by side
        path = f"chapters/{chapter}.md"
        cells[chapter] = ec.explorer_cells(ROOT / path)
        _open(page, path, double_click=(k == 0))
        info = page.evaluate(f"""() => {{ const w = {_panel(path)};
            return {{notebook: !!(w.content && w.content.model && w.content.model.cells),
                     cells: w.content.widgets.length}}; }}""")
        assert info["notebook"], f"{path} did not open as a notebook"
        assert info["cells"] == cells[chapter].n_cells, (
            f"{path}: JupyterLab shows {info['cells']} cells, jupytext reads {cells[chapter].n_cells}"
        )
        shown = page.evaluate(
            f"""(idx) => idx.map(i => {_panel(path)}.content.widgets[i].model.sharedModel.getSource())""",
            cells[chapter].needed,
        )
        for i, source in zip(cells[chapter].needed, shown):
            assert source.strip() == cells[chapter].sources[i].strip(), f"{path}: cell {i} is not the chapter's"
        print(f"{chapter}: opened at {time.monotonic() - clock:.1f} s")
    for chapter in chapters:  # start each one's cells (the notebook must be the current one)
        path = f"chapters/{chapter}.md"
        _activate(page, path)
        _wait_kernel(page, path)
        page.evaluate("([p, c]) => window.__td.start(p, c)", [path, cells[chapter].needed])
        print(f"{chapter}: cells started at {time.monotonic() - clock:.1f} s")
    return {"cells": cells, "seconds": time.monotonic() - clock}


# --------------------------------------------------------------------------------------------------
# The tests


def test_every_explorer_chapter_has_its_moves():
    assert CHAPTERS == sorted(MOVES), "tests/test_lab.py: MOVES must say how to move every explorer"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_explorer_runs_and_redraws_in_jupyterlab(lab, page, started, chapter):
    clock = time.monotonic()
    path, cells = f"chapters/{chapter}.md", started["cells"][chapter]
    _activate(page, path)
    page.wait_for_function("(p) => window.__td.runs[p].done", arg=path, timeout=RUN_TIMEOUT)
    run = page.evaluate("(p) => window.__td.runs[p]", path)
    assert run["error"] is None and all(run["results"]), f"{path}: a cell failed: {run} {_problems(page, path)}"
    waited = time.monotonic() - clock
    explorer = _cell(page, path, cells.explorer)
    explorer.scroll_into_view_if_needed()
    image = _wait_image(page, path, cells.explorer, differs_from=None, what="running the explorer cell")
    assert not _problems(page, path)
    page.wait_for_timeout(300)  # anything else the cell shows has arrived with the figure
    views = page.evaluate(
        f"""(i) => {{ const n = {_panel(path)}.content.widgets[i].node;
        const labels = Array.from(n.querySelectorAll('.jp-Cell-outputArea .widget-label')).map(e => e.textContent);
        return [n.querySelectorAll('.jp-Cell-outputArea img').length, labels.length, new Set(labels).size]; }}""",
        cells.explorer,
    )
    assert views[0] == 1 and views[1] == views[2], (
        f"{path}: the explorer cell shows {views[0]} figures and {views[1]} controls for {views[2]} labels "
        "(the explorer is displayed more than once)"
    )
    moves = []
    for move in MOVES[chapter]:
        moving = time.monotonic()
        moved = _move(page, explorer, move)
        image = _wait_image(page, path, cells.explorer, differs_from=image, what=moved)
        moves.append(f"{moved} (new figure after {time.monotonic() - moving:.1f} s)")
        assert _settle(page, path) == "idle", f"{path}: the kernel died after {moved}"
        problems = _problems(page, path)
        assert not problems, f"{path}: after {moved}: {problems}"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    explorer.screenshot(path=SCREENSHOTS / f"lab-explorer-{chapter}.png")
    kernel_id = page.evaluate(f"() => {_panel(path)}.sessionContext.session.kernel.id")
    state = lab.api(f"/api/kernels/{kernel_id}")["execution_state"]
    assert state in ("idle", "busy"), f"{path}: the server reports the kernel {state}"
    assert not page.page_errors, page.page_errors
    print(
        f"\n{chapter}: ran cells {cells.needed} (waited {waited:.1f} s for them), {moves}; "
        f"{time.monotonic() - clock:.1f} s"
    )
    _close(page, lab, path)


FAILING = """\
---
jupytext:
  text_representation: {extension: .md, format_name: myst}
kernelspec: {display_name: Python 3, language: python, name: python3}
---

# A chapter that fails

```{code-cell} ipython3
import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

from tokendynamics import Attention
```

```{code-cell} ipython3
Attention("no-such-kind", A=np.eye(2), V=np.eye(2))  # the library refuses: an error in a cell
```

```{code-cell} ipython3
def update(x=0.0):
    if x > 0.25:
        raise ValueError(f"explorer update failed at x = {x:.2f}")
    plt.plot([0, 1], [0, x])
    plt.show()


slider = widgets.FloatSlider(value=0.0, min=0.0, max=1.0, step=0.1, description="x", continuous_update=False)
display(slider, widgets.interactive_output(update, {"x": slider}))
```

```{code-cell} ipython3
print("the kernel still answers")
```
"""


def test_failing_chapter_shows_its_errors_and_the_page_keeps_working(lab, page):
    path = "_build/lab-test/failing_chapter.md"
    (ROOT / path).parent.mkdir(parents=True, exist_ok=True)
    (ROOT / path).write_text(FAILING)
    _open(page, path, double_click=False)
    _wait_kernel(page, path)
    clock = time.monotonic()
    page.evaluate("async () => { await window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    assert _settle(page, path, timeout=60_000) == "idle"
    outputs = page.evaluate(f"""() => {_panel(path)}.content.widgets.map(c => c.model.type === 'code'
                                ? c.model.outputs.toJSON() : null)""")
    errors = [o for cell in outputs if cell for o in cell if o["output_type"] == "error"]
    assert [e["ename"] for e in errors] == ["ValueError"] and "no-such-kind" in errors[0]["evalue"], outputs
    shown = page.locator(
        f"[id='{page.evaluate(f'() => {_panel(path)}.id')}'] [data-mime-type='application/vnd.jupyter.stderr']"
    )
    shown.first.wait_for()
    assert "no-such-kind" in shown.first.inner_text()  # the traceback is on the page
    assert time.monotonic() - clock < 30, "running a failing notebook took too long"
    # JupyterLab stops a run at the first error; the explorer and the last cell run on request
    code_cells = [i for i, cell in enumerate(outputs) if cell is not None]
    page.evaluate("([p, c]) => window.__td.start(p, c)", [path, code_cells[2:]])
    page.wait_for_function("(p) => window.__td.runs[p].done", arg=path, timeout=60_000)
    explorer = _cell(page, path, code_cells[2])
    _wait_image(page, path, code_cells[2], differs_from=None, what="the explorer cell")
    handle = _labelled(explorer, ".widget-slider", "x").locator(".noUi-handle")
    handle.focus()
    handle.press("PageUp")  # x = 0.5: the callback raises
    traceback = explorer.locator("[data-mime-type='application/vnd.jupyter.stderr']")
    traceback.first.wait_for(timeout=UPDATE_TIMEOUT)
    assert "explorer update failed" in traceback.first.inner_text()
    assert _settle(page, path) == "idle"
    last = page.evaluate(f"(i) => {_panel(path)}.content.widgets[i].model.outputs.toJSON()", code_cells[3])
    assert any("the kernel still answers" in "".join(o.get("text", "")) for o in last), last
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "lab-failing-chapter.png", full_page=True)
    _close(page, lab, path)


def test_make_lab_takes_the_next_free_port_and_says_which(tmp_path):
    """`make lab` (scripts/lab.py) with its port taken: another port, named, and JupyterLab listens there."""
    if importlib.util.find_spec("jupyterlab") is None:
        _missing("jupyterlab is not installed: pip install -e .[lab]")
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind((lab_script.HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = lab_script.lab_env()
        env["JUPYTER_RUNTIME_DIR"] = str(tmp_path / "runtime")
        # scripts/lab.py replaces itself with JupyterLab (exec): this pid is the server's
        proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "scripts" / "lab.py"),
                "--port",
                str(port),
                "--no-browser",
                f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            lines, said, url = [], None, None
            deadline = time.monotonic() + SERVER_START_TIMEOUT
            while time.monotonic() < deadline and url is None:
                line = proc.stdout.readline()
                if not line:
                    break
                lines.append(line)
                said = said or re.search(
                    rf"port {port} on {re.escape(lab_script.HOST)} is taken; "
                    rf"JupyterLab will listen on port (\d+) instead",
                    line,
                )
                url = re.search(r"(http://127\.0\.0\.1:(\d+)/lab\S*\?token=(\w+))", line)
            assert said, "no message naming the new port:\n" + "".join(lines)
            assert url, "JupyterLab did not start:\n" + "".join(lines)
            new_port = int(said.group(1))
            assert new_port != port and int(url.group(2)) == new_port
            status, deadline = None, time.monotonic() + 30
            while status is None and time.monotonic() < deadline:  # it listens just after printing its address
                try:
                    with urllib.request.urlopen(
                        f"http://127.0.0.1:{new_port}/api/status?token={url.group(3)}", timeout=30
                    ) as response:
                        status = response.status
                except urllib.error.URLError:
                    time.sleep(0.3)
            assert status == 200
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            proc.stdout.close()
