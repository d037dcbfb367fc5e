"""A user's agent, described by a process of its own: its name, whether it needs an LLM, its options.

The harness needs these before any run (the run's identity, the LLM preflight, one-line errors for
bad ``--agent-opt`` values), but importing the user's module here would run its top-level code in the
harness's process. A short-lived process, sandboxed like the agent's runs, imports it instead and
answers with plain data, which is checked here as any message from an agent is (``protocol``): the name
is a name (it reaches file names, tables and terminals), the options are named values (identifiers, each a
JSON scalar or a short flat list or object of scalars), the needs are flags.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, ValidationError

from ..agentkit.base import AgentOptions
from ..agentkit.loading import AgentLoadError
from .launcher import AgentLimits, AgentProcess
from .locate import AgentLocator
from .needs import AgentNeeds
from .outcome import one_line
from .protocol import ProtocolViolation, check_json_data, decode, encode, shown

DESCRIBE_TIMEOUT_S = 120.0
# the describe process's answer: a name, a few flags and options
MAX_DESCRIBE_BYTES = 1 << 20
AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
NAME_RULE = "a letter or a digit, then letters, digits, '.', '_' or '-', 64 at most"
OPTION_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
# the built-in agents have at most 22 options, strings of at most 10 characters, one tuple of 4 numbers
MAX_OPTIONS = 64
MAX_OPTION_ITEMS = 64
MAX_OPTION_CHARS = 4096  # a path may be that long
PROTOCOL_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")


def agent_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name an agent (one line), or None."""
    if AGENT_NAME.fullmatch(name):
        return None
    return f"its name '{shown(name)}' is not a name: {NAME_RULE} (set the class's `name`)"


def _check_name(name: str) -> str:
    problem = agent_name_problem(name)
    if problem:
        raise ValueError(problem)
    return name


def check_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` (an agent's, as JSON data) as the harness keeps them: at most MAX_OPTIONS, each named by an
    identifier and valued by a scalar, or a flat list or object of at most MAX_OPTION_ITEMS scalars; strings
    are texts of at most MAX_OPTION_CHARS. Raises ValueError with one line."""
    if len(options) > MAX_OPTIONS:
        raise ValueError(f"{len(options)} options; an agent has at most {MAX_OPTIONS}")
    for name, value in options.items():
        if not OPTION_NAME.fullmatch(name):
            raise ValueError(f"option '{shown(name)}' is not a name: a letter, then letters, digits or '_', 64 at most")
        if isinstance(value, dict):
            named = [key for key in value if not OPTION_NAME.fullmatch(key)]
            if named:
                raise ValueError(f"option {name!r}: its key '{shown(named[0])}' is not a name")
        items = list(value.values()) if isinstance(value, dict) else value if isinstance(value, list) else [value]
        if len(items) > MAX_OPTION_ITEMS:
            raise ValueError(f"option {name!r}: {len(items)} items; an option holds at most {MAX_OPTION_ITEMS}")
        for item in items:
            if isinstance(item, (dict, list)):
                raise ValueError(f"option {name!r}: a list or an object inside another; an option's are flat")
            if isinstance(item, str) and len(item) > MAX_OPTION_CHARS:
                raise ValueError(f"option {name!r}: a string of {len(item)} characters; an option holds at most "
                                 f"{MAX_OPTION_CHARS}")
    try:
        check_json_data(options, "options", max_depth=2)  # the strings' characters, the numbers
    except ProtocolViolation as exc:
        raise ValueError(str(exc)) from None
    return options


class DescribedOptions(AgentOptions):
    """A user agent's options as its own process validated them (its Options class stays over there)."""

    model_config = ConfigDict(extra="allow", frozen=True)


class _Reply(BaseModel):
    """What the describe process answers about a user's agent."""

    model_config = ConfigDict(extra="forbid")
    name: Annotated[str, AfterValidator(_check_name)]
    uses_llm: StrictBool
    options: Annotated[dict[str, Any], AfterValidator(check_options)]
    needs_workdir: StrictBool = False
    needs_gateway: StrictBool = False
    protocols: list[Annotated[str, Field(pattern=PROTOCOL_NAME.pattern)]] | None = Field(None, max_length=8)


class _Refusal(BaseModel):
    """The describe process could not load the agent, or its options: the line it says why."""

    model_config = ConfigDict(extra="forbid")
    error: str


@dataclass(frozen=True)
class AgentDescription:
    name: str
    uses_llm: bool
    options: AgentOptions
    needs: AgentNeeds = AgentNeeds()


def describe(locator: AgentLocator, pairs: list[str], *, sandboxed: bool, hidden: list[Path]) -> AgentDescription:
    """Raises AgentLoadError with one line (the same lines as loading the agent here would give)."""
    with tempfile.TemporaryDirectory(prefix="fmlbench-describe-") as tmp:
        log = Path(tmp) / "describe.log"
        proc = AgentProcess("describe", sandboxed=sandboxed, code=[Path(c) for c in locator.code], hidden=hidden,
                            hide_data=(), agent_limits=AgentLimits(), log_path=log)
        reply = None
        unusable = ""
        try:
            proc.conn.settimeout(DESCRIBE_TIMEOUT_S)
            proc.conn.sendall(encode({"locator": locator.to_json(), "pairs": list(pairs)}))
            line = proc.conn.makefile("rb").readline(MAX_DESCRIBE_BYTES + 1)
            if len(line) > MAX_DESCRIBE_BYTES:
                unusable = f"an answer of more than {MAX_DESCRIBE_BYTES} bytes"
            elif line.endswith(b"\n"):
                reply = decode(line)
        except OSError:
            reply = None
        except ProtocolViolation as exc:
            # nesting or a flood of values can only be in the options
            unusable = f"{exc}; an option is a scalar, or a flat list or object of scalars" if "values" in str(exc) \
                or "nested" in str(exc) else str(exc)
        finally:
            proc.close(grace_s=5.0)
        if unusable:
            raise AgentLoadError(f"agent {locator.spec!r}: its process answered with unusable data ({unusable})")
        if reply is None:
            lines = proc.output_tail(400).strip().splitlines()
            tail = one_line(lines[-1]) if lines else ""
            raise AgentLoadError(f"agent {locator.spec!r}: its process could not load it ({proc.exit_description()})"
                                 + (f": {tail}" if tail else ""))
    return _description(locator, reply)


def _description(locator: AgentLocator, reply: dict[str, Any]) -> AgentDescription:
    try:
        if "error" in reply:
            raise AgentLoadError(one_line(_Refusal.model_validate(reply).error))
        described = _Reply.model_validate(reply)
    except ValidationError as exc:
        err = exc.errors()[0]
        if err["type"] == "value_error" and err["loc"][:1] in (("name",), ("options",)):
            # the user's own agent: its name or an option's default is what to change
            raise AgentLoadError(one_line(f"agent {locator.spec!r}: {err['msg'].removeprefix('Value error, ')}")) \
                from None
        where = ".".join(shown(str(part)) for part in err["loc"])
        raise AgentLoadError(one_line(f"agent {locator.spec!r}: its process answered with unusable data "
                                      f"({where}: {err['msg']})")) from None
    needs = AgentNeeds(described.needs_workdir, described.needs_gateway,
                       None if described.protocols is None else tuple(described.protocols))
    return AgentDescription(described.name, described.uses_llm, DescribedOptions(**described.options), needs)
