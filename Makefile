# The two commands of the README, `make book` and `make test`, do all the set-up on a fresh
# machine: create .venv if missing, install the toolchain and the library (editable), then work.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NAME ?=
PARAMS ?=
# `make book REPO=owner/name`: the GitHub repository the book is published from (repository link and
# Binder/Colab launch buttons); empty: no link, no button
REPO ?=
# `make lab`: preferred port (the next free one if it is taken; the target says which)
LAB_PORT ?= 8888
LAB_ARGS ?=
LAB_STAMP := $(VENV)/.lab-installed
BROWSER_STAMP := $(VENV)/.browser-installed
LINT_STAMP := $(VENV)/.lint-installed
# papermill runs this many chapters at once
BOOK_JOBS ?= 2
export BOOK_JOBS

.PHONY: setup lab-setup browser-setup lint-setup lint book pdf lab test test-lib test-book test-lab test-browser screenshots chapter bench clean help

help:
	@echo "make book     execute every chapter (fast setting) and build _build/html (zero warnings)"
	@echo "make book REPO=owner/name   the same, with a repository link and Binder/Colab launch buttons"
	@echo "make pdf      the whole book as one PDF, _build/pdf/book.pdf, printed by Chromium (after make book)"
	@echo "make lab      JupyterLab on chapters/ (installs the lab extra; MyST chapters open as notebooks, live widgets)"
	@echo "make test     lint and type checks, library tests, explorers in JupyterLab + Chromium, every chapter executed, checks on the HTML"
	@echo "make lint     ruff (lint + format check) on the code and mypy on the library"
	@echo "make test-lab       only the JupyterLab/Chromium test of the explorers (about 2 minutes)"
	@echo "make test-browser   only the checks of the built book in Chromium (after make book)"
	@echo "make screenshots    the same checks, every page photographed whole in _build/screenshots/"
	@echo "make chapter NAME=index PARAMS='-p mode full'   re-run one chapter with your parameters"
	@echo "make bench    speed ratios of the core, the Gaussian solvers and the batched ensembles against their baselines; each page's weight"
	@echo "make clean    remove _build and _stage (keeps .venv)"

$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip 2>&1 | { grep -v "^WARNING: Location" || true; }
	$(BIN)/python -m pip install --quiet -r requirements.txt -e ".[cluster]" 2>&1 | { grep -v "^WARNING: Location" || true; }
	$(BIN)/python -m pip check
	@touch $(STAMP)

setup: $(STAMP)

# The optional `lab` extra (JupyterLab, jupytext, jupyterlab-myst) for `make lab`; the browser tests
# also need the `test` extra (playwright, which drives the system's chromium).
$(LAB_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[lab]" 2>&1 | { grep -v "^WARNING: Location" || true; }
	$(BIN)/python -m pip check
	@touch $(LAB_STAMP)

$(BROWSER_STAMP): $(LAB_STAMP)
	$(BIN)/python -m pip install --quiet -e ".[lab,test]" 2>&1 | { grep -v "^WARNING: Location" || true; }
	$(BIN)/python -m pip check
	@touch $(BROWSER_STAMP)

lab-setup: $(LAB_STAMP)

$(LINT_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[lint]" 2>&1 | { grep -v "^WARNING: Location" || true; }
	@touch $(LINT_STAMP)

lint-setup: $(LINT_STAMP)

lint: lint-setup
	$(BIN)/ruff check lib tests scripts benchmarks _ext
	$(BIN)/ruff format --check lib tests scripts benchmarks _ext
	$(BIN)/mypy

browser-setup: $(BROWSER_STAMP)

book: setup
	$(BIN)/python scripts/build_book.py all $(if $(REPO),--repo $(REPO)) $(if $(MODE),--mode $(MODE))

# The whole book as one PDF (_build/pdf/book.pdf), printed by the Chromium the browser tests use,
# from the built HTML (run `make book` first; `make test` builds both).
pdf: browser-setup
	$(BIN)/python scripts/book_pdf.py

lab: lab-setup
	$(BIN)/python scripts/lab.py --port $(LAB_PORT) $(LAB_ARGS)

test-lib: setup
	$(BIN)/python -m pytest -m "not book and not browser"

test-book: setup
	$(BIN)/python -m pytest -m "book and not browser"

# Browser checks (headless chromium; Debian: apt-get install -y chromium). Two kinds:
#  - the explorers in JupyterLab (marker browser, not book): need no built book;
#  - the built book as a reader sees it (markers browser and book): _build/browser-report.json and
#    _build/screenshots/ (each page's first screen; the whole page where a check fails);
#    `make screenshots` runs the same checks with every page photographed whole (~35 s more).
#    tests/test_browser_static_explorers.py moves every control of every static explorer there.
# Each runs its own files (collecting the whole suite with its doctests takes ~10 s).
# TOKENDYNAMICS_REQUIRE_BROWSER=1: a missing chromium or JupyterLab fails the run instead of skipping.
test-lab: browser-setup
	TOKENDYNAMICS_REQUIRE_BROWSER=1 $(BIN)/python -m pytest -m "browser and not book" tests/test_lab.py

test-browser: browser-setup
	TOKENDYNAMICS_REQUIRE_BROWSER=1 $(BIN)/python -m pytest -m "browser and book" tests/test_browser.py tests/test_browser_static_explorers.py

screenshots: browser-setup
	TOKENDYNAMICS_SCREENSHOTS=whole TOKENDYNAMICS_REQUIRE_BROWSER=1 $(BIN)/python -m pytest -m "browser and book" tests/test_browser.py

test: setup browser-setup lint
	$(BIN)/python -m pytest -m "not book and not browser"
	TOKENDYNAMICS_REQUIRE_BROWSER=1 $(BIN)/python -m pytest -m "browser and not book" tests/test_lab.py
	$(BIN)/python scripts/build_book.py all
	$(BIN)/python -m pytest -m "book and not browser"
	$(BIN)/python scripts/book_pdf.py --no-api
	TOKENDYNAMICS_REQUIRE_BROWSER=1 $(BIN)/python -m pytest -m "browser and book" tests/test_browser.py tests/test_browser_static_explorers.py

chapter: setup
	@test -n "$(NAME)" || { echo "usage: make chapter NAME=<chapter> [PARAMS='-p key value ...']"; exit 2; }
	$(BIN)/python scripts/build_book.py chapter $(NAME) $(PARAMS)

bench: setup
	$(BIN)/python benchmarks/bench_chapters.py
	$(BIN)/python benchmarks/bench_explorers.py
	$(BIN)/python benchmarks/bench_core.py
	$(BIN)/python benchmarks/bench_highdim.py
	$(BIN)/python benchmarks/bench_gaussian.py
	$(BIN)/python benchmarks/bench_ensembles.py
	$(BIN)/python benchmarks/bench_phase.py
	@if [ -f _build/html/index.html ]; then $(BIN)/python benchmarks/bench_pages.py; else echo "bench_pages: no built book (make book): page weights skipped"; fi
	@if [ -f _build/html/index.html ]; then $(BIN)/python benchmarks/bench_static_explorers.py; else echo "bench_static_explorers: no built book (make book): skipped"; fi

clean:
	rm -rf _build _stage
