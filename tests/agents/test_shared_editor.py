"""The shared editor as FML-bench's port has it (agents/code_editor.py at d336651), and ``editor=strict``.

Autoresearch drives it here (one idea call and one editor call per step) on the toy task, over the
loopback server; the expectations are read off the port's code: each whole file, then each SEARCH/REPLACE
block, applied on its own and skipped when it fails (305-352), the first occurrence replaced (336), files
of at most 500 newlines shown whole (218), blocklisted calls refused (38-63), no explanations asked for
(286); a failed edit still runs the parent's code and costs its step (its agents call _execute_val
whatever the edit did).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from llm.fake_llm import Say, Seen
from llm.fixtures import TOY, api_keys, fake_llm, run_agent  # noqa: F401 (fixtures)
from llm.toy_coder import GOOD_ALGO, file_block

from pytest_fmlbench.agentkit import load_agent_class

IDEA = "Train twice as long."


def block(path: str, search: str, replace: str) -> str:
    return f"### FILE: {path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE"


class Editing:
    """Ideas are fixed; editor calls are answered from ``replies`` in turn; every editor prompt is kept."""

    def __init__(self, *replies: str):
        self.replies = list(replies)
        self.edit_prompts: list[str] = []

    def __call__(self, seen: Seen) -> Say:
        if "propose the next experimental idea" in seen.prompt:
            return Say(IDEA)
        self.edit_prompts.append(seen.body["messages"][-1]["content"])
        reply = self.replies.pop(0) if self.replies else "No change."
        return reply if isinstance(reply, Say) else Say(reply)


def edit(run_agent, fake_llm, *replies, steps=1, editor=None, task=TOY):
    model = Editing(*replies)
    fake_llm.responder = model
    run = run_agent("autoresearch", steps=steps, options={"editor": editor} if editor else {}, task=task)
    assert run.record.status == "finished" and run.record.steps_used == steps
    return run, model


TWO_BLOCKS = (block("algorithm.py", '    for _ in range(config["epochs"]):', '    for _ in range(2 * config["epochs"]):')
              + "\n\n" + block("algorithm.py", "this line is not in the file", "x = 1"))


def test_of_two_search_blocks_the_one_that_matches_is_applied_the_other_skipped(run_agent, fake_llm):
    run, _ = edit(run_agent, fake_llm, TWO_BLOCKS)
    step = run.steps[0]
    assert 'range(2 * config["epochs"])' in run.files(1)["algorithm.py"]
    assert step.edit_applied and step.success
    assert step.edit_error == "applied in part; skipped: algorithm.py: SEARCH block not found in the file"


def test_a_reply_cut_off_at_its_length_limit_says_so_in_its_step(run_agent, fake_llm):
    # editor calls send no limit, as the port's: the model's own maximum cut these replies
    run, _ = edit(run_agent, fake_llm, Say(TWO_BLOCKS, finish_reason="length"),
                  Say("### FILE: algorithm.py\n```python\nimport num", finish_reason="length"), steps=2)
    first, second = run.steps
    assert first.edit_applied and first.edit_error == (
        "applied in part; skipped: algorithm.py: SEARCH block not found in the file; "
        "the reply was cut off at the model's output limit")
    assert not second.edit_applied
    assert second.edit_error.endswith("(the reply was cut off at the model's output limit)")
    assert run.record.status == "finished"


def test_a_search_text_found_twice_is_replaced_where_it_first_occurs_after_the_whole_files(run_agent, fake_llm):
    # the port applies every whole file first, then the blocks on what they wrote, whatever the reply's order
    doubled = GOOD_ALGO.rstrip() + "\n\n\nMARK = 1\nMARK = 1\n"
    run, _ = edit(run_agent, fake_llm, block("algorithm.py", "MARK = 1", "MARK = 2") + "\n\n"
                  + file_block("algorithm.py", doubled))
    # written as the port writes a whole file: without its trailing newline
    assert run.files(1)["algorithm.py"] == GOOD_ALGO.rstrip() + "\n\n\nMARK = 2\nMARK = 1"
    assert run.steps[0].edit_applied and run.steps[0].edit_error == ""


def test_when_every_block_is_skipped_the_parent_code_still_runs_and_costs_the_step(run_agent, fake_llm):
    run, model = edit(run_agent, fake_llm, block("algorithm.py", "not there", "x = 1"), "No code at all.", steps=2)
    first, second = run.steps
    assert not first.edit_applied and first.edit_error == "no block applied: algorithm.py: SEARCH block not found in the file"
    assert not second.edit_applied and second.edit_error.startswith("no usable code in the reply")
    # both ran the baseline's code, were measured, and were paid for with a step each
    assert run.files(1) == run.files(2) and first.success and second.success and first.metric == second.metric
    assert run.record.steps_used == 2 and len(model.edit_prompts) == 2


def test_a_blocklisted_call_is_refused_and_the_rest_of_the_reply_applied(run_agent, fake_llm):
    harmful = GOOD_ALGO.replace("import numpy as np\n", "import os\n\nimport numpy as np\n").replace(
        "    return w\n", "    os.system('echo hi')\n    return w\n", 1)
    run, _ = edit(run_agent, fake_llm, file_block("algorithm.py", harmful) + "\n\n"
                  + file_block("config.json", json.dumps({"lr": 0.5, "epochs": 40})) + "\n\n"
                  + block("algorithm.py", "    return w", "    shutil.rmtree('/tmp/somewhere')\n    return w") + "\n\n"
                  + block("algorithm.py", "def predict(X, w):", "def predict(X, w):  # model.eval() is no exec/eval call"))
    files, step = run.files(1), run.steps[0]
    assert files["algorithm.py"] == GOOD_ALGO.replace("def predict(X, w):", "def predict(X, w):  # model.eval() is no "
                                                      "exec/eval call")
    assert json.loads(files["config.json"]) == {"lr": 0.5, "epochs": 40}
    assert step.edit_applied and step.edit_error == (
        "applied in part; skipped: algorithm.py: whole file refused: it calls os.system(); "
        "algorithm.py: REPLACE block refused: it calls shutil.rmtree()")


def padded(tmp_path: Path, newlines: int) -> Path:
    """The toy task with an algorithm.py of exactly ``newlines`` newlines."""
    task = tmp_path / f"n{newlines}" / "toy_task"
    shutil.copytree(TOY, task)
    algo = task / "workspace" / "algorithm.py"
    text = algo.read_text()
    algo.write_text(text + "".join(f"# padding {i}\n" for i in range(newlines - text.count("\n"))))
    assert algo.read_text().count("\n") == newlines
    return task


@pytest.mark.parametrize("newlines, large", [(500, False), (501, True)])
@pytest.mark.parametrize("editor", ["port", "strict"])
def test_a_file_of_500_newlines_is_shown_whole_one_of_501_for_search_replace(run_agent, fake_llm, tmp_path,
                                                                            newlines, large, editor):
    _, model = edit(run_agent, fake_llm, "No change.", editor=editor, task=padded(tmp_path, newlines))
    prompt = model.edit_prompts[0]
    if editor == "port":
        section = re.findall(r"^## (.+)$", prompt.split("### FILE: algorithm.py", 1)[0], re.MULTILINE)[-1]
        assert section.startswith("Large files to change" if large else "Files to change")
        assert ("<<<<<<< SEARCH" in prompt.split("## Reply format", 1)[1]) == large
    else:
        assert ("`algorithm.py` is longer than 500 lines" in prompt) == large


def test_the_port_prompt_holds_its_sections_in_its_order_and_asks_for_no_plan(run_agent, fake_llm):
    run, model = edit(run_agent, fake_llm, file_block("algorithm.py", "raise RuntimeError('boom')\n"), "No change.",
                      steps=2)
    assert not run.steps[0].success
    prompt = model.edit_prompts[1]  # the debug retry: it shows the error too
    headings = re.findall(r"^## (.+)$", prompt, re.MULTILINE)
    assert headings == ["Task context", "Optimisation target", "Files to change (reply with each changed file complete)",
                        "Previous execution error", "Instruction", "Error", "Implementation guidelines", "Reply format"]
    assert not re.search(r"\bplan\b", prompt.split("## Implementation guidelines", 1)[1], re.IGNORECASE)
    assert "Write no explanations outside this format." in prompt
    assert "### FILE: config.json\n```json\n" in prompt and "### FILE: <path>\n```python\n" in prompt


def test_editor_strict_restores_the_earlier_editor(run_agent, fake_llm):
    doubled = GOOD_ALGO.rstrip() + "\n\nMARK = 1\nMARK = 1\n"
    harmful = GOOD_ALGO.replace("    return w\n", "    import os\n    os.system('echo hi')\n    return w\n", 1)
    run, model = edit(run_agent, fake_llm, TWO_BLOCKS,
                      file_block("algorithm.py", doubled) + "\n\n" + block("algorithm.py", "MARK = 1", "MARK = 2"),
                      "Plan: call a shell.\n\n" + file_block("algorithm.py", harmful), steps=3, editor="strict")
    first, second, third = run.steps
    # all or nothing: one SEARCH part missing rejects the whole reply
    assert not first.edit_applied and run.files(1)["algorithm.py"] == GOOD_ALGO
    assert first.edit_error == "algorithm.py: SEARCH block not found in the file"
    # a SEARCH part must match exactly once
    assert not second.edit_applied and second.edit_error == "algorithm.py: SEARCH block matches 2 places; include more context"
    # no blocklist; the plan before the code is the step's plan
    assert third.edit_applied and "os.system('echo hi')" in run.files(3)["algorithm.py"]
    assert third.plan == "call a shell."
    prompt = model.edit_prompts[0]
    assert "## Files you may change" in prompt and "Start with your plan in at most 5 sentences" in prompt
    assert run.record.agent_options["editor"] == "strict"


@pytest.mark.parametrize("agent", ["aira-mcts", "ai-scientist-v1", "ai-scientist-v2", "autoresearch", "openevolve",
                                   "adaptive-search"])
def test_every_agent_of_the_shared_editor_declares_the_option(agent):
    field = load_agent_class(agent).Options.model_fields["editor"]
    assert field.default == "port" and "strict" in field.description
