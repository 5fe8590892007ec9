"""Tests of ``tokendynamics.book.claims``: the registry of the papers' claims and the tests that check them.

The registry is the data file ``claims.toml``, read by :func:`~tokendynamics.book.claims.load_claims`;
its loader is tested on small registries written here. The test files are read with ``ast`` (no
import, no collection run): a test is ``tests/<path>::<function>``, and the claims it checks are the
arguments of its ``@pytest.mark.claim(...)`` markers. Registry and markers must say the same thing.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
import yaml

from tokendynamics.book.claims import (
    CHAPTERS,
    CLAIMS,
    CLAIMS_FILE,
    PAPERS,
    TAGS,
    Claim,
    claim,
    claims_by_test,
    claims_for,
    claims_markdown,
    load_claims,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
CITATION = {1: "Paper 1 (Castin et al., arXiv 2501.18322)", 2: "Paper 2 (Li et al., 2026)"}
# section signs, the word "spec", claim numbers (C12, claim 7) and figure labels (F3) of internal notes
INTERNAL_LABEL = re.compile(r"§|\b[Ss]pec\b|\bC\d+\b|\bF\d+[a-z]?\b|\b[Cc]laim ?\d+")


def _marker_keys(func: ast.FunctionDef) -> list[str]:
    keys = []
    for dec in func.decorator_list:
        if (
            isinstance(dec, ast.Call)
            and isinstance(dec.func, ast.Attribute)
            and dec.func.attr == "claim"
            and ast.unparse(dec.func.value) == "pytest.mark"
        ):
            for arg in dec.args:
                assert isinstance(arg, ast.Constant) and isinstance(arg.value, str), ast.unparse(dec)
                keys.append(arg.value)
    return keys


def _collect():
    """node id -> (claim keys of its markers, docstring) for every test function of the suite."""
    out = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        rel = path.relative_to(ROOT).as_posix()
        for node in tree.body:
            funcs = [node] if isinstance(node, ast.FunctionDef) else []
            if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                funcs = [f for f in node.body if isinstance(f, ast.FunctionDef)]
                prefix = f"{rel}::{node.name}::"
            else:
                prefix = f"{rel}::"
            for f in funcs:
                if f.name.startswith("test_"):
                    out[prefix + f.name] = (_marker_keys(f), ast.get_docstring(f) or "")
    return out


SUITE = _collect()


def test_every_registered_claim_names_tests_that_exist():
    for c in CLAIMS:
        assert c.tests, f"{c.key} names no test"
        missing = [t for t in c.tests if t not in SUITE]
        assert not missing, f"{c.key}: no such test {missing}"
        assert len(set(c.tests)) == len(c.tests), f"{c.key} lists a test twice"


def test_markers_and_registry_name_the_same_claims_for_every_test():
    registered = claims_by_test()
    keys = {c.key for c in CLAIMS}
    for node_id, (marked, _) in SUITE.items():
        unknown = set(marked) - keys
        assert not unknown, f"{node_id} is marked with unregistered claims {unknown}"
        assert sorted(marked) == sorted(registered.get(node_id, ())), (
            f"{node_id}: marker {sorted(marked)} but registry {sorted(registered.get(node_id, ()))}"
        )


def test_claim_keys_are_unique_stable_slugs():
    keys = [c.key for c in CLAIMS]
    assert len(keys) == len(set(keys))
    for k in keys:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", k), k
    assert claim(keys[0]) is CLAIMS[0]
    with pytest.raises(KeyError, match="no claim"):
        claim("no-such-claim")


def test_tags_papers_and_chapters_are_known_and_every_chapter_exists():
    assert set(TAGS) == {"S", "R", "D", "I"} and set(PAPERS) == {1, 2}
    for stem in CHAPTERS:
        assert (ROOT / "chapters" / f"{stem}.md").exists(), stem
    for c in CLAIMS:
        assert c.tag in TAGS, (c.key, c.tag)
        assert c.paper in PAPERS, (c.key, c.paper)
        assert c.chapter in CHAPTERS, (c.key, c.chapter)
    assert {c.paper for c in claims_for(paper=2)} == {2}
    with pytest.raises(ValueError, match="unknown chapter"):
        claims_for("07_nowhere")


def test_statements_and_tolerances_cite_no_internal_labels():
    for c in CLAIMS:
        for text in (c.statement, c.tolerance):
            assert text.strip() and "\n" not in text, c.key
            assert not INTERNAL_LABEL.search(text), (c.key, INTERNAL_LABEL.search(text).group())
            assert text.count("$") % 2 == 0, f"{c.key}: unbalanced $ in {text!r}"


def test_test_names_say_what_they_check_and_marked_tests_cite_their_paper():
    for node_id, (marked, doc) in SUITE.items():
        name = node_id.rsplit("::", 1)[1]
        assert not re.search(r"_(claim|c)\d+(_|$)|(^|_)spec(_|$)", name, re.IGNORECASE), node_id
        for paper in sorted({claim(k).paper for k in marked}):
            assert CITATION[paper] in " ".join(doc.split()), f"{node_id}: its docstring does not cite paper {paper}"
        assert not INTERNAL_LABEL.search(doc), (node_id, INTERNAL_LABEL.search(doc).group())


def _glued_names(stem: str) -> list[re.Pattern]:
    """Patterns of every name the chapter glues: glue("name", ...), keep("name", ...), and f-strings."""
    src = (ROOT / "chapters" / f"{stem}.md").read_text(encoding="utf-8")
    pats = []
    for f, name in re.findall(r"\b(?:glue|keep)\(\s*(f?)\"([^\"]+)\"", src):
        pats.append(re.compile(re.sub(r"\\\{[^}]*\\\}", ".+", re.escape(name)) if f else re.escape(name)))
    return pats


def test_every_measured_value_is_glued_by_the_claims_chapter_with_a_valid_format():
    glued = {stem: _glued_names(stem) for stem in CHAPTERS}
    for c in CLAIMS:
        if c.measured is None:
            continue
        key, fmt = c.measured
        assert any(p.fullmatch(key) for p in glued[c.chapter]), f"{c.key}: {c.chapter} glues no {key!r}"
        if fmt:
            format(1.5, fmt)  # the glue role formats a float


def test_claims_markdown_has_a_row_and_a_target_per_claim_and_local_tables_have_none():
    page = claims_markdown()
    assert page.count(":::{list-table}") == 1 and page.count("(claim-") == len(CLAIMS)
    for c in CLAIMS:
        assert f"(claim-{c.key})=" in page
        if c.measured is not None:
            assert f"{c.chapter}.ipynb::{c.measured[0]}" in page
    total = 0
    for stem in CHAPTERS:
        local = claims_markdown(stem, local=True)
        rows = claims_for(stem)
        total += len(rows)
        assert "(claim-" not in local and ".ipynb::" not in local
        assert local.count("\n* - ") == len(rows) + 1 if rows else "No claim" in local
    assert total == len(CLAIMS)


def test_the_chapters_are_the_books_chapters_in_toc_order_with_their_titles_and_numbered_prefixes():
    """``CHAPTERS`` lists the root page and every numbered chapter of ``_toc.yml``, in its order, each
    with the title its page shows, and the file prefix of the k-th chapter is k."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]] + [c["file"] for part in toc["parts"] if part.get("numbered") for c in part["chapters"]]
    stems = [f.removeprefix("chapters/") for f in files]
    assert list(CHAPTERS) == stems
    for number, stem in enumerate(stems):
        assert stem == "index" if number == 0 else stem.startswith(f"{number:02d}_"), stem
        text = (ROOT / "chapters" / f"{stem}.md").read_text(encoding="utf-8")
        title = next(line[2:].strip() for line in text.splitlines() if line.startswith("# "))
        assert CHAPTERS[stem] == title, stem


