"""Checks on the executed chapters and the built HTML (run after `scripts/build_book.py all`).

`make test` runs these after building the book; they are marked ``book`` and skipped by the
library-only run (`pytest -m "not book"`). Every page, then the pages with their own checks: the
introduction, the Kuramoto chapter, the claims appendix.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup

from tests.helpers import toc_files
from tokendynamics.book.claims import CLAIMS

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
HTML = BUILD / "html"
EXECUTED = BUILD / "executed"
FIGURES = BUILD / "figures"

pytestmark = pytest.mark.book


def _notebook_stems() -> list[str]:
    out = []
    for md in sorted((ROOT / "chapters").glob("*.md")):
        head = md.read_text()[:2000]
        if head.startswith("---") and "kernelspec:" in head:
            out.append(md.stem)
    return out


NOTEBOOKS = _notebook_stems()


@pytest.fixture(scope="module", autouse=True)
def built_book():
    if not (HTML / "index.html").exists():
        pytest.fail("the book is not built: run `make book` (or `make test`, which builds it)")


def test_every_toc_entry_exists_as_source_and_as_html_page():
    for entry in toc_files():
        assert (ROOT / f"{entry}.md").exists(), f"_toc.yml lists {entry} but there is no {entry}.md"
        assert (HTML / f"{entry}.html").exists(), f"no HTML page for {entry}"


def test_every_chapter_notebook_is_in_the_toc():
    listed = {Path(f).name for f in toc_files()}
    assert set(NOTEBOOKS) <= listed, f"chapters missing from _toc.yml: {set(NOTEBOOKS) - listed}"


@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_chapter_executed_without_errors_and_with_figures(stem):
    nb = nbformat.read(EXECUTED / f"{stem}.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, f"{stem} has no code"
    pngs = 0
    for cell in code:
        assert cell.get("execution_count") is not None, f"{stem}: a cell was not executed"
        for out in cell.get("outputs", []):
            assert out.get("output_type") != "error", f"{stem}: error output {out.get('ename')}"
            pngs += "image/png" in out.get("data", {})
    assert pngs >= 1, f"{stem} shows no figure"
    saved = list((FIGURES / stem).glob("*.png"))
    assert len(saved) >= pngs - _animation_frames(nb), (
        f"{stem} shows {pngs} figures but saved {len(saved)} PNGs under {FIGURES / stem}"
    )
    for png in saved:
        assert png.stat().st_size > 5_000, f"{png} is suspiciously small"


def _animation_frames(nb) -> int:
    return 0  # animations are HTML (to_jshtml), not image/png outputs


@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_chapter_has_one_parameters_cell_with_a_fast_full_switch_hidden_in_the_book(stem):
    src = (ROOT / "chapters" / f"{stem}.md").read_text()
    assert src.count(":tags: [parameters]") == 1, f"{stem} must have exactly one parameters cell"
    nb = nbformat.read(EXECUTED / f"{stem}.ipynb", as_version=4)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1 and 'mode = "fast"' in params[0].source
    assert "remove-cell" in params[0].metadata["tags"]
    html = (HTML / "chapters" / f"{stem}.html").read_text()
    assert 'mode = "fast"' not in html and "mode = &quot;fast&quot;" not in html


@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_chapter_html_shows_its_figures_and_no_tracebacks(stem):
    page = HTML / "chapters" / f"{stem}.html"
    soup = BeautifulSoup(page.read_text(), "html.parser")
    imgs = [
        img
        for img in soup.find_all("img")
        if "jupyter_execute" in img.get("src", "") or img.get("src", "").startswith("../_images/")
    ]
    assert imgs, f"{stem}: no figure in the HTML"
    for img in imgs:
        target = (page.parent / img["src"]).resolve()
        assert target.exists() and target.stat().st_size > 5_000, f"{stem}: broken image {img['src']}"
    text = soup.get_text()
    assert "Traceback (most recent call last)" not in text
    assert "Error" not in " ".join(s.get_text() for s in soup.select("div.output.stderr, div.output.traceback"))


def _frame_files(page: Path) -> list[Path]:
    """The frame files the page's animations name (``frames[k] = "../_images/frames/..."``); each exists."""
    import re

    names = re.findall(r'frames\[\d+\]\s*=\s*"([^"]+)"', page.read_text(encoding="utf-8"))
    frames = [(page.parent / name).resolve() for name in names]
    missing = [f.name for f in frames if not f.is_file() or f.stat().st_size < 1_000]
    assert not missing, f"{page.name}: animation frames missing: {missing[:3]}"
    return frames


