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
# papermill runs this many chapters at once
BOOK_JOBS ?= 2
export BOOK_JOBS

.PHONY: setup book test test-lib test-book chapter bench clean help

help:
	@echo "make book     execute every chapter (fast setting) and build _build/html (zero warnings)"
	@echo "make test     library tests, every chapter executed, checks on the built HTML"
	@echo "make chapter NAME=index PARAMS='-p mode full'   re-run one chapter with your parameters"
	@echo "make bench    speed ratios of the core, the Gaussian solvers and the batched ensembles against their baselines"
	@echo "make clean    remove _build and _stage (keeps .venv)"

$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip 2>&1 | { grep -v "^WARNING: Location" || true; }
	$(BIN)/python -m pip install --quiet -r requirements.txt -e ".[cluster]" 2>&1 | { grep -v "^WARNING: Location" || true; }
	$(BIN)/python -m pip check
	@touch $(STAMP)

setup: $(STAMP)

book: setup
	$(BIN)/python scripts/build_book.py all

test-lib: setup
	$(BIN)/python -m pytest -m "not book"

test-book: setup
	$(BIN)/python -m pytest -m book

test: setup
	$(BIN)/python -m pytest -m "not book"
	$(BIN)/python scripts/build_book.py all
	$(BIN)/python -m pytest -m book

chapter: setup
	@test -n "$(NAME)" || { echo "usage: make chapter NAME=<chapter> [PARAMS='-p key value ...']"; exit 2; }
	$(BIN)/python scripts/build_book.py chapter $(NAME) $(PARAMS)

bench: setup
	$(BIN)/python benchmarks/bench_core.py
	$(BIN)/python benchmarks/bench_highdim.py
	$(BIN)/python benchmarks/bench_gaussian.py
	$(BIN)/python benchmarks/bench_ensembles.py

clean:
	rm -rf _build _stage