def test_the_claims_page_has_a_table_for_every_chapter_with_claims():
    page = (ROOT / "chapters" / "claims.md").read_text(encoding="utf-8")
    for stem in CHAPTERS:
        shown = f'claims_markdown("{stem}")' in page
        assert shown == bool(claims_for(stem)), stem


# ---------------------------------------------------------------------------------------------
# the loader: claims.toml is data, checked when it is read
# ---------------------------------------------------------------------------------------------

HEAD = """
[papers]
1 = "Paper one"
2 = "Paper two"

[tags]
S = "stated"
D = "derived"

[chapters]
index = "Introduction"
01_first = "The first chapter"
"""

ENTRY = r"""
[[claims]]
key = "{key}"
paper = 2
tag = "D"
chapter = "01_first"
statement = '''
  The score is $\langle x,Ay\rangle$ with $A=Q^\top K$,
  wrapped over two lines.
'''
measured = ["glue_key", ".2f"]
tolerance = "$10^{{-12}}$"
tests = ["tests/test_a.py::test_one", "tests/book/test_b.py::test_two"]
"""
TESTS_LINE = 'tests = ["tests/test_a.py::test_one", "tests/book/test_b.py::test_two"]'
MEASURED_LINE = 'measured = ["glue_key", ".2f"]'


def _registry(tmp_path, text=None, keys=("first-claim",)):
    path = tmp_path / "claims.toml"
    path.write_text(HEAD + "".join(ENTRY.format(key=k) for k in keys) if text is None else text, encoding="utf-8")
    return path


def _refused(tmp_path, text, *patterns):
    with pytest.raises(ValueError) as err:
        load_claims(_registry(tmp_path, text))
    for pattern in patterns:
        assert re.search(pattern, str(err.value)), (pattern, str(err.value))


