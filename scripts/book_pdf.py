#!/usr/bin/env python
"""The whole book as one PDF, printed by headless Chromium from the built HTML (``make pdf``).

    python scripts/book_pdf.py [--html _build/html] [--out _build/pdf/book.pdf] [--no-api]

Run after ``make book``. The built site is served on 127.0.0.1 and opened in the system's
``chromium`` (the one the browser tests drive through Playwright). Into the first page, every page
of the table of contents is fetched and its article appended, in book order, each starting on a new
sheet, after a list of contents: links between pages become links inside the PDF, ids are made
unique per page, each animation shows its first frame, and MathJax typesets the whole. Chromium
then prints it (``page.pdf``: A4, page numbers in the footer, the headings as the PDF's outline)
with the book's print stylesheet (``_static/book.css``: no toggles, buttons or animation controls,
figures never cut between sheets, long code lines wrapped). ``--no-api`` leaves out the API
reference pages (``make test`` prints the book so, to save time). Next to the PDF, ``book.json``
lists the pages printed and their titles (``tests/test_browser.py`` checks the PDF against it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.helpers import CHROMIUM_ARGS, StaticServer, find_chromium, toc_files  # noqa: E402

HTML = ROOT / "_build" / "html"
OUT = ROOT / "_build" / "pdf" / "book.pdf"
TIMEOUT_MS = 600_000  # typesetting every formula of the book (the API pages: ~1200) on a busy machine

#: In the first page: replace its article by the articles of ``pages`` (addresses relative to the
#: site's root), each in a ``section.book-pdf-page``, and typeset them; returns the titles found.
ASSEMBLE_JS = r"""
async ({root, pages, title}) => {
  document.title = title;
  const slug = (rel) => 'page-' + rel.replace(/\.html$/, '').replace(/[^A-Za-z0-9_-]+/g, '-');
  const bare = (href) => { const u = new URL(href); u.hash = ''; return u.href; };
  const urls = pages.map((rel) => new URL(rel, root).href);
  const slugOf = new Map(urls.map((u, k) => [u, slug(pages[k])]));
  const main = document.querySelector('article.bd-article');
  const contents = document.createElement('nav');
  contents.className = 'book-pdf-contents';
  contents.innerHTML = '<h1>Contents</h1><ul></ul>';
  const sections = [], titles = [];
  for (const [k, url] of urls.entries()) {
    const doc = new DOMParser().parseFromString(await (await fetch(url)).text(), 'text/html');
    const article = doc.querySelector('article.bd-article');
    if (!article) throw new Error('no article in ' + url);
    // each animation shows its first frame (its player's script does not run here)
    doc.querySelectorAll('script').forEach((s) => {
      const id = /var img_id = "([^"]+)"/.exec(s.textContent || '');
      const first = /frames\[0\]\s*=\s*"([^"]+)"/.exec(s.textContent || '');
      const img = id && first && article.querySelector('#' + CSS.escape(id[1]));
      if (img) img.setAttribute('src', new URL(first[1], url).href);
    });
    article.querySelectorAll('script, .anim-controls').forEach((e) => e.remove());
    for (const attr of ['src', 'href']) {
      const absolute = (el) => el.setAttribute(attr, new URL(el.getAttribute(attr), url).href);
      article.querySelectorAll(`[${attr}]`).forEach(absolute);
    }
    for (const el of article.querySelectorAll('[id]')) el.id = slugOf.get(url) + '--' + el.id;
    const section = document.createElement('section');
    section.className = 'book-pdf-page';
    section.id = slugOf.get(url);
    section.append(...article.childNodes);
    sections.push(section);
    const h1 = section.querySelector('h1');
    const title = h1 ? h1.textContent.replace(/#\s*$/, '').trim() : pages[k];
    titles.push(title);
    contents.querySelector('ul').insertAdjacentHTML('beforeend', '<li><a></a></li>');
    const link = contents.querySelector('ul').lastElementChild.firstElementChild;
    link.href = '#' + section.id;
    link.textContent = title;
  }
  // links to a page of the book (or a place in it) now point inside the document
  for (const a of [contents, ...sections].flatMap((s) => Array.from(s.querySelectorAll('a[href]')))) {
    const href = a.getAttribute('href');
    if (href.startsWith('#')) continue;
    const target = slugOf.get(bare(href));
    if (target) a.setAttribute('href', '#' + target + (new URL(href).hash ? '--' + new URL(href).hash.slice(1) : ''));
  }
  main.replaceChildren(contents, ...sections);
  document.querySelectorAll('img').forEach((i) => { i.loading = 'eager'; });
  await Promise.all(Array.from(document.images).map((i) => i.decode().catch(() => null)));
  if (window.MathJax && MathJax.typesetPromise) {
    await MathJax.startup.promise;
    MathJax.typesetClear();
    await MathJax.typesetPromise([main]);
  }
  await document.fonts.ready;
  return titles;
}
"""

PDF_CSS = """
@media print {
  .book-pdf-page { break-before: page; }
  .book-pdf-contents ul { list-style: none; padding-left: 0; font-size: 1.1em; line-height: 1.8; }
  #jb-print-docs-body { display: none !important; }  /* the theme's printed title and contents of the first page */
}
"""
FOOTER = (
    '<div style="font-size: 8px; width: 100%; text-align: center; color: #555;">'
    '<span class="title"></span> — <span class="pageNumber"></span> / <span class="totalPages"></span></div>'
)


def book_pages(api: bool = True) -> list[str]:
    """The pages of the book in the order of its table of contents (``_toc.yml``)."""
    pages = [f"{f}.html" for f in toc_files()]
    return pages if api else [p for p in pages if "/api/" not in f"/{p}"]


def make_pdf(html: Path = HTML, out: Path = OUT, *, api: bool = True) -> dict:
    """Print the built book ``html`` to the PDF ``out``; returns what was printed (titles, seconds, bytes)."""
    if not (html / "index.html").exists():
        raise SystemExit(f"no built book in {html}: run `make book` first")
    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("make pdf needs Chromium: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    pages = book_pages(api)
    start = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial.pdf")
    with StaticServer(html) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1000, "height": 1400}, color_scheme="light")
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(f"{server.url}/{pages[0]}", wait_until="load")
            page.add_style_tag(content=PDF_CSS)
            title = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["title"]
            titles = page.evaluate(ASSEMBLE_JS, {"root": f"{server.url}/", "pages": pages, "title": title})
            page.emulate_media(media="print", color_scheme="light")
            page.pdf(
                path=str(partial),
                format="A4",
                margin={"top": "16mm", "bottom": "16mm", "left": "14mm", "right": "14mm"},
                print_background=True,
                display_header_footer=True,
                header_template="<span></span>",
                footer_template=FOOTER,
                outline=True,
                tagged=True,
            )
        finally:
            browser.close()
    shutil.move(partial, out)  # a failed run leaves the previous PDF in place
    done = {"pages": pages, "titles": titles, "seconds": round(time.perf_counter() - start, 1)}
    out.with_suffix(".json").write_text(json.dumps(done, indent=1, ensure_ascii=False), encoding="utf-8")
    return {**done, "bytes": out.stat().st_size}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--html", type=Path, default=HTML, help="the built book (default _build/html)")
    parser.add_argument("--out", type=Path, default=OUT, help="the PDF (default _build/pdf/book.pdf)")
    parser.add_argument("--no-api", action="store_true", help="leave out the API reference pages")
    args = parser.parse_args(argv)
    done = make_pdf(args.html, args.out, api=not args.no_api)
    print(
        f"wrote {args.out} ({done['bytes'] / 1e6:.1f} MB, {len(done['titles'])} pages of the book, "
        f"{done['seconds']:.0f} s)"
    )


if __name__ == "__main__":
    main()
