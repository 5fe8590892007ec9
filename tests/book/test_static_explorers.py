"""The explorers' kernel-free twins (tokendynamics.book.static_explorers) and the build step that writes
their states to files (``_ext/book_pages.py``).

A twin's states are the explorer's own updates over a grid of its controls read from
``experiments.toml``, checked against the controls, cached with the grid and the package's code
fingerprint, and shown as form controls snapped to the grid, one image and the status line. The
reader's side (moving the controls in Chromium) is tested on the built book by
tests/test_browser_static_explorers.py.
"""

from __future__ import annotations

import base64
import importlib.util
import io
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from bs4 import BeautifulSoup
from PIL import Image

from tokendynamics.book import cache, static_explorers
from tokendynamics.book.experiments import EXPERIMENTS
from tokendynamics.book.explorers import TransformerExplorer
from tokendynamics.book.plotting import palette_png
from tokendynamics.book.static_explorers import (
    explorer_class,
    precompute,
    static_explorer,
    static_explorer_html,
    static_grid,
    static_states,
)

ROOT = Path(__file__).resolve().parents[2]
TWINS = [
    "variants_explorer",
    "cone_explorer",
    "energy_explorer",
    "regimes_explorer",
    "highdim_explorer",
    "transformer_explorer",
]
#: a small grid of the cheapest explorer (a few hundredths of a second a state)
SMALL = {"norm": ("post", "none"), "L": (1.0, 3.0, 6.0, 12.0, 24.0)}


def _pixels(png: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(png)) as im:
        return np.asarray(im.convert("RGB"), dtype=int)


@pytest.fixture(scope="module")
def small():
    return precompute(TransformerExplorer("fast"), SMALL)


@pytest.mark.parametrize("mode", ["fast", "full"])
@pytest.mark.parametrize("name", TWINS)
def test_static_grid_of_every_twin_is_one_to_three_controls_of_its_explorer(name, mode):
    """Each live explorer has a twin table in both settings; its controls are the explorer's, sliders take at
    least five increasing values within their range, choices their options."""
    grid = static_grid(name, mode)
    controls = {c.name: c for c in explorer_class(name).controls}
    assert 1 <= len(grid) <= 3 and set(grid) <= set(controls)
    for key, values in grid.items():
        c = controls[key]
        if c.options is None:
            assert len(values) >= 5 and list(values) == sorted(values) and c.min <= values[0] and values[-1] <= c.max
        else:
            assert set(values) <= set(c.options)


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ({"nope": [1.0]}, "'nope' is not a control"),
        (
            {"L": [1.0, 2.0, 3.0, 4.0]},
            r"'L' needs at least 5 increasing values in \[1, 48\], got \[1.0, 2.0, 3.0, 4.0\]",
        ),
        ({"L": [1.0, 3.0, 2.0, 4.0, 5.0]}, "'L' needs at least 5 increasing"),
        ({"L": [1.0, 2.0, 3.0, 4.0, 99.0]}, r"'L' needs .* 99\.0"),
        ({"norm": ["post", "layer"]}, r"'norm' needs values among \('post', 'pre', 'sphere', 'none'\), got .*'layer'"),
        ({"norm": []}, "'norm' needs values among"),
        ({}, "one to three controls"),
        ({"norm": ["post"], "L": [1.0] * 5, "beta": [1.0] * 5, "strength": [0.0] * 5}, "one to three controls"),
    ],
)
def test_static_grid_refuses_a_bad_grid_naming_the_control(grid, message):
    with pytest.raises(ValueError, match=message):
        static_grid("transformer_explorer", grid=grid)


def test_explorer_class_is_the_class_behind_a_chapters_explorer_function_and_refuses_other_names():
    assert explorer_class("transformer_explorer") is TransformerExplorer
    for bad in ("transformer", "transformer_update", "Explorer"):
        with pytest.raises(ValueError, match="explorer must be one of"):
            explorer_class(bad)


def test_precompute_draws_every_state_with_the_explorers_own_update(small):
    """State k of the product of the axes is what a fresh live explorer shows after ``update(**state)``: the same
    status line and the same picture (as a 256-colour PNG recording its dpi and smallest text)."""
    assert small.shape == (2, 5) and len(small.frames) == len(small.status) == 10 and not any(small.errors)
    assert small.start == (0, 3)  # the explorer's own start: post-LN, L = 12
    fresh = TransformerExplorer("fast")
    for k, values in enumerate(itertools.product(*SMALL.values())):
        assert fresh.update(**dict(zip(SMALL, values))) == small.status[k]
        assert np.array_equal(_pixels(small.frames[k]), _pixels(palette_png(fresh.png)))
        # the palette keeps the picture: under 2 levels of 255 on average (the octree rounds white to 254)
        assert np.abs(_pixels(small.frames[k]) - _pixels(fresh.png)).mean() < 2.0
    with Image.open(io.BytesIO(small.frames[0])) as im:
        record = json.loads(im.info["tokendynamics:text"])
    assert record["dpi"] == fresh.fig.dpi and record["min_pt"] * record["dpi"] / 72 >= 9.0
    assert len(set(small.frames)) == len(small.frames) and len(set(small.status)) == len(small.status)


