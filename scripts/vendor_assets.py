#!/usr/bin/env python
"""Ship the book's MathJax with the HTML, so that a reader needs no network to see the formulas.

    python scripts/vendor_assets.py DEST     # fills DEST/mathjax

MathJax 3 from the npm registry, pinned by version and by the SHA-256 of its tarball: TeX input,
CommonHTML output and the screen readers' MathML, as the components ``es5/startup.js``, ``core.js``,
``input/tex.js`` (the ams, newcommand, configmacros, noundefined, require and autoload extensions),
``output/chtml.js`` with its font data, ``a11y/assistive-mml.js``, the CHTML web fonts
(``es5/output/chtml/fonts/woff-v2``) and the TeX extensions ``autoload`` may pull in
(``es5/input/tex/extensions``), with its LICENSE. That is ``es5/tex-chtml.js`` without its
right-click menu (``ui/menu``: 0.43 MB of the 1.16 MB every page loaded). ``_config.yml`` points
Sphinx's ``mathjax_path`` at ``_static/mathjax/startup.js`` and lists the components in
``mathjax3_config.loader.load``; MathJax finds them, its fonts and extensions relative to that file.

The tarball is fetched once with ``npm pack`` (the ordinary npm client) and cached in
``_build/vendor/`` (``make clean`` removes it); never from a CDN.

(The other CDN link of the built pages, font-awesome 4.4 in matplotlib's ``to_jshtml`` animations,
is not needed: the theme's stylesheet, shipped in ``_static``, draws the buttons'
``<i class="fa fa-play">`` from its font-awesome 6 web font. ``scripts/build_book.py`` removes that link.)
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "_build" / "vendor"

# name -> (version, SHA-256 of its npm tarball)
PACKAGES = {
    "mathjax": ("3.2.2", "1b9c0a1c44df864e915690558e72adb9cc5203360daefd385084ced3b6c64c09"),
}

MATHJAX_KEEP = (
    "package/LICENSE",
    "package/es5/startup.js",
    "package/es5/core.js",
    "package/es5/input/tex.js",
    "package/es5/output/chtml.js",
    "package/es5/output/chtml/fonts/tex.js",
    "package/es5/a11y/assistive-mml.js",
    "package/es5/output/chtml/fonts/woff-v2/",
    "package/es5/input/tex/extensions/",
)
MATHJAX_SKIP = ("package/es5/input/tex/extensions/all-packages.js",)  # only for tex-full builds

# What `mathjax_path` points at (relative to _static/).
MATHJAX_JS = "mathjax/startup.js"
#: The components ``startup.js`` loads (``mathjax3_config.loader.load`` in ``_config.yml``)
MATHJAX_COMPONENTS = ("core", "input/tex", "output/chtml", "a11y/assistive-mml")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tarball(name: str) -> Path:
    """The cached npm tarball of ``name`` (fetched with ``npm pack`` when missing or corrupt)."""
    version, sha = PACKAGES[name]
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"{name}-{version}.tgz"
    if path.exists() and _sha256(path) == sha:
        return path
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit(
            f"npm is needed once to fetch {name}@{version} for the offline book "
            "(Debian: apt-get install -y npm), or put the tarball at " + str(path)
        )
    with tempfile.TemporaryDirectory() as tmp:
        result = subprocess.run(
            [npm, "pack", f"{name}@{version}", "--silent", "--pack-destination", tmp],
            cwd=tmp,
            capture_output=True,
            text=True,
        )
        packed = Path(tmp) / f"{name}-{version}.tgz"
        if result.returncode != 0 or not packed.exists():
            raise SystemExit(f"npm pack {name}@{version} failed:\n{result.stderr.strip()}")
        got = _sha256(packed)
        if got != sha:
            raise SystemExit(f"{name}@{version}: tarball SHA-256 {got} differs from the pinned {sha}")
        shutil.move(packed, path)
    return path


def _extract(tgz: Path, keep: tuple[str, ...], skip: tuple[str, ...], dest: Path, strip: str) -> int:
    """Extract the members of ``tgz`` under the ``keep`` prefixes into ``dest`` (minus ``strip``)."""
    count = 0
    with tarfile.open(tgz) as tar:
        for member in tar.getmembers():
            if not member.isfile() or member.name in skip:
                continue
            if not any(member.name == k or (k.endswith("/") and member.name.startswith(k)) for k in keep):
                continue
            rel = member.name[len(strip) :] if member.name.startswith(strip) else member.name[len("package/") :]
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with tar.extractfile(member) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)
            count += 1
    return count


def vendor(dest: Path) -> dict[str, int]:
    """Fill ``dest`` (a folder listed in Sphinx's ``html_static_path``) with the offline assets."""
    dest = Path(dest)
    if (dest / "mathjax").exists():
        shutil.rmtree(dest / "mathjax")
    counts = {"mathjax": _extract(tarball("mathjax"), MATHJAX_KEEP, MATHJAX_SKIP, dest / "mathjax", "package/es5/")}
    components = [f"mathjax/{c}.js" for c in MATHJAX_COMPONENTS] + ["mathjax/output/chtml/fonts/tex.js"]
    for rel in (MATHJAX_JS, *components, "mathjax/output/chtml/fonts/woff-v2/MathJax_Main-Regular.woff"):
        if not (dest / rel).is_file():
            raise SystemExit(f"vendored asset missing after extraction: {dest / rel}")
    return counts


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print(vendor(Path(sys.argv[1])))
