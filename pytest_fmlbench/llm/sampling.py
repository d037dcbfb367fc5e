"""Which sampling parameters a request carries, per model family, decided from the model's name.

FML-bench's ports (qrzou/FML-bench d336651) send every call that is not an editor call through
``agents/llm.py``'s ``get_response_from_llm``, which picks the parameters by substrings of the model
name, whatever the endpoint (OpenAI, OpenRouter, Gemini's compatible API), in this order:

- ``claude``: the temperature asked for, ``max_tokens``, no seed;
- ``gpt``: ``seed=0``; ``gpt-5`` then temperature 1 and ``max_completion_tokens``, any other ``gpt``
  the temperature asked for and ``max_tokens`` (``openai/gpt-5`` through OpenRouter included);
- ``o1`` / ``o3``: temperature 1, ``max_completion_tokens``, ``seed=0``, and the system prompt sent as a
  user message (the editor, which sends no temperature, keeps the system role);
- ``deepseek-reasoner``: neither temperature nor a length limit;
- ``qwen``: no temperature, ``max_tokens``;
- anything else (gemini, deepseek, llama): the temperature asked for and ``max_tokens``, no seed.

The port's editor (``code_editor.py``) sends none of them: no temperature, no limit, no seed. Our calls
say what they ask for (an agent's editor call asks for no temperature, no limit and no seed; its other
calls for 0.75, 8,192 tokens and seed 0), and ``wire_sampling`` turns that into what the port's code
would send for the model. Beyond the port: ``o4`` models are treated as ``o1``/``o3`` (the port raises
for them; OpenAI's API takes only temperature 1 from them), and an unknown family is the last case
above (the port raises).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

# the seed the port's llm.py sends to gpt and o-series models
PORT_SEED = 0

CapField = Literal["max_tokens", "max_completion_tokens"]

_O_SERIES = re.compile(r"o1|o3|(^|/)o4(-|$)")


@dataclass(frozen=True)
class WireSampling:
    """The sampling part of one request, as it goes out."""

    temperature: float | None = None  # None: not sent
    seed: int | None = None  # None: not sent
    cap_field: CapField | None = "max_tokens"  # None: the family takes no limit (the port sends none)
    system_as_user: bool = False  # o1/o3: the port sends its system prompt as a user message
    unsent: tuple[str, ...] = field(default=())  # what the call asked for that this family does not send

    def params(self, max_output_tokens: int | None) -> dict[str, float | int]:
        """The request fields: temperature, seed and the length limit, each only when it is sent."""
        out: dict[str, float | int] = {}
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.seed is not None:
            out["seed"] = self.seed
        if self.cap_field is not None and max_output_tokens is not None:
            out[self.cap_field] = max_output_tokens
        return out


def wire_sampling(model: str, *, temperature: float | None, seed: int | None,
                  max_output_tokens: int | None) -> WireSampling:
    """What the port's llm.py sends to ``model`` for a call asking for these (None: not asked for)."""
    asked = {"temperature": temperature, "seed": seed, "max_output_tokens": max_output_tokens}

    def family(temp: float | None, sent_seed: int | None, cap: CapField | None, system_as_user: bool = False):
        sent = {"temperature": temp, "seed": sent_seed, "max_output_tokens": cap and max_output_tokens}
        unsent = tuple(k for k, v in asked.items() if v is not None and sent[k] is None)
        return WireSampling(temp, sent_seed, cap, system_as_user, unsent)

    # a reasoning model samples at temperature 1: the port sends 1 wherever it would send a temperature
    reasoning_temperature = None if temperature is None else 1.0
    if "claude" in model:
        return family(temperature, None, "max_tokens")
    if "gpt" in model:
        if "gpt-5" in model:
            return family(reasoning_temperature, seed, "max_completion_tokens")
        return family(temperature, seed, "max_tokens")
    if _O_SERIES.search(model):
        # the port's llm.py sends the system prompt as a user message here, and always a temperature; its
        # editor sends the system role and no temperature: a call asking for none keeps the system role
        return family(reasoning_temperature, seed, "max_completion_tokens", system_as_user=temperature is not None)
    if model == "deepseek-reasoner":
        return family(None, None, None)
    if "qwen" in model:
        return family(None, None, "max_tokens")
    return family(temperature, None, "max_tokens")