def test_static_states_are_cached_and_recomputed_when_the_grid_or_the_code_changes(tmp_path, monkeypatch):
    """The states are stored with the grid and the package's code fingerprint: a second call reads them back
    unchanged; a new grid, or any change of the package's code, recomputes them."""
    monkeypatch.setenv("TOKENDYNAMICS_DATA", str(tmp_path))
    calls = []
    monkeypatch.setattr(static_explorers, "precompute", lambda ex, grid: calls.append(grid) or precompute(ex, grid))
    table = {"fast": {"grid": {"norm": ["post"], "L": [1.0, 3.0, 6.0, 12.0, 24.0]}}}
    monkeypatch.setitem(EXPERIMENTS, "static_transformer_explorer", table)
    first = static_states("transformer_explorer", "fast")
    again = static_states("transformer_explorer", "fast")
    assert len(calls) == 1 and (tmp_path / "static_transformer_explorer_fast.npz").exists()
    assert again == first and first.shape == (1, 5)
    table["fast"]["grid"]["L"] = [1.0, 2.0, 3.0, 6.0, 12.0]
    assert static_states("transformer_explorer", "fast").axes[1][1] == (1.0, 2.0, 3.0, 6.0, 12.0) and len(calls) == 2
    monkeypatch.setattr(cache, "fingerprint", lambda code=(): "another-code")
    static_states("transformer_explorer", "fast")
    assert len(calls) == 3


def test_static_explorer_html_has_labelled_controls_snapped_to_the_grid_one_image_and_the_status(small):
    """A range input over the grid's indices with its value shown, a select of the choices, each labelled; one
    image of the starting state with its size; the status line; a caption naming the grid; every state as JSON."""
    soup = BeautifulSoup(static_explorer_html(small), "html.parser")
    (box,) = soup.select("div.static-explorer")
    (select,) = box.select("label select[data-axis='0']")
    assert [o.get_text() for o in select.find_all("option")] == ["post", "none"]
    assert select.find("option", selected=True)["value"] == "0"
    (slider,) = box.select("label input[type=range][data-axis='1']")
    assert (slider["min"], slider["max"], slider["step"], slider["value"]) == ("0", "4", "1", "3")
    assert slider["aria-valuetext"] == "12" and slider.find_next_sibling("output").get_text() == "12"
    labels = [label.find("span").get_text() for label in box.select("label.static-explorer-control")]
    assert labels == ["norm", "blocks L"]
    (img,) = box.find_all("img")
    start = 3  # (0, 3) in a 2 x 5 grid
    assert base64.b64decode(img["src"].split(",", 1)[1]) == small.frames[start]
    assert (img["width"], img["height"]) == tuple(str(n) for n in Image.open(io.BytesIO(small.frames[start])).size)
    assert box.select_one(".static-explorer-status").get_text() == small.status[start]
    caption = box.select_one(".static-explorer-caption").get_text()
    assert caption.startswith("2 × 5 states (norm × blocks L) precomputed") and "make lab" in caption
    assert "Binder" not in caption and box.select_one(".static-explorer-launch") is not None
    data = json.loads(box.select_one("script.static-explorer-states").string)
    assert data["shape"] == [2, 5] and data["labels"] == [["post", "none"], ["1", "3", "6", "12", "24"]]
    assert data["status"] == list(small.status) and data["errors"] == []
    assert [base64.b64decode(f.split(",", 1)[1]) for f in data["frames"]] == list(small.frames)


def test_static_explorer_is_the_twin_in_the_book_build_and_none_in_a_live_session(small, monkeypatch):
    monkeypatch.setattr(static_explorers, "static_states", lambda name, mode="fast", **init: small)
    monkeypatch.setenv("TOKENDYNAMICS_HEADLESS", "1")
    assert 'class="static-explorer"' in static_explorer("transformer_explorer", "fast")._repr_html_()
    monkeypatch.delenv("TOKENDYNAMICS_HEADLESS")
    assert static_explorer("transformer_explorer", "fast") is None


def _book_pages():
    spec = importlib.util.spec_from_file_location("book_pages", ROOT / "_ext" / "book_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_build_writes_the_states_to_files_and_adds_launch_links_only_where_the_page_has_them(small, tmp_path):
    """``_ext/book_pages.py``: every state's data URI becomes a file under ``_images/states`` named by its hash
    (one per distinct picture, addressed from the page); the caption names Binder and Colab with the page's own
    launch links, and nothing without them."""
    pages = _book_pages()
    page = tmp_path / "chapters" / "08_transformer.html"
    twin = static_explorer_html(small)
    html, count = pages.states_to_files(twin, page, tmp_path)
    assert count == len(small.frames) + 1 and "data:image" not in html  # every state and the <img>
    files = sorted((tmp_path / "_images" / "states").iterdir())
    assert sorted(f.read_bytes() for f in files) == sorted(small.frames)
    data = json.loads(BeautifulSoup(html, "html.parser").select_one("script.static-explorer-states").string)
    assert [(page.parent / f).resolve().read_bytes() for f in data["frames"]] == list(small.frames)
    assert "Binder" not in html and "Colab" not in html
    binder = "https://mybinder.org/v2/gh/org/book/notebooks?urlpath=lab/tree/chapters/08_transformer.ipynb"
    colab = "https://colab.research.google.com/github/org/book/blob/notebooks/chapters/08_transformer.ipynb"
    launched, _ = pages.states_to_files(f'<a href="{binder}">b</a><a href="{colab}">c</a>{twin}', page, tmp_path)
    caption = BeautifulSoup(launched, "html.parser").select_one(".static-explorer-caption")
    assert {a.get_text(): a["href"] for a in caption.find_all("a")} == {"Binder": binder, "Colab": colab}
