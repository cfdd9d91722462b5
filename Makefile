# One-command setup. Every target creates .venv when it is missing and installs the project.
#   make test        CI's command: unit tests + lint + the smoke pipeline, its faults, notebooks
#   make test-all    make test and the long end-to-end tests (tests/e2e/long); make publish runs it
#   make check       a contributor's loop: unit tests and lint, no pipeline (a few minutes)
#   make test-cluster  the smoke pipeline through a real single-node SLURM (as root; CI too)
#   make reproduce   the default replication (profile mini; PROFILE=... for another)
#   make article     the replication article from the published results (docs/article/)
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
# The torch build: the CPU wheel by default (it lies on the team's machines). Another build:
# TORCH='torch==X.Y.Z --index-url URL' (the README's "Installing"). Changing TORCH reinstalls.
TORCH ?= torch==2.13.0
TORCH_MARK := $(VENV)/.torch-$(shell printf '%s' '$(TORCH)' | cksum | cut -d' ' -f1)
PROFILE ?= mini
CORES ?= all
# more Snakemake arguments for `make reproduce`, e.g. SNAKEMAKE_ARGS='--profile profiles/slurm'
# or '--resources gpu=2' (README, "Running on a GPU or a cluster")
SNAKEMAKE_ARGS ?=
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: help install kernel-user test test-all test-cluster check reproduce publish report bench lab article
.PHONY: lint lock clean-results

help:
	@sed -n '2,7p' Makefile

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(TORCH_MARK): | $(BIN)/python
	rm -f $(VENV)/.torch-*
	$(BIN)/python -m pip install --quiet $(TORCH)
	touch $@

# every other package at the version constraints.txt pins (the versions the published runs used)
$(VENV)/.installed: pyproject.toml constraints.txt $(TORCH_MARK)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[test]"
	$(BIN)/python -m ipykernel install --sys-prefix --name lsa --display-name "Python (lsa)"
	touch $@

# the kernel for a JupyterLab or JupyterHub outside .venv, registered for your user on request
# only, named after this clone (its folder and a checksum of its path), so that a second clone
# (a teacher's copy, a student's) never takes over the first one's kernel
CLONE_ID := $(shell printf '%s' "$(CURDIR)" | cksum | cut -d' ' -f1)
CLONE_NAME := $(shell basename "$(CURDIR)")
kernel-user: install
	$(BIN)/python -m ipykernel install --user --name "lsa-$(CLONE_ID)" \
	  --display-name "Python (lsa: $(CLONE_NAME))"

install: $(VENV)/.installed

# the suite without tests/e2e/long (marker long: the GPU check's steps on the CPU, the BABILong
# sources, the study's smoke profile, the multi-process and spaced-interpreter cluster runs),
# which test-all adds; publish runs test-all first (CONTRIBUTING.md, "Test tiers")
# In two parts: the tests that do not read the smoke pipeline's runs (marker smoke_runs, set
# by the fixture smoke_pipeline: tests/conftest.py) spread over TEST_WORKERS processes
# (pytest-xdist, a test file to a process), then those that do in one process, where the
# pipeline runs once in the real results/smoke; both parts always run, and either failing fails it
TEST_WORKERS ?= auto
test: install
	@rc=0; \
	$(BIN)/python -m pytest -m "not long and not smoke_runs" -n $(TEST_WORKERS) \
	  --dist loadfile || rc=$$?; \
	$(BIN)/python -m pytest -m "not long and smoke_runs" || rc=$$?; \
	exit $$rc

test-all: test
	$(BIN)/python -m pytest -m long

# tests/e2e/test_slurm_local.py, which test and check skip (they start no daemon): Debian's SLURM
# installed where missing and started (scripts/slurm_local.sh), the smoke profile run through
# profiles/slurm and compared with the local smoke run, the daemons stopped; LSA_REQUIRE_SLURM
# makes a machine that cannot install or start SLURM fail the test instead of skipping it
test-cluster: install
	LSA_REQUIRE_SLURM=1 $(BIN)/python -m pytest tests/e2e/test_slurm_local.py

check: install
	$(BIN)/python -m pytest -m "not slow" -q -n $(TEST_WORKERS) --dist loadfile
	$(BIN)/ruff check .

# rewrite constraints.txt from this environment (torch and its CUDA wheels stay TORCH's choice)
lock: | $(BIN)/python
	@{ echo "# make lock: the versions of every package make install installs but torch (TORCH"; \
	  echo "# chooses its build); pip install -c constraints.txt -e '.[test]' uses them."; \
	  $(BIN)/python -m pip freeze --exclude-editable | grep -viE '^(torch|triton|nvidia-|lsa)([=-]|$$)'; \
	} > constraints.txt

reproduce: install
	@start=$$(date +%s); set -e; \
	$(BIN)/python -m lsa fetch books; \
	$(BIN)/python -m lsa pipeline --profile $(PROFILE) --cores $(CORES) -- $(SNAKEMAKE_ARGS); \
	$(BIN)/python -m lsa check --profile $(PROFILE); \
	$(BIN)/python -m lsa timings --profile $(PROFILE) --record-since $$start --cores "$(CORES)"; \
	$(BIN)/python -m lsa compare --profile $(PROFILE)

# a committed snapshot of the last `make reproduce` (docs/results/<profile>/)
publish: test-all
	$(BIN)/python -m lsa publish --profile $(PROFILE)

# an HTML report of the last run (runtimes, rules, provenance) made by Snakemake itself
report: install
	$(BIN)/snakemake --config profile=$(PROFILE) --report results/$(PROFILE)/snakemake_report.html

bench: install
	$(BIN)/python -m lsa bench misalign

lab: install
	$(BIN)/jupyter lab notebooks/

# the replication article from the published snapshots alone (docs/article/index.md; nothing
# trained; publishing writes it too), its static site (build/article/html/) and its PDF
# (build/article/article.pdf, Chromium's print); the article extra comes with the test one
article: install
	$(BIN)/python -m lsa article --site

# ruff and nbstripout through the pre-commit hooks (.pre-commit-config.yaml), then Snakemake's
lint: install
	$(BIN)/pre-commit run --all-files
	$(BIN)/snakemake --lint

clean-results:
	rm -rf results/$(PROFILE) figures/$(PROFILE) logs/$(PROFILE)