def test_load_claims_reads_every_field_with_its_type_and_joins_wrapped_text(tmp_path):
    papers, tags, chapters, claims = load_claims(_registry(tmp_path, keys=("first-claim", "second-claim")))
    assert papers == {1: "Paper one", 2: "Paper two"} and tags == {"S": "stated", "D": "derived"}
    assert list(chapters) == ["index", "01_first"]
    assert [c.key for c in claims] == ["first-claim", "second-claim"]  # the file's order
    assert claims[0] == Claim(
        key="first-claim",
        paper=2,
        statement=r"The score is $\langle x,Ay\rangle$ with $A=Q^\top K$, wrapped over two lines.",
        tag="D",
        chapter="01_first",
        measured=("glue_key", ".2f"),
        tolerance="$10^{-12}$",
        tests=("tests/test_a.py::test_one", "tests/book/test_b.py::test_two"),
    )


def test_load_claims_leaves_measured_none_when_it_is_absent(tmp_path):
    text = HEAD + ENTRY.format(key="exact").replace(MEASURED_LINE + "\n", "")
    (c,) = load_claims(_registry(tmp_path, text))[3]
    assert c.measured is None


@pytest.mark.parametrize("field", ["key", "paper", "tag", "chapter", "statement", "tolerance", "tests"])
def test_load_claims_refuses_a_claim_missing_a_required_field_naming_claim_and_field(tmp_path, field):
    lines = ENTRY.format(key="first-claim").splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{field} = "))
    end = start + (4 if field == "statement" else 1)  # the statement spans four lines
    named = "claim number 1" if field == "key" else r"claim number 1 \('first-claim'\)"
    _refused(tmp_path, HEAD + "".join(lines[:start] + lines[end:]), named, rf"missing field\(s\) \['{field}'\]")


def test_load_claims_refuses_an_unknown_field_naming_claim_and_field(tmp_path):
    text = HEAD + ENTRY.format(key="first-claim") + 'chapters = "01_first"\n'
    _refused(tmp_path, text, r"'first-claim'", r"unknown field\(s\) \['chapters'\]")


@pytest.mark.parametrize(
    ("line", "replacement", "field"),
    [
        ("paper = 2", 'paper = "2"', "paper"),
        ("paper = 2", "paper = true", "paper"),
        ("paper = 2", "paper = 3", "paper"),
        ('tag = "D"', 'tag = "X"', "tag"),
        ('chapter = "01_first"', 'chapter = "02_missing"', "chapter"),
        (MEASURED_LINE, 'measured = ["glue_key"]', "measured"),
        (MEASURED_LINE, 'measured = ["glue_key", 2]', "measured"),
        (MEASURED_LINE, 'measured = "glue_key"', "measured"),
        ('tolerance = "$10^{-12}$"', "tolerance = 1e-12", "tolerance"),
        ('tolerance = "$10^{-12}$"', 'tolerance = "  "', "tolerance"),
        (TESTS_LINE, "tests = []", "tests"),
        (TESTS_LINE, 'tests = ["test_one"]', "tests"),
        (TESTS_LINE, 'tests = ["tests/test_a.py::test_one", 3]', "tests"),
        (TESTS_LINE, 'tests = "tests/test_a.py::test_one"', "tests"),
    ],
)
def test_load_claims_refuses_a_bad_field_naming_claim_and_field(tmp_path, line, replacement, field):
    entry = ENTRY.format(key="first-claim")
    assert line in entry
    where = r"claims\.toml: claim number 1 \('first-claim'\), field " + f"'{field}'"
    _refused(tmp_path, HEAD + entry.replace(line, replacement), where)


@pytest.mark.parametrize("key", ["First-Claim", "first claim", "first--claim", ""])
def test_load_claims_refuses_a_key_that_is_not_a_slug(tmp_path, key):
    _refused(tmp_path, HEAD + ENTRY.format(key=key), "field 'key': must be a slug")


def test_load_claims_refuses_a_duplicate_key_naming_it(tmp_path):
    text = HEAD + "".join(ENTRY.format(key=k) for k in ("one", "two", "one"))
    _refused(tmp_path, text, r"claim number 3 \('one'\), field 'key'", "already the key of an earlier claim")


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (HEAD + ENTRY.format(key="a") + "\n[extra]\nx = 1\n", r"unknown top-level table\(s\) \['extra'\]"),
        (HEAD.replace("2 = ", "two = ") + ENTRY.format(key="a"), r"\[papers\] must be paper numbers"),
        (HEAD.replace('S = "stated"', "S = 1") + ENTRY.format(key="a"), r"\[tags\] must be a table"),
        (HEAD, r"no \[\[claims\]\] table"),
        (HEAD + "[[claims]\n", r"claims\.toml: .*line"),  # not TOML: the message names the file and the line
    ],
)
def test_load_claims_refuses_a_malformed_file_naming_it(tmp_path, text, pattern):
    _refused(tmp_path, text, r"claims\.toml", pattern)


def test_the_registry_is_the_packages_claims_toml_and_ships_with_the_package():
    assert load_claims() == (PAPERS, TAGS, CHAPTERS, CLAIMS)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert CLAIMS_FILE in pyproject["tool"]["setuptools"]["package-data"]["tokendynamics.book"]
    assert (ROOT / "lib" / "tokendynamics" / "book" / CLAIMS_FILE).is_file()