def test_intro_figure_is_numbered_captioned_and_saved():
    soup = BeautifulSoup((HTML / "chapters" / "index.html").read_text(), "html.parser")
    fig = soup.find(id="fig-intro-clustering")
    assert fig is not None, "the intro figure lost its label"
    assert fig.find("img") is not None
    caption = fig.get_text(" ", strip=True)
    assert "Fig. 1" in caption and "Softmax attention on the circle" in caption
    assert (FIGURES / "index" / "intro-clustering.png").exists()
    # the animation plays without a kernel: its frames are files of the site
    assert _frame_files(HTML / "chapters" / "index.html")


def test_intro_numbers_are_computed_not_typed():
    soup = BeautifulSoup((HTML / "chapters" / "index.html").read_text(), "html.parser")
    pasted = [s.get_text() for s in soup.select("span.pasted-text")]
    assert pasted and all(p.strip() for p in pasted)
    text = " ".join(soup.get_text(" ").split())
    assert "exceeds" in text and "at the end of the run" in text  # the glued outcome sentence
    assert "clusters from" in text  # the glued metastability plateaus


def test_bibliography_lists_both_papers_and_citations_resolve():
    text = BeautifulSoup((HTML / "chapters" / "references.html").read_text(), "html.parser").get_text()
    text = " ".join(text.lower().split())
    assert "a unified perspective on the dynamics of deep transformers" in text
    assert "on the diverse dynamical behaviors arising in deep linear transformers" in text
    intro = (HTML / "chapters" / "index.html").read_text()
    assert "references.html#id" in intro or "references.html#" in intro


def test_mathjax_macros_for_the_shared_notation_are_configured():
    html = (HTML / "chapters" / "index.html").read_text()
    assert "macros" in html and "mathbb{R}" in html


def test_execution_times_are_recorded():
    times = json.loads((BUILD / "execution-times.json").read_text())
    for stem in NOTEBOOKS:
        assert stem in times
    print("chapter execution times (s):", times)


# ---------------------------------------------------------------------------------------------
# the Kuramoto chapter
# ---------------------------------------------------------------------------------------------

KURAMOTO_PAGE = HTML / "chapters" / "04_kuramoto_reduction.html"
REGIMES_PAGE = HTML / "chapters" / "05_kuramoto_regimes.html"
KURAMOTO_LABELS = {
    "04_kuramoto_reduction": [
        "fig-kura-regimes",
        "fig-kura-ws",
        "fig-kura-oa",
        "fig-kura-oa-accuracy",
        "fig-kura-stability",
    ],
    "05_kuramoto_regimes": [
        "fig-kura-portraits",
        "fig-kura-case1",
        "fig-kura-case2",
        "fig-kura-rotating",
        "fig-kura-hamiltonian",
        "fig-kura-snic",
        "fig-kura-transition",
        "fig-kura-transition-map",
        "fig-kura-transition-hd",
        "fig-kura-consensus",
    ],
}


def _page(path):
    if not path.exists():
        pytest.fail("the book is not built: run `make book`")
    return BeautifulSoup(path.read_text(), "html.parser")


@pytest.mark.parametrize("stem", list(KURAMOTO_LABELS))
def test_kuramoto_chapters_have_their_figures_numbered_and_saved(stem):
    soup = _page(HTML / "chapters" / f"{stem}.html")
    for label in KURAMOTO_LABELS[stem]:
        fig = soup.find(id=label)
        assert fig is not None and fig.find("img") is not None, label
        assert "Fig." in fig.get_text(" ", strip=True), label
    assert len(list((FIGURES / stem).glob("kuramoto-*.png"))) >= len(KURAMOTO_LABELS[stem])


def test_kuramoto_chapters_show_the_claims_and_regime_tables_and_a_static_animation():
    reduction, regimes = _page(KURAMOTO_PAGE), _page(REGIMES_PAGE)
    tables = [t.get_text(" ", strip=True) for t in regimes.find_all("table")]
    assert any("classifier" in t and "Type 2" in t for t in tables)
    tables = [t.get_text(" ", strip=True) for t in reduction.find_all("table")]
    assert any("measured" in t and "Watanabe–Strogatz" in t for t in tables)
    html = KURAMOTO_PAGE.read_text()
    assert "animation" in html and _frame_files(KURAMOTO_PAGE)
    assert "application/vnd.jupyter.widget-view" not in html  # the live widget is removed from the static page
    assert len(reduction.select("span.pasted-text")) >= 20  # numbers in the text are computed
    assert len(regimes.select("span.pasted-text")) >= 15


# ---------------------------------------------------------------------------------------------
# the claims appendix
# ---------------------------------------------------------------------------------------------

CLAIMS_PAGE = HTML / "chapters" / "claims.html"


def _claim_rows():
    """The rows of the claims tables, by the key of the target that starts each row."""
    soup = BeautifulSoup(CLAIMS_PAGE.read_text(), "html.parser")
    rows = {}
    for table in soup.select("table.claims-table"):
        for row in table.select("tbody > tr"):
            ids = [el["id"] for el in row.find_all(id=True) if el["id"].startswith("claim-")]
            assert len(ids) == 1, ids
            rows[ids[0].removeprefix("claim-")] = row
    return soup, rows


