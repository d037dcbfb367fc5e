"""The original's task text (prompt.json) instead of ours, where an agent is asked for it: full-profile tasks only.

The texts below are stand-ins written for this test; the original's own prompt.json files are read from the
user's checkout of qrzou/FML-bench and never ship here.
"""

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_fmlbench.agentkit import AgentLoadError, CodeEditor, load_agent_class, parse_agent_options, task_context
from pytest_fmlbench.spec import load_task

SUITES = Path(__file__).parents[2] / "task_suites"
FULL = load_task(SUITES / "causality_causalml" / "full" / "task.yaml").spec
SMALL = load_task(SUITES / "causality_causalml" / "task.yaml").spec
STAND_IN = {"system": "You are a stand-in persona.", "task_description": "Stand-in description of the causal task."}


@pytest.fixture
def checkout(tmp_path) -> Path:
    folder = tmp_path / "FML-bench" / "ml_tasks" / FULL.original.task
    folder.mkdir(parents=True)
    (folder / "prompt.json").write_text(json.dumps(STAND_IN))
    return tmp_path / "FML-bench"


@pytest.mark.parametrize("agent", ["aide", "ai-scientist-v1", "openevolve"])
def test_the_option_replaces_the_task_text_of_a_full_task_only(checkout, agent):
    cls = load_agent_class(agent)
    options = parse_agent_options(cls, [f"port_task_text={checkout}"])
    # read here, in the harness's process: the agent's process gets the texts with its options
    assert cls.Options.model_validate(options.model_dump(mode="json")) == options
    full, small = SimpleNamespace(task=FULL), SimpleNamespace(task=SMALL)
    assert task_context(full, options) == STAND_IN["task_description"]
    assert task_context(full) == task_context(full, cls.Options()) != STAND_IN["task_description"]
    assert task_context(small, options) == task_context(small)  # the original's data and files are not these
    # the editor's "Task context" section shows it
    prompt = CodeEditor(full, options=options).messages("Do it.", {"a.py": "x = 1\n"})[1]["content"]
    assert prompt.startswith("## Task context\n" + STAND_IN["task_description"] + "\n\n## Optimisation target")


def test_a_path_without_prompts_is_one_line(tmp_path):
    with pytest.raises(AgentLoadError, match="port_task_text: .*no ml_tasks/\\*/prompt.json under"):
        parse_agent_options(load_agent_class("aide"), [f"port_task_text={tmp_path}"])


def test_ai_scientist_v1s_idea_persona_is_the_originals_system_line(checkout):
    cls = load_agent_class("ai-scientist-v1")
    scientist = sys.modules[cls.__module__]._Scientist
    given = scientist(SimpleNamespace(task=FULL), parse_agent_options(cls, [f"port_task_text={checkout}"]))
    assert given.generator.system == STAND_IN["system"]
    ours = scientist(SimpleNamespace(task=FULL), cls.Options())
    assert ours.generator.system.startswith("You are an ambitious AI PhD student")
