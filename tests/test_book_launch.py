"""Repository link and launch buttons: present when the book is built for a repository, absent otherwise.

`make book REPO=owner/name` (the Pages workflow passes its repository) writes the repository into the
staged `_config.yml`; Binder and Colab then open `chapters/<chapter>.ipynb` on the `notebooks` branch,
which the workflow publishes. The config tests are quick; the HTML test (marker ``book``, needs the
executed chapters of `make book`) builds a one-page book both ways, about 10 s each.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import build_book  # noqa: E402

REPO = "example-org/token-book"
PAGE = "index"  # a notebook page (launch buttons are shown on notebook pages only)


def test_staged_config_names_the_repository_only_when_given():
    plain = yaml.safe_load(build_book.book_config(None))
    assert plain == yaml.safe_load((ROOT / "_config.yml").read_text())
    assert "repository" not in plain and "launch_buttons" not in plain
    assert not plain["html"].get("use_repository_button")

    config = yaml.safe_load(build_book.book_config(REPO))
    assert config["repository"] == {"url": f"https://github.com/{REPO}", "branch": "notebooks", "path_to_book": ""}
    assert config["html"]["use_repository_button"] is True
    assert config["launch_buttons"]["notebook_interface"] == "jupyterlab"
    assert config["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    assert config["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    # everything else is the repository's own configuration, unchanged
    for key in ("repository", "launch_buttons"):
        config.pop(key)
    config["html"].pop("use_repository_button")
    plain["html"].pop("use_repository_button", None)
    assert config == plain


@pytest.mark.parametrize("bad", ["", "owner", "owner/name/extra", "https://gitlab.example.org/a/b", "a b/c"])
def test_repository_must_be_a_github_owner_and_name(bad):
    with pytest.raises(SystemExit):
        build_book.check_repo(bad)
    assert build_book.check_repo(f"https://github.com/{REPO}/") == REPO


def test_published_notebooks_start_with_the_colab_setup(tmp_path, monkeypatch):
    executed = tmp_path / "executed"
    executed.mkdir()
    monkeypatch.setattr(build_book, "EXECUTED", executed)
    stems = [p.stem for p in build_book.notebook_sources()]
    for stem in stems:
        nb = nbformat.v4.new_notebook(
            cells=[nbformat.v4.new_markdown_cell("# title"), nbformat.v4.new_code_cell("x = 1")]
        )
        nbformat.write(nb, executed / f"{stem}.ipynb")
    written = build_book.export_notebooks(REPO, tmp_path / "out")
    assert [p.name for p in written] == [f"{s}.ipynb" for s in stems]
    for path in written:
        nb = nbformat.read(path, as_version=4)
        first = nb.cells[0]
        assert first.metadata["tags"] == [build_book.COLAB_TAG]
        assert f"https://github.com/{REPO}" in first.source and '"notebooks"' in first.source
        assert 'if "google.colab" in sys.modules:' in first.source
        compile(first.source, path.name, "exec")  # plain Python, no magics: runs anywhere
        assert [c.source for c in nb.cells[1:]] == ["# title", "x = 1"]
    # exporting again does not stack set-up cells
    build_book.EXECUTED = tmp_path / "out" / "chapters"
    again = build_book.export_notebooks(REPO, tmp_path / "again")
    assert sum(build_book.COLAB_TAG in c.metadata.get("tags", []) for c in nbformat.read(again[0], 4).cells) == 1


def _build_one_page(tmp_path: Path, repo: str | None) -> BeautifulSoup:
    if not (build_book.EXECUTED / f"{PAGE}.ipynb").exists():
        pytest.fail("the chapters are not executed: run `make book` (or `make test`, which builds it)")
    stage = tmp_path / "stage"
    build_book.stage(repo, dest=stage, only=[PAGE])
    jb = Path(sys.executable).with_name("jupyter-book")
    result = subprocess.run(
        [str(jb), "build", str(stage), "--path-output", str(tmp_path), "--builder", "html"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return BeautifulSoup((tmp_path / "_build" / "html" / "chapters" / f"{PAGE}.html").read_text(), "html.parser")


@pytest.mark.book
def test_built_page_has_launch_buttons_only_with_a_repository(tmp_path):
    page = _build_one_page(tmp_path / "with", REPO)
    links = {a.get("href") for a in page.find_all("a")}
    binder = f"https://mybinder.org/v2/gh/{REPO}/notebooks?urlpath=lab/tree/chapters/{PAGE}.ipynb"
    colab = f"https://colab.research.google.com/github/{REPO}/blob/notebooks/chapters/{PAGE}.ipynb"
    assert binder in links, sorted(links)
    assert colab in links, sorted(links)
    assert f"https://github.com/{REPO}" in links
    assert page.find(class_="dropdown-launch-buttons") is not None

    plain = _build_one_page(tmp_path / "without", None)
    text = str(plain)
    for promise in ("mybinder", "colab.research", "github.com", "dropdown-launch-buttons", "Launch"):
        assert promise not in text, f"{promise!r} in a page built without a repository"
    assert not any(w in plain.get_text() for w in ("Binder", "Colab")), "the page text promises a launch button"
