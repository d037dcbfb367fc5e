"""A human baseline with a model's help: ``--agent=human``'s session, with the run's LLM gateway lent.

The person's shell gets the run's model behind the harness's gateway, as a coding tool gets it: a loopback
URL in ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` (the gateway adds the key outside the sandbox; the
shell holds only a placeholder), the model's name in ``FMLBENCH_MODEL``. Every call is the run's: recorded,
priced and held to ``--max-cost-usd`` / ``--max-tokens``. A run of its own agent name, so that records,
JUnit properties and tables never mix an assisted person with an unassisted one.
"""

from __future__ import annotations

from pytest_fmlbench_agents.human import HumanAgent


class HumanAssistedAgent(HumanAgent):
    """A person works the task in the coding agents' sandbox with the run's model at hand: an assisted human baseline."""

    name = "human-assisted"
    uses_llm = True
    needs_gateway = True

    def _banner(self) -> str:
        model = self._session.gateway["model"] if self._session.gateway else "none"
        return super()._banner() + (
            f"A model is at hand: {model}, through the run's gateway at $OPENAI_BASE_URL (OpenAI's API) or "
            "$ANTHROPIC_BASE_URL (Anthropic's); every call is recorded and counts toward the run's LLM budget.\n")
