# One-command setup. Both targets create .venv when it is missing and install the project.
#   make test        unit tests + the smoke pipeline + checks on its outputs
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

.PHONY: help install test reproduce bench lab lint clean-results

help:
	@sed -n '2,4p' Makefile

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet $(TORCH)
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

install: $(VENV)/.installed

test: install
	$(BIN)/python -m pytest

reproduce: install
	$(BIN)/python -m lsa fetch books
	$(BIN)/snakemake --cores $(CORES) --config profile=$(PROFILE)
	$(BIN)/python -m lsa check --profile $(PROFILE)

bench: install
	$(BIN)/python -m lsa bench misalign

lab: install
	$(BIN)/jupyter lab notebooks/

lint: install
	$(BIN)/snakemake --lint

clean-results:
	rm -rf results/$(PROFILE) figures/$(PROFILE) logs/$(PROFILE)
