# Two commands on a fresh machine: `make bench` and `make test`. Both build .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The TensorFlow wheel for this machine: tensorflow[and-cuda] where an NVIDIA GPU answers,
# tensorflow-tpu on a TPU VM, tensorflow-cpu elsewhere. Override with `make TF_EXTRA=...`.
TF_EXTRA ?= $(shell if nvidia-smi -L >/dev/null 2>&1; then echo gpu; \
	elif ls /dev/accel0 >/dev/null 2>&1; then echo tpu; else echo cpu; fi)
STAMP := $(VENV)/.installed-$(TF_EXTRA)
BENCH_ARGS ?= --tpu-workload-size=default
# Plugins whose option names pytest-tpu once clashed with; tests load them from here only
# (tests/test_neighbours.py), so that they do not load, and warn, in every other session.
NEIGHBOURS := $(VENV)/neighbours
# matplotlib (the `plot` extra), for the tests of --tpu-report-plot only (tests/conftest.py puts
# it on their path). Installed in .venv, Keras imports matplotlib.pyplot whenever TensorFlow is
# imported: 0.8 s of `import tensorflow`'s 5.5 s, in each of the ~70 TensorFlow processes a test
# run starts.
PLOT := $(VENV)/plot
# pytest-benchmark's own suite with and without pytest-tpu (`make benchmark-compat`).
COMPAT_VENV := .venv-compat
COMPAT_DIR := build/benchmark-compat

.PHONY: install compiled test lint typecheck unit bench dist benchmark-compat load-cost clean

install: $(STAMP)

# pip 25.1 or later reads PEP 735 dependency groups (`--group dev`): upgrade pip first.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=25.1"
	$(BIN)/python -m pip install --quiet -e ".[$(TF_EXTRA)]" --group dev
	$(BIN)/python -m pip install --quiet --no-deps --upgrade --target $(NEIGHBOURS) \
		pytest-parallel pytest-reporter
	$(BIN)/python -m pip install --quiet --upgrade --target $(PLOT) "matplotlib>=3.8"
	rm -f $(VENV)/.installed-* && touch $@

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

# Where PYTHONDONTWRITEBYTECODE is set (this project's machines set it), Python compiles the
# plugin's modules from source in every process that imports them (a --compare-ref session's
# modules: 0.95 s to import from source, 0.65 s compiled, measured on a busy machine), and a test
# run starts hundreds of pytest processes. pip compiles an installed wheel; an editable install
# needs this, run again as sources change. (On CI's step times no gain was visible beside the
# day-to-day spread.)
compiled: install
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m compileall -q pytest_tpu

# The slowest tests are listed at the end: `make test` must stay well under CI's 15 minutes, and
# a loaded machine makes some of them much slower (session 43: 700 s one day, 950 s the next;
# session 52: 348 s and 571 s for the two steps, then 403 s and 464 s with ten tests that judge
# no timing moved to the parallel step; session 72, on a VM where `import tensorflow` took 9.4 s:
# 687 s and 785 s, against 296 s and 330 s on session 70's). The timed step on both cores took
# 435 s there, but 3 of its 70 tests failed once and one failed twice: they stay alone.
# Session 78: 406 s and 561 s; the parallel step on three workers took 448 s, at 195 % of the
# two cores: it is bound by the processor, and more workers do not shorten it.
# Tests that judge no timing run first, on both cores; then most tests that judge real timings,
# two at a time and beside nothing else (session 81: 234-315 s in ten runs, against 473 s one
# at a time: most of their time is waiting); then, one at a time, those that read the machine
# itself and the few whose path a test beside them changed (tests/conftest.py). Session 81's
# clean-clone runs took 12:36 and 16:29 (the first step 402 s and 542 s as the VM got busier).
# Session 82: the first step 414 and 426 s against 452 and 496 s (alternated with the code
# before), with matplotlib out of .venv (PLOT) and one cluster session where there were three.
# A timed test that fails is run once more (pytest-rerunfailures): what a neighbour's burst does
# to one session is a path the gate may take, and clean-clone CI runs of sessions 51-54 failed
# again and again on one or two such paths out of 116 tests; failing twice running is a failure.
# The log shows every rerun ("R", "N rerun") and what failed it, under "why tests were run
# again" (tests/conftest.py): read them, they are the paths a test does not yet foresee.
unit: install compiled
	$(BIN)/python -m pytest tests -p no:cacheprovider -m "not timed" -n 2 --durations=10
	$(BIN)/python -m pytest tests -p no:cacheprovider -m "timed and not alone" -n 2 --reruns 1 \
		--durations=10
	$(BIN)/python -m pytest tests -p no:cacheprovider -m "timed and alone" --reruns 1 \
		--durations=5

test: lint typecheck unit

bench: install compiled
	$(BIN)/python -m pytest benchmarks $(BENCH_ARGS)

# The sdist and wheel, checked as PyPI will render them.
dist: install
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

# Minutes, not seconds: not part of `make test`. Its own environment, so pytest-benchmark's test
# dependencies stay out of .venv; no TensorFlow there (the plugin must load without it).
$(COMPAT_VENV)/.installed: pyproject.toml
	test -x $(COMPAT_VENV)/bin/python || $(PYTHON) -m venv $(COMPAT_VENV)
	$(COMPAT_VENV)/bin/python -m pip install --quiet --upgrade "pip>=25.1"
	$(COMPAT_VENV)/bin/python -m pip install --quiet -e . pytest-xdist
	touch $@

# The version is read once the environment exists: make expands a recipe before running it.
benchmark-compat: $(COMPAT_VENV)/.installed
	$(eval BENCH_VERSION := $(shell $(COMPAT_VENV)/bin/python -c \
		"from importlib.metadata import version; print(version('pytest-benchmark'))"))
	$(COMPAT_VENV)/bin/python -m pip install --quiet \
		"pytest-benchmark[aspect,elasticsearch,histogram]==$(BENCH_VERSION)" \
		freezegun nbmake pygal pygaljs setuptools
	rm -rf $(COMPAT_DIR) && mkdir -p $(COMPAT_DIR)
	$(COMPAT_VENV)/bin/python -m pip download --quiet --no-binary :all: --no-deps \
		--dest $(COMPAT_DIR) "pytest-benchmark==$(BENCH_VERSION)"
	$(COMPAT_VENV)/bin/python experiments/benchmark_compat.py $(COMPAT_DIR) \
		$(COMPAT_DIR)/pytest_benchmark-$(BENCH_VERSION).tar.gz

# pytest --help and a plain session, with and without the plugin (experiments/load_cost.py).
load-cost: install
	$(BIN)/python experiments/load_cost.py

clean:
	rm -rf $(VENV) $(COMPAT_VENV) .mypy_cache .ruff_cache .pytest_cache build dist
