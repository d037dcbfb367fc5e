"""The agent protocol, version 1: everything an agent may ask of the harness, as JSON messages.

One message per line (a UTF-8 JSON object; JSON has no raw newline inside) over a stream socket: a
socketpair the agent's process inherits, or a UNIX socket for ``--agent=external``. The agent asks,
the harness answers, one request at a time::

    -> {"id": 1, "op": "hello", "args": {"version": 1}}
    <- {"id": 1, "ok": true, "result": {"version": 1, "task": {...}, ...}}
    -> {"id": 7, "op": "run_step", "args": {"action": "improve"}}
    <- {"id": 7, "ok": false, "error": {"type": "BudgetExhausted", "message": "all 5 steps used"}}

The models below are the schema (``docs/agent-protocol.md`` walks through it): unknown operations and
fields are refused, and what the harness keeps of an agent's words (plans, ideas, analyses, ``extra``)
is capped in size. None of it is a field that decides a score.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

VERSION = 1
# one message; a task's editable files are at most 8 MB each (editor.MAX_EDITABLE_BYTES)
MAX_MESSAGE_BYTES = 64 << 20
MAX_TEXT_CHARS = 100_000
MAX_LABEL_CHARS = 200
MAX_EXTRA_BYTES = 1 << 20
MAX_TRACEBACK_CHARS = 4000
MAX_CAUGHT = 100  # exceptions an agent may report having caught in its main loop

# error types a reply may carry; the Python client raises the same-named exception
BUDGET_EXHAUSTED = "BudgetExhausted"
RUN_STOPPED = "RunStopped"
LLM_CALL_ERROR = "LLMCallError"
BAD_REQUEST = "BadRequest"


class RequestError(ValueError):
    """The harness refused a request (unknown operation, bad arguments, a step that does not exist)."""


class ProtocolViolation(RuntimeError):
    """A message that is not a message: unparseable, too large, not an object. Ends the agent."""


def _cap(limit: int):
    def cut(text: str) -> str:
        if len(text) <= limit:
            return text
        return text[:limit] + f"\n[... {len(text) - limit} characters cut: the harness keeps at most {limit}]"

    return AfterValidator(cut)


Text = Annotated[str, _cap(MAX_TEXT_CHARS)]
Label = Annotated[str, _cap(MAX_LABEL_CHARS)]


def check_extra(value: dict[str, Any]) -> dict[str, Any]:
    """An ``extra`` the harness will keep: JSON data within MAX_EXTRA_BYTES; raises ValueError otherwise."""
    try:
        size = len(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"not JSON data: {exc}") from None
    if size > MAX_EXTRA_BYTES:
        raise ValueError(f"{size} bytes of JSON; the harness keeps at most {MAX_EXTRA_BYTES}")
    return value


Extra = Annotated[dict[str, Any], AfterValidator(check_extra)]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoArgs(_Args):
    pass


class HelloArgs(_Args):
    version: int


class StepArgs(_Args):
    step: int


class WholeFileEdit(_Args):
    kind: Literal["whole"]
    path: str
    content: str


class SearchReplaceEdit(_Args):
    kind: Literal["search_replace"]
    path: str
    search: str
    replace: str


class EditArgs(_Args):
    edits: list[Annotated[WholeFileEdit | SearchReplaceEdit, Field(discriminator="kind")]]


class SetFilesArgs(_Args):
    files: dict[str, str]


class EditOutcome(_Args):
    """What an earlier ``edit`` answered, sent back with the step it ran; recorded, never trusted."""

    applied: bool = True
    changed: list[Label] = []
    error: Text = ""


class RunStepArgs(_Args):
    action: Label
    plan: Text = ""
    parent: int | None = None
    edit: EditOutcome | None = None
    idea: Text | None = None
    analysis: Text = ""
    extra: Extra = {}


class AnnotateArgs(_Args):
    step: int
    analysis: Text | None = None
    extra: Extra | None = None


class ChatMessage(_Args):
    role: Literal["system", "user", "assistant"]
    content: str


class CompleteArgs(_Args):
    messages: list[ChatMessage] = Field(min_length=1)
    temperature: float | None = None
    max_output_tokens: int = Field(4096, ge=1)
    purpose: Label = ""


Outcome = Literal["finished", "budget_exhausted", "stopped", "crashed"]


class DoneArgs(_Args):
    """The agent's last message: how its ``run`` ended."""

    outcome: Outcome
    reason: Text = ""        # RunStopped's reason, or the crash's message
    error_type: Label = ""   # the exception's type, for a crash
    traceback: Annotated[str, _cap(MAX_TRACEBACK_CHARS)] = ""
    # exceptions the agent's main loop raised and the agent caught, as its port does (the run went on:
    # to the next idea, or to the final test on the best code); each "where: Type: message" + traceback
    caught: list[Annotated[str, _cap(MAX_TRACEBACK_CHARS)]] = Field([], max_length=MAX_CAUGHT)


ARGS: dict[str, type[_Args]] = {
    "hello": HelloArgs,
    "files": NoArgs,
    "baseline_files": NoArgs,
    "files_of": StepArgs,
    "edit": EditArgs,
    "set_files": SetFilesArgs,
    "run_step": RunStepArgs,
    "annotate": AnnotateArgs,
    "journal": NoArgs,
    "best": NoArgs,
    "steps": NoArgs,
    "llm.complete": CompleteArgs,
    "done": DoneArgs,
}


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int
    op: str
    args: dict[str, Any] = {}


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """One received line as an object; raises ProtocolViolation for anything else."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise ProtocolViolation(f"a message that is not JSON ({type(exc).__name__})") from None
    if not isinstance(value, dict):
        raise ProtocolViolation(f"a message that is not a JSON object ({type(value).__name__})")
    return value


def parse_request(message: dict[str, Any]) -> tuple[int, str, _Args]:
    """(id, op, validated arguments); raises ProtocolViolation without a usable id, else RequestError."""
    try:
        request = Request.model_validate(message)
    except ValidationError:
        raise ProtocolViolation("a request needs an integer 'id', a string 'op' and an object 'args'") from None
    model = ARGS.get(request.op)
    if model is None:
        raise RequestError(f"unknown operation {request.op[:MAX_LABEL_CHARS]!r}; operations: {', '.join(ARGS)}")
    try:
        return request.id, request.op, model.model_validate(request.args)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(part) for part in err["loc"]) or "args"
        raise RequestError(f"{request.op}: {where}: {err['msg']}") from None


def ok(request_id: int, result: dict[str, Any]) -> dict[str, Any]:
    return {"id": request_id, "ok": True, "result": result}


def error(request_id: int | None, error_type: str, message: str, **details: Any) -> dict[str, Any]:
    return {"id": request_id, "ok": False, "error": {"type": error_type, "message": message, **details}}
