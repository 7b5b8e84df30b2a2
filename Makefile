# hpcscale: every target installs what it needs first; a second run skips work already done.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
HPCSCALE := $(VENV)/bin/hpcscale
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := openmpi-bin libopenmpi-dev cmake gcc g++ make python3-dev munge slurmctld slurmd slurm-client slurmdbd mariadb-server chromium
HOROVOD_ENV := HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1
# PyTorch for jobs/torch/, pinned: the CPU build (+cpu) is what this pin resolves to from the
# local wheels here; unpinned, pip pulls a CUDA build of several GB (elsewhere add
# --index-url https://download.pytorch.org/whl/cpu). No torchvision: it does not import beside it.
TORCH ?= torch==2.13.0
PYTEST_ARGS ?=
# Some images set PYTHONDONTWRITEBYTECODE=1: then every `hpcscale` the suite starts (hundreds)
# compiles the package again (~0.5 s each). Bytecode caches go to __pycache__ (git-ignored).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup system-packages venv core jobs test test-fast demo demo-torch bench lint docs clean

setup: system-packages core jobs ## venv in .venv, editable install with dev tools, TF + Horovod for jobs/

system-packages: ## Debian packages: Open MPI and build tools for Horovod, SLURM + MariaDB for the local cluster, Chromium for the report's browser test
	@if dpkg -s $(APT_PACKAGES) >/dev/null 2>&1; then echo "system packages: present"; else \
	  echo "system packages: installing $(APT_PACKAGES)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(APT_PACKAGES) >/dev/null; fi

$(PY):
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip wheel setuptools packaging

venv: $(PY)

core: $(PY) ## the hpcscale package (editable) with dev and bench tools
	@if $(PY) -c "import hpcscale, hpcscale.collect.traces.horovod._scan, pytest, xdist, hypothesis, ruff, reframe, playwright" 2>/dev/null && [ $(VENV)/.core-stamp -nt pyproject.toml ] && [ $(VENV)/.core-stamp -nt hpcscale/collect/traces/horovod/_scan.c ]; then echo "core: present"; else \
	  $(PIP) install -q -e '.[dev,bench]' 'numpy<2' && touch $(VENV)/.core-stamp; fi  # NumPy 1: TF 2.15

jobs: $(PY) system-packages ## TensorFlow 2.15.1 (CPU), Horovod 0.28.1 built against Open MPI + Gloo, mpi4py, PyTorch 2.13.0 (CPU)
	@if $(PY) -c "import tensorflow" 2>/dev/null; then echo "tensorflow: present"; else \
	  echo "tensorflow: installing tensorflow-cpu==2.15.1"; $(PIP) install -q tensorflow-cpu==2.15.1 mpi4py; fi
	@if $(PY) -c "import horovod.tensorflow" 2>/dev/null; then echo "horovod: present"; else \
	  echo "horovod: building 0.28.1 against TensorFlow (takes ~3 minutes)"; \
	  $(HOROVOD_ENV) $(PIP) install -q --no-cache-dir --no-build-isolation horovod==0.28.1; fi
	@$(PY) -c "import mpi4py" 2>/dev/null || $(PIP) install -q mpi4py
	@if $(PY) -c "import torch" 2>/dev/null; then echo "torch: present"; else \
	  echo "torch: installing $(TORCH) (CPU build, for jobs/torch/)"; $(PIP) install -q $(TORCH) 'numpy<2'; fi

test-fast: core ## the unit tier (tests/unit): no TensorFlow, SLURM or mpirun set-up, about a minute, for the edit-test loop
	$(PY) -m pytest tests/unit -q $(PYTEST_ARGS)

# `make test` in two phases: the suite on TEST_WORKERS pytest-xdist workers, tests sharing a real
# run or the SLURM cluster kept on one worker (tests/xdist_groups.py), then the `serial` tests
# alone. Both phases always run; the first failure's code is the exit code (5, "no test
# selected", is no failure: a PYTEST_ARGS selection may leave a phase empty).
TEST_WORKERS ?= 2
REQUIRE_ALL := HPCSCALE_REQUIRE_BROWSER=1 HPCSCALE_REQUIRE_SLURM=1 HPCSCALE_REQUIRE_TORCH=1
test: setup ## the whole suite: unit, real mpirun, real Horovod, real local SLURM, the report in headless Chromium
	$(REQUIRE_ALL) $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup -m "not serial" --durations=40 $(PYTEST_ARGS); a=$$?; \
	  $(REQUIRE_ALL) $(PY) -m pytest -m serial --durations=10 $(PYTEST_ARGS); b=$$?; \
	  [ $$a = 5 ] && a=0; [ $$b = 5 ] && b=0; exit $$(( a ? a : b ))  # setup installed Chromium and SLURM: missing is a failure

lint: core
	$(VENV)/bin/ruff check hpcscale jobs tests bench examples
	$(VENV)/bin/ruff format --check hpcscale jobs tests bench examples
	$(PY) -m hpcscale.reference --check

docs: core ## docs/reference.md written again from hpcscale/model/vocab.py
	$(PY) -m hpcscale.reference

demo: setup ## install, run the quickstart here (mpirun) and on a local SLURM cluster, write the report, compare the two
	$(HPCSCALE) submit campaigns/quickstart.yaml --backend local
	$(HPCSCALE) status quickstart
	eval "$$($(HPCSCALE) cluster up)" && \
	  $(HPCSCALE) submit campaigns/quickstart_slurm.yaml && \
	  $(HPCSCALE) status quickstart_slurm --watch; \
	  rc=$$?; $(HPCSCALE) cluster down; exit $$rc
	$(HPCSCALE) collect --timeline
	$(HPCSCALE) report
	$(HPCSCALE) compare quickstart quickstart_slurm

demo-torch: setup ## PyTorch DDP beside Horovod: the torch_vs_horovod campaign here (mpirun, 1 and 2 ranks, about 3 minutes), its report
	$(HPCSCALE) submit campaigns/torch_vs_horovod.yaml --backend local
	$(HPCSCALE) status torch_vs_horovod
	$(HPCSCALE) collect torch_vs_horovod
	$(HPCSCALE) report torch_vs_horovod

bench: setup ## each benchmark prints one JSON line (figures as ratios against a baseline run alongside)
	$(PY) bench/render_bench.py
	$(PY) bench/harness_overhead.py
	$(PY) bench/torch_harness_overhead.py
	$(PY) bench/timeline_bench.py
	$(PY) bench/torch_trace_bench.py
	$(PY) bench/trace_wrapper_bench.py
	$(PY) bench/submit_bench.py
	$(PY) bench/plan_bench.py
	$(PY) bench/report_bench.py
	$(PY) bench/probe_bench.py

clean:
	rm -rf hpcscale-runs .pytest_cache
