# make demo     install the package and train the demo classifier on the cpu backend
# make test     install system and Python test dependencies, then run the test suite
#               (the quick profile; PYTEST_ARGS='-m "" ' with HYPOTHESIS_PROFILE=exhaustive: all)
# make shaders  regenerate shaders/opcodes.glsl, recompile changed shaders/*.comp into
#               dualgrad/gpu/spirv/*.spv (glslc, or GLSLC=path)
# make bench    run the benchmarks (PyTorch as the peer where installed; bench/RESULTS.md)
# The targets use the active virtual environment, or else make .venv and use it
# (scripts/python-env.sh); PYTHON=... picks another interpreter.
ifeq ($(origin PYTHON), undefined)
PYTHON := $(shell scripts/python-env.sh)
endif
PIP ?= $(PYTHON) -m pip
PYTEST_ARGS ?=
# Test processes: a first run spends most of its time compiling (the cpu kernels in Numba,
# the shaders in lavapipe's LLVM), one core each; two keep a two-core machine busy.
TEST_WORKERS ?= 2

.PHONY: demo test test-deps shaders bench

demo:
	$(PIP) install -q .
	$(PYTHON) -m dualgrad demo

test-deps:
	./scripts/install-system-deps.sh
	$(PIP) install -q -e '.[test]'

test: test-deps
	$(PYTHON) -m pytest -q -n $(TEST_WORKERS) $(PYTEST_ARGS)

shaders:
	$(PYTHON) scripts/build_shaders.py

bench:
	$(PYTHON) bench/run.py
