"""The book's pages as a reader gets them: no unrendered glue, figures described, light pages (a Sphinx extension).

While the doctrees are resolved:

* **Unrendered glue.** A ``{glue:text}`` (or any ``{glue...}`` role) written inside ``$...$`` is
  never filled in: the math parser takes it as TeX and MathJax prints the markup as italic letters.
  Every such placeholder left in math or prose is a warning (the book builds with ``-W``: the build
  fails), naming the page and the line. Code (literals, code blocks, cell outputs) is skipped.
* **Alt text.** A figure's image gets its caption's words as alt text (myst-nb gives a cell's
  image its hashed file name); an image without a caption gets "Figure: output of a code cell".

Printed numbers that make a sentence false or empty (:func:`vacuous_numbers`, checked on the built
pages by ``tests/test_book.py``): a measured value shown as a rounded zero (``0.000``, ``0.0``: show
enough digits, a bound, or an exact ``0``), and "N of the N ..., the rest ..." where there is no rest.

After the HTML is written (``build-finished``), every page is made light:

* **Animation frames** (matplotlib ``to_jshtml`` embeds every frame as base64 in the page) are written
  to ``_images/frames/<hash>.png`` and the player keeps their addresses: the first frame loads with
  the page, the others when the animation is played or scrubbed (``_static/book.js`` fetches them all
  on the first touch of its controls).
* **Static explorers' states** (``tokendynamics.book.static_explorers``: each state's picture a data
  URI in the twin's JSON and its ``<img>``) are written to ``_images/states/<hash>.png``; ``_static/book.js``
  fetches a state when a control moves to it, and its neighbours ahead. Where the page has launch
  buttons (the book built for its repository), the twin's caption gets the same Binder and Colab links.
* **Images** load lazily (``loading="lazy"``, ``decoding="async"``): a phone downloads the figures
  it scrolls to.
* **Icons**: pydata-sphinx-theme's font-awesome script (1.5 MB on every page) is dropped; its own
  stylesheet already draws the same ``<i class="fa-...">`` icons from the font-awesome web font,
  and the animations' ``fa fa-play`` buttons too. That font's solid face (0.16 MB) is cut down to
  the glyphs the book uses (the ``fa-*`` classes of its pages and the glyphs the theme's
  stylesheets name), and the stylesheet's rules for the 1 900 other icons are dropped.
* **Search index**: the theme loads ``searchindex.js`` (and Sphinx's search scripts) on every page
  for a search-as-you-type the book does not switch on; the search field opens ``search.html``,
  which loads them itself. Only that page keeps them.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from pathlib import Path

from docutils import nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: An unrendered glue role: ``{glue}``, ``{glue:text}``, ``{glue:md}``, ``{glue:figure}``, ``{glue:math}``
GLUE_PLACEHOLDER = re.compile(r"\{glue(?::[a-z]+)?\}")
UNCAPTIONED_ALT = "Figure: output of a code cell"

# ---- doctree: glue placeholders and alt text

_SKIP = (nodes.literal, nodes.literal_block, nodes.raw, nodes.comment)  # code, and raw HTML outputs
_MATH = (nodes.math, nodes.math_block)


def _inside(node: nodes.Node, kinds: tuple) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, kinds):
            return True
        parent = parent.parent
    return False


def unrendered_glue(doctree: nodes.Node) -> list[tuple[nodes.Node, str]]:
    """The nodes of math or prose that still contain a glue role, with their text."""
    found = []
    for node in doctree.findall(lambda n: isinstance(n, (*_MATH, nodes.Text))):
        if isinstance(node, nodes.Text) and _inside(node, _MATH):
            continue  # the formula's own text: reported once, as math
        text = node.astext()
        if GLUE_PLACEHOLDER.search(text) and not _inside(node, _SKIP):
            found.append((node, text))
    return found


#: A number printed as a rounded zero: ``0.0``, ``0.00``, ``−0.000`` (not ``10.0``, ``0.05`` or ``0``)
ROUNDED_ZERO = re.compile(r"(?<![\w.,])[−-]?0\.0+(?![\d.])")
#: "120 of the 120 cells ... (the rest ...)": all of them, and then the ones that are left
ALL_AND_THE_REST = re.compile(r"\b(\d+) of (?:the )?\1\b[^.;]{0,300}?\bthe (?:rest|others|remaining)\b")


def vacuous_numbers(text: str) -> list[str]:
    """The places of ``text`` (a page's prose, no code, math or tables) where a printed number empties the
    sentence: a rounded zero, or "N of the N" followed by "the rest"; each with some context."""
    found = [m for pattern in (ROUNDED_ZERO, ALL_AND_THE_REST) for m in pattern.finditer(text)]
    return [text[max(0, m.start() - 60) : m.end() + 20] for m in sorted(found, key=lambda m: m.start())]


def check_glue(app, doctree, docname) -> None:
    for node, text in unrendered_glue(doctree):
        where = node if node.line or node.source else node.parent
        kind = "math" if isinstance(node, _MATH) else "text"
        logger.warning(
            "unrendered glue placeholder in %s (a glue role inside $...$ is never filled in: move it out "
            "of the formula): %s",
            kind,
            " ".join(text.split())[:160],
            location=where,
            type="book",
            subtype="glue",
        )


def caption_alt(figure: nodes.figure) -> str | None:
    """The words of a figure's caption, on one line (None without a caption)."""
    caption = figure.next_node(nodes.caption)
    if caption is None:
        return None
    return " ".join(caption.astext().split()) or None


def _looks_like_a_file_name(alt: str | None, uri: str) -> bool:
    return (
        not alt or alt == uri or alt.endswith(os.path.basename(uri)) or bool(re.search(r"\.(png|jpe?g|svg|gif)$", alt))
    )


def describe_images(app, doctree, docname) -> None:
    """Alt text of every image: its figure's caption, or a plain description instead of a file name."""
    for image in doctree.findall(nodes.image):
        uri = image.get("uri", "")
        if not _looks_like_a_file_name(image.get("alt"), uri):
            continue  # the author wrote one
        figure = image.parent
        while figure is not None and not isinstance(figure, nodes.figure):
            figure = figure.parent
        image["alt"] = (caption_alt(figure) if figure is not None else None) or UNCAPTIONED_ALT


# ---- written pages: frames, lazy images, icons, search index

#: One frame of a ``to_jshtml`` player: ``frames[3] = "data:image/png;base64,..."`` (base64 broken
#: into lines ending in a backslash)
FRAME = re.compile(r'(frames\[\d+\]\s*=\s*")data:image/(png|jpeg|gif);base64,([A-Za-z0-9+/=\\\s]*?)(")')
#: The player's constructor preloads every frame; the book's keeps their addresses (book.js loads them)
PRELOAD = re.compile(r"this\.frames\[i\]\s*=\s*new Image\(\);\s*this\.frames\[i\]\.src\s*=\s*frames\[i\];")
LAZY_PRELOAD = "this.frames[i] = {src: frames[i]};  /* book: loaded when played (_static/book.js) */"
FONT_AWESOME = re.compile(
    r'[ \t]*<(?:script defer|link rel="preload" as="script")[^>]*scripts/fontawesome\.js[^>]*>(?:</script>)?\n?'
)
SEARCH_SCRIPTS = re.compile(r'[ \t]*<script src="[^"]*(?:searchtools|language_data|searchindex)\.js"></script>\n?')
IMG = re.compile(r"<img(?![^>]*\bloading=)(?=[^>]*\bsrc=)")


def _to_file(data: bytes, suffix: str, folder: Path, page: Path) -> str:
    """Write ``data`` to ``folder/<hash>.<suffix>`` (once) and return its address from ``page``."""
    target = folder / (hashlib.sha256(data).hexdigest()[:24] + "." + suffix.replace("jpeg", "jpg"))
    if not target.exists():
        folder.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return Path(os.path.relpath(target, page.parent)).as_posix()


def frames_to_files(html: str, page: Path, outdir: Path) -> tuple[str, int]:
    """Write the base64 frames of ``html``'s animations to ``outdir/_images/frames`` and point the player at them."""
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        count += 1
        data = base64.b64decode(re.sub(r"[\\\s]", "", match[3]))
        return match[1] + _to_file(data, match[2], outdir / "_images" / "frames", page) + match[4]

    html = FRAME.sub(replace, html)
    if count:
        html, n = PRELOAD.subn(LAZY_PRELOAD, html)
        if not n:
            raise RuntimeError(
                f"{page}: animation frames moved to files, but the player's preloading loop was not found "
                "(matplotlib's to_jshtml changed?): the page would download every frame at once"
            )
    return html, count


#: A state of a static explorer: ``"data:image/png;base64,..."`` in its JSON or its ``<img src>``
STATE = re.compile(r'"data:image/png;base64,([A-Za-z0-9+/=]+)"')
LAUNCH_SLOT = '<span class="static-explorer-launch"></span>'
LAUNCH_LINKS = {
    "Binder": re.compile(r'href="(https://mybinder\.org/v2/gh/[^"]+)"'),
    "Colab": re.compile(r'href="(https://colab\.research\.google\.com/github/[^"]+)"'),
}


def states_to_files(html: str, page: Path, outdir: Path) -> tuple[str, int]:
    """Write the static explorers' states of ``html`` to ``outdir/_images/states`` and fill their captions'
    launch links from the page's launch buttons (none without a repository)."""
    folder = outdir / "_images" / "states"
    html, count = STATE.subn(lambda m: f'"{_to_file(base64.b64decode(m[1]), "png", folder, page)}"', html)
    found = {name: pattern.search(html) for name, pattern in LAUNCH_LINKS.items()}
    links = " or ".join(f'<a href="{m[1]}">{name}</a>' for name, m in found.items() if m)
    slot = LAUNCH_SLOT.replace("></", f">, or open it on {links}</") if links else LAUNCH_SLOT
    return html.replace(LAUNCH_SLOT, slot), count


def lighten(html: str, page: Path, outdir: Path, *, search_page: bool) -> tuple[str, dict]:
    """The page ``html`` (written at ``page`` under ``outdir``) made light; returns it and what was done."""
    html, frames = frames_to_files(html, page, outdir)
    html, states = states_to_files(html, page, outdir)
    html, icons = FONT_AWESOME.subn("", html)
    searches = 0
    if not search_page:
        html, searches = SEARCH_SCRIPTS.subn("", html)
    html, lazy = IMG.subn('<img loading="lazy" decoding="async"', html)
    return html, {
        "frames": frames,
        "states": states,
        "icon_scripts": icons,
        "search_scripts": searches,
        "lazy_images": lazy,
    }


#: ``.fa-bars:before,.fa-navicon:before{content:"\f0c9"}`` in pydata-sphinx-theme's stylesheet
ICON_RULE = re.compile(r'((?:\.fa-[a-z0-9-]+:before,?)+)\{content:"(\\[0-9a-fA-F]+|[^"\\]|\\.)"\}')
ICON_CLASS = re.compile(r"\bfa-([a-z0-9-]+)")
CSS_GLYPH = re.compile(r'"\\(f[0-9a-fA-F]{3}|e[0-9a-fA-F]{3})"')
THEME_CSS = Path("_static/styles/pydata-sphinx-theme.css")
SOLID_FONT = Path("_static/vendor/fontawesome/webfonts/fa-solid-900")
SOLID_FACE = re.compile(
    r'src:url\(\.\./vendor/fontawesome/webfonts/fa-solid-900\.woff2\) format\("woff2"\),'
    r'url\(\.\./vendor/fontawesome/webfonts/fa-solid-900\.ttf\) format\("truetype"\)'
)


def _codepoint(content: str) -> int:
    return int(content[1:], 16) if content.startswith("\\") and len(content) > 2 else ord(content[-1])


def trim_icons(outdir: Path, used: set[str]) -> dict:
    """Cut the theme's font-awesome solid face down to the glyphs the book uses and drop the other
    icons' rules from its stylesheet; returns the sizes before and after."""
    from fontTools import subset

    css_path = outdir / THEME_CSS
    css = css_path.read_text(encoding="utf-8")
    codepoints: set[int] = set()

    def keep(match: re.Match[str]) -> str:
        names = re.findall(r"\.fa-([a-z0-9-]+):before", match[1])
        if used.intersection(names):
            codepoints.add(_codepoint(match[2]))
            return match[0]
        return ""

    trimmed = ICON_RULE.sub(keep, css)
    # glyphs the stylesheets name outside the icon classes (admonitions, links, toggles: --pst-icon-*)
    others = [s.read_text(encoding="utf-8") for s in sorted((outdir / "_static").rglob("*.css")) if s != css_path]
    for sheet in [trimmed, *others]:
        codepoints.update(int(h, 16) for h in CSS_GLYPH.findall(sheet))
    source = outdir / SOLID_FONT.with_suffix(".ttf")
    target = outdir / SOLID_FONT.with_name(SOLID_FONT.name + ".book.woff")
    options = subset.Options()
    options.flavor = "woff"  # zlib (woff2 needs brotli)
    options.layout_features = ["*"]
    font = subset.load_font(str(source), options)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(codepoints))
    subsetter.subset(font)
    subset.save_font(font, str(target), options)
    trimmed, faces = SOLID_FACE.subn(f'src:url(../vendor/fontawesome/webfonts/{target.name}) format("woff")', trimmed)
    if faces != 1:
        raise RuntimeError(f"{css_path}: the font-awesome solid @font-face was not found (theme changed?)")
    css_path.write_text(trimmed, encoding="utf-8")
    return {
        "css": (len(css), len(trimmed)),
        "font": ((outdir / SOLID_FONT.with_suffix(".woff2")).stat().st_size, target.stat().st_size),
        "glyphs": len(codepoints),
    }


def lighten_pages(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    total: dict[str, int] = {}
    used: set[str] = set()
    for page in sorted(outdir.rglob("*.html")):
        if "_static" in page.relative_to(outdir).parts:
            continue
        html = page.read_text(encoding="utf-8")
        used.update(ICON_CLASS.findall(html))
        new, done = lighten(html, page, outdir, search_page=page.relative_to(outdir).as_posix() == "search.html")
        if new != html:
            page.write_text(new, encoding="utf-8")
        for key, value in done.items():
            total[key] = total.get(key, 0) + value
    logger.info("book_pages: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in total.items()))
    if (outdir / THEME_CSS).exists():
        sizes = trim_icons(outdir, used)
        logger.info(
            f"book_pages: icons: stylesheet {sizes['css'][0]} -> {sizes['css'][1]} bytes, solid face "
            f"{sizes['font'][0]} -> {sizes['font'][1]} bytes ({sizes['glyphs']} glyphs)"
        )


def setup(app):
    app.connect("doctree-resolved", check_glue)
    app.connect("doctree-resolved", describe_images)
    app.connect("build-finished", lighten_pages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
