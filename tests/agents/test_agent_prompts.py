"""Error context, for every LLM agent: a crash reaches the model as its port shows it.

The ports hand their agents the failed run's stderr (benchmark/executor.py 212), never its stdout, and
each cuts it its own way (hand-derived from the port's code):

- AIDE: the first 1,500 characters for a debug (aide/agent.py 412), the last 1,500 for the analysis (557);
- AIRA: all of it as the editor's error context (aira_mcts/agent.py 528), its first 1,500 characters in
  the debug instruction (512) and its first 300 in the analysis (598);
- AI Scientist v1, AI Scientist v2, Autoresearch, AdaptiveSearch, OpenEvolve: the last 1,500, marked '...'
  (their _truncate_error); Autoresearch and AdaptiveSearch show it twice in a debug retry (the instruction's
  Error section and the editor's error context); OpenEvolve's analysis shows its first 500 characters.
  (In these 3-step runs AI Scientist v2 and OpenEvolve pick no debug: only their analyses show the crash.)

The scripted model's broken code writes a marker to stdout, then a long stderr: a head marker, 4,000
filler characters, then the exception (the tail).
"""

from __future__ import annotations

import dataclasses
import re

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
    "    print('STDOUT-OF' + '-THE-RUN')\n"
    f"    sys.stderr.write('HEAD-OF-THE' + '-ERROR-OUTPUT\\n' + '#' * {len(FILLER)} + '\\n')\n"
    "    raise RuntimeError('TAIL-OF-THE' + '-ERROR-OUTPUT')\n\n\n"
    "def predict(X, w):\n"
    "    return (X[:, 0] > 0).astype(int)\n"
)


def head(n):
    return lambda err: err[:n]


def tail(n=1500):
    return lambda err: "..." + err[-n:]


# the longest run of the filler a prompt shows, when it shows the stderr's first / last 1,500 characters
FROM_HEAD = lambda err: longest_filler(err[:1500])  # noqa: E731
FROM_TAIL = lambda err: longest_filler(err[-1500:])  # noqa: E731

# (agent, scripted model, options, excerpts of the stderr some prompt must show, the longest run of the
# filler the prompts show)
AGENTS = [
    ("aide", lambda: ToyCoder(drafts=("bug", "ok")), {"num_drafts": 1, "debug_prob": 1.0},
     [head(1500), tail()], FROM_HEAD),
    ("aira-mcts", lambda: ScriptedCoder(edits=["bug"]), {},
     [lambda err: err, lambda err: f"## Error output\n{err[:1500]}\n\n", lambda err: f"Error: {err[:300]}\n\n"],
     lambda err: len(FILLER)),
    ("ai-scientist-v1", lambda: ToyScientist(plans={1: ["bug"]}), {"num_ideas": 1, "num_reflections": 1},
     [tail()], FROM_TAIL),
    ("ai-scientist-v2", lambda: ToyResearcher(drafts=("bug",)), {"stage_budgets": (1.0, 0.0, 0.0, 0.0),
                                                                 "num_drafts": 1, "debug_prob": 1.0},
     [tail(), lambda err: f"Error output:\n```\n{tail()(err)}\n```"], FROM_TAIL),
    ("autoresearch", lambda: ScriptedCoder(ideas=["bug"]), {}, [tail(), lambda err: f"## Error\n```\n{tail()(err)}\n```"],
     FROM_TAIL),
    ("openevolve", lambda: ToyEvolver(evolves=("bug",)), {"num_islands": 1},
     [lambda err: f"Error output:\n```\n{tail()(err)[:500]}\n```"], lambda err: longest_filler(tail()(err)[:500])),
    ("adaptive-search", lambda: ScriptedCoder(ideas=["bug"]), {"encoder": "none"},
     [tail(), lambda err: f"## Error\n```\n{tail()(err)}\n```"], FROM_TAIL),
]


def longest_filler(text: str) -> int:
    return max((len(m) for m in re.findall(r"#{2,}", text)), default=0)


@pytest.mark.parametrize("agent, model, options, shown, longest", AGENTS, ids=[a[0] for a in AGENTS])
def test_prompts_show_a_crash_as_the_port_does(run_agent, fake_llm, agent, model, options, shown, longest):
    scripted = model()

    def loud(seen):
        said = scripted(seen)
        return dataclasses.replace(said, text=said.text.replace(BROKEN_ALGO, LOUD_BROKEN_ALGO))

    fake_llm.responder = loud
    run = run_agent(agent, steps=3, options=options)
    crashed = [s for s in run.steps if not s.success]
    assert crashed
    # the step keeps the run's stderr apart from its stdout (the combined output's tail stays in `error`)
    err = crashed[0].stderr
    assert err.startswith("HEAD-OF-THE-ERROR-OUTPUT\n" + FILLER + "\n") and "TAIL-OF-THE-ERROR-OUTPUT" in err[-200:]
    assert "STDOUT-OF-THE-RUN" not in err and "TAIL-OF-THE-ERROR-OUTPUT" in crashed[0].error
    assert "STDOUT-OF-THE-RUN" in (run.dir / "logs").joinpath(f"step_{crashed[0].step:04d}_val.log").read_text()
    prompts = [seen.prompt for seen in fake_llm.completions]
    for excerpt in shown:
        assert any(excerpt(err) in p for p in prompts), excerpt(err)[:80]
    assert max(longest_filler(p) for p in prompts) == longest(err)
    assert not any("STDOUT-OF-THE-RUN" in p for p in prompts)
    if agent not in ("aide", "aira-mcts"):  # the others never show the head
        assert not any("HEAD-OF-THE-ERROR-OUTPUT" in p for p in prompts)
