# Two commands on a fresh machine: `make demo` (a benchmark run) and `make test` (the project's tests).
# Both create .venv on first use. torch is pinned: 2.13.0 is a CPU build on the project's machines, and an
# unpinned torch would pull several GB of CUDA wheels.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[tasks,llm,dev]'
	touch $@

demo: setup
	$(PY) -m pytest task_suites --agent=random-search --steps=3 -n 2 -m lite --junitxml=reports/demo.xml

test: setup
	$(PY) -m pytest tests -n 2
