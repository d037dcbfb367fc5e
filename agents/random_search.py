"""Random search over the hyper-parameter knobs a task declares in its editable JSON config."""

from __future__ import annotations

import json
import math

from pydantic import Field

from pytest_fmlbench.agentkit import Agent, AgentOptions
from pytest_fmlbench.editor import WholeFile
from pytest_fmlbench.session import Session
from pytest_fmlbench.spec import Knob


class RandomSearchOptions(AgentOptions):
    include_baseline: bool = Field(True, description="spend the first step on the baseline config")


def sample_knob(knob: Knob, rng) -> object:
    if knob.type == "choice":
        return rng.choice(knob.values)
    if knob.log:
        value = math.exp(rng.uniform(math.log(knob.low), math.log(knob.high)))
    else:
        value = rng.uniform(knob.low, knob.high)
    return int(round(value)) if knob.type == "int" else float(f"{value:.6g}")


class RandomSearchAgent(Agent):
    """Samples the hyper-parameter knobs the task declares, uniformly (log-uniform where marked), once per step."""

    name = "random-search"
    Options = RandomSearchOptions

    def run(self, session: Session) -> None:
        knobs = session.task.knobs
        if knobs is None:
            raise ValueError(f"task {session.task.id} declares no knobs; random-search has nothing to tune")
        base_config = json.loads(session.baseline_files[knobs.file])
        if self.options.include_baseline:
            session.run_step("baseline", plan="baseline configuration")
        while session.steps_left > 0:
            config = dict(base_config)
            sample = {name: sample_knob(knob, session.rng) for name, knob in sorted(knobs.space.items())}
            config.update(sample)
            edit = session.edit([WholeFile(knobs.file, json.dumps(config, indent=2) + "\n")])
            session.run_step("random", plan=json.dumps(sample, sort_keys=True), edit=edit, extra={"sample": sample})
