"""Token honesty, for every LLM agent: a crash's output reaches the model only as its last 1,500 characters.

The scripted model's broken code prints a long stderr (a head marker, 4,000 filler characters, then the
exception): the prompts after the crash must show the exception (the tail) and never the head or more
than 1,500 characters of the filler.
"""

from __future__ import annotations

import dataclasses

import pytest
from llm.fixtures import api_keys, fake_llm, run_agent  # noqa: F401 (fixtures)
from llm.toy_coder import BROKEN_ALGO, ToyCoder
from scripted_coder import ScriptedCoder
from test_ai_scientist_v1 import ToyScientist
from test_ai_scientist_v2 import ToyResearcher
from test_openevolve import ToyEvolver

FILLER = "#" * 4000
LOUD_BROKEN_ALGO = (
    "import sys\n\n\n"
    "def fit(X, y, config):\n"
    # the markers are built at run time, so that the code shown in later prompts does not contain them
    f"    sys.stderr.write('HEAD-OF-THE' + '-ERROR-OUTPUT\\n' + '#' * {len(FILLER)} + '\\n')\n"
    "    raise RuntimeError('TAIL-OF-THE' + '-ERROR-OUTPUT')\n\n\n"
    "def predict(X, w):\n"
    "    return (X[:, 0] > 0).astype(int)\n"
)

AGENTS = [
    ("aide", lambda: ToyCoder(drafts=("bug", "ok")), {"num_drafts": 1, "debug_prob": 1.0}),
    ("aira-mcts", lambda: ScriptedCoder(edits=["bug"]), {}),
    ("ai-scientist-v1", lambda: ToyScientist(plans={1: ["bug"]}), {"num_ideas": 1, "num_reflections": 1}),
    ("ai-scientist-v2", lambda: ToyResearcher(drafts=("bug",)), {"stage_budgets": (1.0, 0.0, 0.0, 0.0),
                                                                 "num_drafts": 1, "debug_prob": 1.0}),
    ("autoresearch", lambda: ScriptedCoder(ideas=["bug"]), {}),
    ("openevolve", lambda: ToyEvolver(evolves=("bug",)), {"num_islands": 1}),
    ("adaptive-search", lambda: ScriptedCoder(ideas=["bug"]), {"encoder": "none"}),
]


@pytest.mark.parametrize("agent, model, options", AGENTS, ids=[a[0] for a in AGENTS])
def test_prompts_show_only_the_last_1500_characters_of_a_crash(run_agent, fake_llm, agent, model, options):
    scripted = model()

    def loud(seen):
        said = scripted(seen)
        return dataclasses.replace(said, text=said.text.replace(BROKEN_ALGO, LOUD_BROKEN_ALGO))

    fake_llm.responder = loud
    run = run_agent(agent, steps=3, options=options)
    crashed = [s.step for s in run.steps if not s.success]
    assert crashed and "TAIL-OF-THE-ERROR-OUTPUT" in run.steps[crashed[0] - 1].error
    prompts = [seen.prompt for seen in fake_llm.completions]
    assert any("#" * 400 in p for p in prompts)  # the crash was shown to the model
    if agent != "openevolve":  # its analysis shows the first 500 characters of the tail, as the port's does
        assert any("TAIL-OF-THE-ERROR-OUTPUT" in p for p in prompts)
    for prompt in prompts:
        assert "HEAD-OF-THE-ERROR-OUTPUT" not in prompt
        assert "#" * 1501 not in prompt
