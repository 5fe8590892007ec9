"""Checks on the built page of the Kuramoto chapter (run after the book is built; marked ``book``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "_build" / "html" / "chapters" / "04_kuramoto_reduction.html"
FIGURES = ROOT / "_build" / "figures" / "04_kuramoto_reduction"

pytestmark = pytest.mark.book

LABELS = [
    "fig-kura-regimes",
    "fig-kura-ws",
    "fig-kura-oa",
    "fig-kura-oa-accuracy",
    "fig-kura-portraits",
    "fig-kura-case1",
    "fig-kura-case2",
    "fig-kura-rotating",
    "fig-kura-hamiltonian",
    "fig-kura-snic",
]


@pytest.fixture(scope="module")
def soup():
    if not PAGE.exists():
        pytest.fail("the book is not built: run `make book`")
    return BeautifulSoup(PAGE.read_text(), "html.parser")


def test_kuramoto_chapter_has_figures_f1_to_f10_numbered_and_saved(soup):
    for label in LABELS:
        fig = soup.find(id=label)
        assert fig is not None and fig.find("img") is not None, label
        assert "Fig." in fig.get_text(" ", strip=True), label
    assert len(list(FIGURES.glob("kuramoto-*.png"))) >= len(LABELS)


def test_kuramoto_chapter_shows_the_agreement_and_regime_tables_and_a_static_animation(soup):
    tables = [t.get_text(" ", strip=True) for t in soup.find_all("table")]
    assert any("OA classifier" in t and "Type 2" in t for t in tables)
    assert any("measured" in t and "WS reconstruction" in t for t in tables)
    html = PAGE.read_text()
    assert "animation" in html and "data:image/png;base64" in html
    assert "application/vnd.jupyter.widget-view" not in html  # the live widget is removed from the static page
    assert len(soup.select("span.pasted-text")) >= 20  # numbers in the text are computed
