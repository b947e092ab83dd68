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

.PHONY: install test lint typecheck unit bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[$(TF_EXTRA),dev]"
	rm -f $(VENV)/.installed-* && touch $@

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

unit: install
	$(BIN)/python -m pytest tests -p no:cacheprovider

test: lint typecheck unit

bench: install
	$(BIN)/python -m pytest benchmarks $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
