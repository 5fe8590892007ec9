"""Tests of ``tokendynamics.book.claims``: the registry of the papers' claims and the tests that check them.

The test files are read with ``ast`` (no import, no collection run): a test is
``tests/<path>::<function>``, and the claims it checks are the arguments of its
``@pytest.mark.claim(...)`` markers. Registry and markers must say the same thing.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tokendynamics.book.claims import (
    CHAPTERS,
    CLAIMS,
    PAPERS,
    TAGS,
    claim,
    claims_by_test,
    claims_for,
    claims_markdown,
)

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