def test_claims_page_has_one_row_per_registered_claim_each_with_its_target():
    assert CLAIMS_PAGE.exists(), "no claims page in the build"
    soup, rows = _claim_rows()
    assert sorted(rows) == sorted(c.key for c in CLAIMS)
    for table in soup.select("table.claims-table"):
        header = [th.get_text(" ", strip=True) for th in table.select("thead th")]
        assert header == ["statement", "paper", "tag", "measured", "tolerance", "tests"]


def test_claims_page_measured_cells_are_never_empty_and_show_the_glued_values():
    _, rows = _claim_rows()
    for claim in CLAIMS:
        cells = rows[claim.key].find_all("td")
        assert len(cells) == 6, claim.key
        measured = cells[3].get_text(" ", strip=True)
        assert measured, f"{claim.key}: empty measured cell"
        if claim.measured is None:
            assert measured == "—", (claim.key, measured)
        else:
            assert cells[3].select("span.pasted-text"), f"{claim.key}: no glued value"
        assert all(t.removeprefix("tests/") in cells[5].get_text() for t in claim.tests), claim.key


def test_claims_page_shows_its_overview_figure_unnumbered_on_an_unnumbered_page():
    """The page is not numbered, so its figure carries no "Fig. N" (Sphinx numbers every captioned figure)."""
    soup = BeautifulSoup(CLAIMS_PAGE.read_text(), "html.parser")
    assert not soup.select(".caption-number"), "a figure of the unnumbered claims page carries a number"
    images = [img for img in soup.select("div.cell_output img") if img.get("src", "").endswith(".png")]
    assert len(images) == 1, "the claims page shows its overview figure"
    assert "The figure counts the registered claims chapter by chapter" in soup.get_text(" ", strip=True)


def _ext_module(name: str):
    """The book's Sphinx extension ``_ext/<name>.py``, imported by path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "_ext" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _book_numbers():
    return _ext_module("book_numbers")


def test_numbers_in_e_notation_are_written_for_prose():
    readable = _book_numbers().readable
    assert readable("1.2e-01") == "1.2 × 10⁻¹"
    assert readable("3e-08") == "3 × 10⁻⁸"
    assert readable("1e-10") == "10⁻¹⁰"
    assert readable("-2.5e+06") == "−2.5 × 10⁶"
    assert readable("4.0e+00") == "4.0"
    assert readable("0.0e+00") == readable("-0.0e+00") == "0"  # an exact zero, not "0.0"
    for text in ("0.42", "12", "n = 4000", "e-3", "1.2e"):
        assert readable(text) is None


@pytest.mark.parametrize("page", toc_files())
def test_no_pasted_number_shows_e_notation(page):
    """Values glued with an ``e`` format (``{glue:text}`key:.1e```) read as 1.2 × 10⁻¹ on the page."""
    path = HTML / f"{page}.html"
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make book` first")
    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    raw = [s.get_text() for s in soup.select("span.pasted-text") if _book_numbers().E_NOTATION.match(s.get_text())]
    assert not raw, f"{page}: pasted numbers in e-notation: {raw[:5]}"


# ---------------------------------------------------------------------------------------------
# what a reader reads: no glue markup, figures described, light pages
# ---------------------------------------------------------------------------------------------


def _soup(page: str) -> BeautifulSoup:
    path = HTML / f"{page}.html"
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make book` first")
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


@pytest.mark.parametrize("page", toc_files())
def test_no_glue_placeholder_is_left_in_math_or_text(page):
    """A ``{glue:text}`` written inside ``$...$`` is never filled in (MathJax prints the markup): none is
    left in the page's prose or math. The build fails on one too (``_ext/book_pages.py``); this reads
    the pages it wrote. Code (``pre``, ``code``) may show the syntax."""
    soup = _soup(page)
    for code in soup.select("pre, code, script, style"):
        code.decompose()
    pattern = _ext_module("book_pages").GLUE_PLACEHOLDER
    text = " ".join(soup.get_text(" ").split())
    left = [text[max(0, m.start() - 60) : m.end() + 60] for m in pattern.finditer(text)]
    assert not left, f"{page}: unrendered glue: {left[:3]}"


#: pages whose prose still prints a vacuous number, with what they need
VACUOUS_PENDING: dict[str, str] = {}


def test_vacuous_numbers_finds_rounded_zeros_and_an_empty_rest():
    find = _ext_module("book_pages").vacuous_numbers
    assert find("stays within 0.000 of it") and find("a fraction −0.00 of the clouds") and find("(change 0.0).")
    assert find("In 120 of the 120 cells the run settled (the rest lie next to it).")
    for fine in (
        "within 0.004 of it",
        "largest change 0",
        "10.0 and 0.05",
        "12 of the 12 frames agree",
        "In 100 of the 120 cells (the rest lie next to it)",
        "version 0.0.1",
    ):
        assert not find(fine), fine


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(p, marks=pytest.mark.xfail(reason=VACUOUS_PENDING[p], strict=True)) if p in VACUOUS_PENDING else p
        for p in toc_files()
    ],
)
def test_no_printed_number_makes_its_sentence_false_or_empty(page):
    """Prose that depends on a measured value stays true in both settings: no value that rounds to zero
    is printed as ``0.000`` (it gets enough digits, a bound, or reads 0 when it is exactly 0), and no
    "N of the N ..." is followed by "the rest". Tables, code, math and the API's signatures (default
    values such as ``beta = 1.0``) are not prose."""
    soup = _soup(page)
    for skip in soup.select("pre, code, script, style, table, span.math, div.math, dt.sig"):
        skip.decompose()
    text = " ".join(soup.get_text(" ").split())
    found = _ext_module("book_pages").vacuous_numbers(text)
    assert not found, f"{page}: printed numbers that make the sentence false or empty: {found[:4]}"


@pytest.mark.parametrize("page", toc_files())
def test_no_raw_tex_is_left_in_prose(page):
    """Math written in a glued Markdown fragment (``glue(key, Markdown("... $x$ ..."))``, shown with
    ``{glue:md}``) is not parsed as math: the reader would see ``$x$``. No ``$...$`` is left in a page's
    prose; code, math and tables are skipped."""
    soup = _soup(page)
    for skip in soup.select("pre, code, script, style, span.math, div.math, dt.sig"):
        skip.decompose()
    text = " ".join(soup.get_text(" ").split())
    raw = re.findall(r".{0,60}\$[^$\s][^$]{0,80}\$.{0,20}", text)
    assert not raw, f"{page}: raw TeX in prose: {raw[:3]}"


def _caption_words(figure) -> str:
    """A figure's caption as words (no "Fig. 2.3", no math delimiters), on one line."""
    caption = figure.find("figcaption")
    for number in caption.select("span.caption-number, a.headerlink"):
        number.decompose()
    text = caption.get_text(" ")
    for delimiter in ("\\(", "\\)", "\\[", "\\]", "$"):
        text = text.replace(delimiter, "")
    return " ".join(text.split())


