# One-command setup. Both targets create .venv when it is missing and install the project.
#   make test        unit tests + lint + the smoke pipeline + checks on its outputs
#   make reproduce   the default replication (profile mini; PROFILE=... for another)
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of torch lies on the team's machines; GPU users: make install TORCH=torch
TORCH ?= torch==2.13.0
PROFILE ?= mini
CORES ?= all
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: help install test reproduce publish report bench lab lint clean-results

help:
	@sed -n '2,4p' Makefile

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet $(TORCH)
	$(BIN)/python -m pip install --quiet -e ".[test]"
	$(BIN)/python -m ipykernel install --sys-prefix --name lsa --display-name "Python (lsa)"
	touch $@

install: $(VENV)/.installed

test: install
	$(BIN)/python -m pytest

reproduce: install
	@start=$$(date +%s); set -e; \
	$(BIN)/python -m lsa fetch books; \
	$(BIN)/python -m lsa pipeline --profile $(PROFILE) --cores $(CORES); \
	$(BIN)/python -m lsa check --profile $(PROFILE); \
	$(BIN)/python -m lsa timings --profile $(PROFILE) --record-since $$start --cores "$(CORES)"

# a committed snapshot of the last `make reproduce` (docs/results/<profile>/)
publish: install
	$(BIN)/python -m lsa publish --profile $(PROFILE)

# an HTML report of the last run (runtimes, rules, provenance) made by Snakemake itself
report: install
	$(BIN)/snakemake --config profile=$(PROFILE) --report results/$(PROFILE)/snakemake_report.html

bench: install
	$(BIN)/python -m lsa bench misalign

lab: install
	$(BIN)/jupyter lab notebooks/

# ruff and nbstripout through the pre-commit hooks (.pre-commit-config.yaml), then Snakemake's
lint: install
	$(BIN)/pre-commit run --all-files
	$(BIN)/snakemake --lint

clean-results:
	rm -rf results/$(PROFILE) figures/$(PROFILE) logs/$(PROFILE)