@pytest.mark.parametrize("page", toc_files())
def test_every_figure_has_its_caption_as_alt_text(page):
    """Screen readers and text browsers read a figure's alt text: the caption's words, never the hashed
    file name myst-nb gives a cell's image; an image without a caption gets words too."""
    soup = _soup(page)
    for img in soup.find_all("img"):
        src, alt = img.get("src", ""), " ".join((img.get("alt") or "").split())
        if "_images/" not in src or "frames/" in src:
            continue
        assert alt and Path(src).name not in alt and not alt.endswith(".png"), f"{page}: {src} has alt {alt!r}"
        figure = img.find_parent("figure")
        if figure is not None and figure.find("figcaption") is not None:
            words = _caption_words(figure)
            assert alt.replace(" ", "") == words.replace(" ", ""), f"{page}: {src}: alt {alt[:80]!r} is not its caption"


@pytest.mark.parametrize("page", toc_files())
def test_pages_are_light(page):
    """Each page's HTML is at most 1 MB and holds no embedded animation frame (frames are files, fetched
    when played); its images load lazily; no page but the search page loads the search index, and none
    the 1.5 MB font-awesome script (the theme's stylesheet draws the icons from its web font). The first
    load of each page (at most 2 MB) is measured in the browser (tests/test_browser.py)."""
    from tests.helpers import MAX_HTML_BYTES

    path = HTML / f"{page}.html"
    html = path.read_text(encoding="utf-8")
    assert path.stat().st_size <= MAX_HTML_BYTES, f"{page}: {path.stat().st_size / 1e6:.2f} MB of HTML"
    assert "data:image/png;base64" not in html, f"{page}: animation frames embedded in the page"
    assert "scripts/fontawesome.js" not in html, f"{page}: loads the font-awesome script"
    assert "searchindex.js" not in html, f"{page}: loads the search index"
    soup = BeautifulSoup(html, "html.parser")
    eager = [img["src"] for img in soup.find_all("img", src=True) if img.get("loading") != "lazy"]
    assert not eager, f"{page}: images not lazy: {eager[:3]}"
    for frame in soup.find_all(string=lambda s: s and "frames[0]" in s):
        assert "_images/frames/" in frame, f"{page}: an animation without frame files"


def test_the_search_page_still_loads_the_search_index():
    assert "searchindex.js" in (HTML / "search.html").read_text(encoding="utf-8")
