"""The agent protocol, version 2: everything an agent may ask of the harness, as JSON messages.

One message per line (a UTF-8 JSON object; JSON has no raw newline inside) over a stream socket: a
socketpair the agent's process inherits, or a UNIX socket for ``--agent=external``. The agent asks,
the harness answers, one request at a time::

    -> {"id": 1, "op": "hello", "args": {"version": 2}}
    <- {"id": 1, "ok": true, "result": {"version": 2, "task": {...}, ...}}
    -> {"id": 7, "op": "run_step", "args": {"action": "improve"}}
    <- {"id": 7, "ok": false, "error": {"type": "BudgetExhausted", "message": "all 5 steps used"}}

The models below are the schema (``docs/agent-protocol.md`` walks through it). None of it is a field that
decides a score. This module is where an agent's data enters the harness, and it is checked here once,
so that no record, terminal, table or report behind it meets a value it cannot take:

**A protocol violation** (``ProtocolViolation``: the agent is ended with one line; its recorded steps stay
and the best code so far gets its final test) is a line that is not a message of this protocol's data:

- more than ``MAX_MESSAGE_BYTES``, not UTF-8, not JSON, not an object, more than ``MAX_JSON_VALUES`` values
  and keys (counted as its definition says), nested more than ``MAX_MESSAGE_DEPTH`` levels, a number that is
  not finite (``NaN``, ``Infinity``, ``1e999``) or an integer outside 64 bits, a string that is not Unicode (a
  lone surrogate, ``"\\ud800"``), a request without an integer ``id``, a string ``op`` and an object ``args``;
- a character a field of its kind never holds: in a text (``action``, ``plan``, ``idea``, ``analysis``, an
  edit's paths and error, ``purpose``, ``reason``, ``error_type``, ``traceback``, ``caught``, ``extra``'s
  keys and strings) a control character other than newline and tab (C0, DEL, C1: an ESC that would steer
  a terminal, a carriage return that would overwrite a line); ``extra`` nested more than ``MAX_DEPTH`` levels.

**A refused request** (``RequestError``, answered ``BadRequest``; the agent goes on) is protocol data the
harness does not serve: an unknown operation or field, a wrong type, a missing field, a step that does
not exist, an unspoken version, a value out of its range, a request out of order, or a field over a cap
the harness refuses rather than cuts (``extra`` over ``MAX_EXTRA_BYTES``, ``caught`` over ``MAX_CAUGHT``
items, an edit of more than ``MAX_EDITS`` parts, ``extra`` keys over ``MAX_LABEL_CHARS``).

**Texts over their length are kept, cut** at ``MAX_TEXT_CHARS`` (labels at ``MAX_LABEL_CHARS``, tracebacks
and caught errors at ``MAX_TRACEBACK_CHARS``) with a note of how much was cut. An edit the editor cannot
take (a file over ``editor.MAX_EDITABLE_BYTES``, one holding NUL, Python that does not parse: a coding tool's
working copy may hold any of these) is a failed edit, not an error.

The Python client (``transport``) sends what the model or the tool it drives gave it as texts the harness
takes (``clean_args``: control characters spelt out, lone surrogates replaced), so an honest agent never
breaks these rules by quoting a model's reply or a tool's output; another client must keep them itself.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, ValidationInfo
from pydantic_core import from_json

from ..safe_text import code_points

VERSION = 2
# versions a client may speak: version 2 added ``run_baseline``; a version-1 client is served as before
SPOKEN = (1, 2)
# the first version that has each operation added after version 1
SINCE = {"run_baseline": 2}
# One request. The largest an honest agent sends is ``set_files`` of every editable file: the suite's tasks
# have at most 6, each at most editor.MAX_EDITABLE_BYTES (1 MiB; the largest a task starts from is about 100
# KB), and JSON's escapes (quotes, backslashes, newlines) at most double a source file: 12 MiB, plus a step's
# texts and ``extra`` (about 2.5 MB). Replies, written by the harness, are not bound by it (``decode_reply``).
MAX_MESSAGE_BYTES = 16 << 20
MAX_TEXT_CHARS = 100_000
MAX_LABEL_CHARS = 200
MAX_EXTRA_BYTES = 1 << 20
MAX_TRACEBACK_CHARS = 4000
MAX_CAUGHT = 100  # exceptions an agent may report having caught in its main loop
MAX_EDITS = 1000  # parts of one edit (whole files, SEARCH/REPLACE blocks)
# levels of nesting of the free JSON an agent sends (``extra``): well below every reader's limit (pydantic-
# core's JSON reader stops at 200 levels, Python's json near 1000, the record's mending at 100)
MAX_DEPTH = 32
# a message's own levels above its ``extra`` (the message, its ``args``)
MAX_MESSAGE_DEPTH = MAX_DEPTH + 2
# What parsing one message may build, counted before it is parsed: its commas, opening brackets and strings
# (outside strings), about one for each value or key and one more for each array or object. Room for a whole
# ``extra`` at its cap (at least 2 bytes a value, "0,") and the rest. Parsing costs memory by the value (an
# empty object is 64 bytes for its 3 bytes "{},"), so this bounds a message's objects to about 40 MB
MAX_JSON_VALUES = (MAX_EXTRA_BYTES >> 1) + (1 << 16)
# integers every JSON reader takes exactly
INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1

# error types a reply may carry; the Python client raises the same-named exception
BUDGET_EXHAUSTED = "BudgetExhausted"
RUN_STOPPED = "RunStopped"
LLM_CALL_ERROR = "LLMCallError"
BAD_REQUEST = "BadRequest"


class RequestError(ValueError):
    """The harness refused a request (unknown operation, bad arguments, a step that does not exist)."""


class ProtocolViolation(RuntimeError):
    """A message that is not a message of the protocol (see the module's docstring). Ends the agent."""


# what a text never holds: C0 controls but tab and newline, DEL, C1 controls, lone surrogates
_NOT_IN_TEXT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_NOT_UNICODE = re.compile("[\ud800-\udfff]")
TEXT_RULE = "texts hold no control characters but newline and tab"


def character(char: str) -> str:
    """A character as a message names it, never as itself: ``U+001B``."""
    return f"U+{ord(char):04X}"


def text_problem(text: str) -> str | None:
    """Why ``text`` is not a text the harness keeps (its first forbidden character), or None."""
    bad = _NOT_IN_TEXT.search(text)
    if bad is None:
        return None
    what = "a lone surrogate, not Unicode" if _NOT_UNICODE.match(bad.group()) else "a control character"
    return f"{character(bad.group())} ({what}); {TEXT_RULE}"


def _characters(pattern: re.Pattern, rule: str):
    def check(value: str, info: ValidationInfo) -> str:
        bad = pattern.search(value)
        if bad is not None:
            raise ProtocolViolation(f"{info.field_name}: {character(bad.group())} in a string; {rule}")
        return value

    return AfterValidator(check)


def _cap(limit: int):
    def cut(text: str) -> str:
        if len(text) <= limit:
            return text
        return text[:limit] + f"\n[... {len(text) - limit} characters cut: the harness keeps at most {limit}]"

    return AfterValidator(cut)


_TEXT = _characters(_NOT_IN_TEXT, TEXT_RULE)
Text = Annotated[str, _TEXT, _cap(MAX_TEXT_CHARS)]
Label = Annotated[str, _TEXT, _cap(MAX_LABEL_CHARS)]
Traceback = Annotated[str, _TEXT, _cap(MAX_TRACEBACK_CHARS)]
# a file's content: any Unicode; what no source file holds (NUL) the editor refuses, as a failed edit
Code = Annotated[str, _characters(_NOT_UNICODE, "a file's content holds no lone surrogate")]
# what a model is asked: passed on as it is, once it is Unicode
Prompt = Annotated[str, _characters(_NOT_UNICODE, "a string holds no lone surrogate")]


def check_json_data(value: Any, where: str, max_depth: int = MAX_DEPTH) -> None:
    """``value`` is JSON data the harness keeps as it is: objects with text keys of at most MAX_LABEL_CHARS,
    arrays, texts, finite numbers, integers within 64 bits, at most ``max_depth`` levels. Raises
    ProtocolViolation for what no JSON message carries, ValueError for a key over its length."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
            for key in item:
                if not isinstance(key, str):
                    raise ValueError(f"{where}: a key that is not a string ({type(key).__name__})")
                problem = text_problem(key)
                if problem:
                    raise ProtocolViolation(f"{where}: a key holding {problem}")
                if len(key) > MAX_LABEL_CHARS:
                    raise ValueError(f"{where}: a key of {len(key)} characters; keys hold at most {MAX_LABEL_CHARS}")
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            _check_scalar(item, where)
            continue
        if depth > max_depth:
            raise ProtocolViolation(f"{where}: nested more than {max_depth} levels deep")
        for child in children:
            if isinstance(child, (dict, list, tuple)):
                stack.append((child, depth + 1))
            else:
                _check_scalar(child, where)


def _check_scalar(item: Any, where: str) -> None:
    if isinstance(item, str):
        problem = text_problem(item)
        if problem:
            raise ProtocolViolation(f"{where}: a string holding {problem}")
    elif isinstance(item, bool) or item is None:
        return
    elif isinstance(item, int):
        if not INT_MIN <= item <= INT_MAX:
            raise ProtocolViolation(f"{where}: an integer outside 64 bits")
    elif isinstance(item, float):
        if not math.isfinite(item):
            raise ProtocolViolation(f"{where}: a number that is not finite ({item})")
    else:
        raise ValueError(f"{where}: not JSON data ({type(item).__name__})")


def check_extra(value: dict[str, Any]) -> dict[str, Any]:
    """An ``extra`` the harness will keep: JSON data (see check_json_data) within MAX_EXTRA_BYTES; raises
    ProtocolViolation for content no message carries, ValueError for one over a cap."""
    check_json_data(value, "extra")
    size = len(json.dumps(value, ensure_ascii=False))
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
    path: Label
    content: Code


class SearchReplaceEdit(_Args):
    kind: Literal["search_replace"]
    path: Label
    search: Code
    replace: Code


class EditArgs(_Args):
    edits: list[Annotated[WholeFileEdit | SearchReplaceEdit, Field(discriminator="kind")]] = Field(
        max_length=MAX_EDITS)


class SetFilesArgs(_Args):
    files: dict[Label, Code]


class EditOutcome(_Args):
    """What an earlier ``edit`` answered, sent back with the step it ran; recorded, never trusted."""

    applied: bool = True
    changed: list[Label] = Field([], max_length=MAX_EDITS)
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
    content: Prompt


class CompleteArgs(_Args):
    messages: list[ChatMessage] = Field(min_length=1)
    temperature: float | None = None
    max_output_tokens: int | None = Field(4096, ge=1, le=1 << 20)  # None: no limit asked for
    seed: int | None = Field(None, ge=0, le=1 << 31)
    purpose: Label = ""


Outcome = Literal["finished", "budget_exhausted", "stopped", "crashed"]


class DoneArgs(_Args):
    """The agent's last message: how its ``run`` ended."""

    outcome: Outcome
    reason: Text = ""        # RunStopped's reason, or the crash's message
    error_type: Label = ""   # the exception's type, for a crash
    traceback: Traceback = ""
    # exceptions the agent's main loop raised and the agent caught, as its port does (the run went on:
    # to the next idea, or to the final test on the best code); each "where: Type: message" + traceback
    caught: list[Traceback] = Field([], max_length=MAX_CAUGHT)


ARGS: dict[str, type[_Args]] = {
    "hello": HelloArgs,
    "files": NoArgs,
    "baseline_files": NoArgs,
    "files_of": StepArgs,
    "edit": EditArgs,
    "set_files": SetFilesArgs,
    "run_step": RunStepArgs,
    "run_baseline": NoArgs,
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
    # a lone surrogate (in a model's reply, say) is written as its UTF-8 form, never raised on: the harness
    # reads no such message (``decode``), and its client reads its replies whatever they hold
    return (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class JsonLimits:
    """What one JSON object read from an agent's side may cost: bytes, values and keys, levels of nesting."""

    max_bytes: int
    max_values: int
    max_depth: int
    what: str = "a message"  # how refusals name it


MESSAGE_LIMITS = JsonLimits(MAX_MESSAGE_BYTES, MAX_JSON_VALUES, MAX_MESSAGE_DEPTH)


def decode(line: bytes | bytearray, limits: JsonLimits = MESSAGE_LIMITS) -> dict[str, Any]:
    """One line an agent sent, as a JSON object within the protocol's limits (or ``limits``); raises
    ProtocolViolation for anything else. Its cost is bounded by the line's size and the values it may hold,
    whatever it holds."""
    what = limits.what
    if len(line) > limits.max_bytes:
        raise ProtocolViolation(f"{what} of {len(line)} bytes; {what} has at most {limits.max_bytes}")
    _count_values(line, limits)
    try:
        # pydantic-core's reader refuses what is not UTF-8, lone surrogates, NaN and Infinity
        value = from_json(line, allow_inf_nan=False)
    except ValueError as exc:
        hint = " (NaN and Infinity are not JSON numbers)" if b"NaN" in line or b"Infinity" in line else ""
        raise ProtocolViolation(f"{what} that is not JSON in UTF-8 ({exc}){hint}") from None
    if not isinstance(value, dict):
        raise ProtocolViolation(f"{what} that is not a JSON object ({type(value).__name__})")
    _check_numbers_and_depth(value, limits)
    return value


def decode_reply(line: bytes) -> dict[str, Any]:
    """A line the harness wrote (a reply, the describe request): trusted, read whatever its size."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise ProtocolViolation(f"a reply that is not JSON ({type(exc).__name__})") from None
    if not isinstance(value, dict):
        raise ProtocolViolation(f"a reply that is not a JSON object ({type(value).__name__})")
    return value


def _count_values(line: bytes | bytearray, limits: JsonLimits) -> None:
    """Refuses a line of more than ``limits.max_values`` values and keys before it is parsed: outside strings, every
    value after an array's or an object's first follows a comma, and every container opens with a bracket."""
    # escaped backslashes and quotes are no string's end; what is left of them leaves the count unchanged
    text = line.replace(b"\\\\", b"").replace(b'\\"', b"") if b"\\" in line else line
    values, at = 1, 0
    while True:
        quote = text.find(b'"', at)
        end = len(text) if quote < 0 else quote
        values += text.count(b",", at, end) + text.count(b"[", at, end) + text.count(b"{", at, end)
        if quote < 0:
            break
        close = text.find(b'"', quote + 1)
        if close < 0:
            break  # not JSON: the parser says so
        values += 1  # each string: a key or a value (this also bounds the loop)
        at = close + 1
        if values > limits.max_values:
            break
    if values > limits.max_values:
        raise ProtocolViolation(f"{limits.what} of more than {limits.max_values} JSON values")


def _check_numbers_and_depth(message: dict[str, Any], limits: JsonLimits) -> None:
    what = limits.what
    stack = [(message, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limits.max_depth:
            raise ProtocolViolation(f"{what} nested more than {limits.max_depth} levels deep")
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
            elif isinstance(child, float) and not math.isfinite(child):
                raise ProtocolViolation(f"{what} holding a number that is not finite ({child})")
            elif isinstance(child, int) and not INT_MIN <= child <= INT_MAX:
                raise ProtocolViolation(f"{what} holding an integer outside 64 bits")


def parse_request(message: dict[str, Any]) -> tuple[int, str, _Args]:
    """(id, op, validated arguments); raises ProtocolViolation for what is no message of the protocol (see
    the module's docstring), RequestError for a request the harness does not serve."""
    try:
        request = Request.model_validate(message)
    except ValidationError:
        raise ProtocolViolation("a request needs an integer 'id', a string 'op' and an object 'args'") from None
    model = ARGS.get(request.op)
    if model is None:
        raise RequestError(f"unknown operation '{shown(request.op)}'; operations: {', '.join(ARGS)}")
    try:
        return request.id, request.op, model.model_validate(request.args)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(shown(part) if isinstance(part, str) else str(part) for part in err["loc"]) or "args"
        raise RequestError(f"{request.op}: {where}: {err['msg']}") from None
    except ProtocolViolation as exc:
        raise ProtocolViolation(f"{request.op}: {exc}") from None


def shown(text: str, limit: int = 80) -> str:
    """An agent's word inside one of the harness's messages: cut, every character not printable spelt out."""
    text = text[:limit] + ("..." if len(text) > limit else "")
    return code_points(text)


def ok(request_id: int, result: dict[str, Any]) -> dict[str, Any]:
    return {"id": request_id, "ok": True, "result": result}


def error(request_id: int | None, error_type: str, message: str, **details: Any) -> dict[str, Any]:
    return {"id": request_id, "ok": False, "error": {"type": error_type, "message": message, **details}}


# -- the client's side ----------------------------------------------------------------------------------
def printable(text: str) -> str:
    """``text`` as a text field takes it: a carriage return (alone or before a newline) as a newline, other
    control characters spelt out (ESC as ``\\x1b``), lone surrogates as U+FFFD."""
    if _NOT_IN_TEXT.search(text) is None:
        return text
    return _NOT_IN_TEXT.sub(_spelt, text.replace("\r\n", "\n").replace("\r", "\n"))


def _spelt(match: re.Match) -> str:
    char = match.group()
    return "\ufffd" if _NOT_UNICODE.match(char) else f"\\x{ord(char):02x}"


def clean_args(op: str, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` as an honest client sends them: texts made ``printable``, a number that is not finite sent as
    null, a prompt's lone surrogates replaced; files' contents as they are (the harness judges them)."""
    cleaned = {}
    for key, value in args.items():
        if op == "edit" and key == "edits" and isinstance(value, list):
            value = [{k: v if k in ("content", "search", "replace") else _clean_json(v) for k, v in e.items()}
                     if isinstance(e, dict) else e for e in value]
        elif op == "set_files" and key == "files" and isinstance(value, dict):
            value = {printable(path) if isinstance(path, str) else path: content for path, content in value.items()}
        elif op == "llm.complete" and key == "messages" and isinstance(value, list):
            value = [{k: _NOT_UNICODE.sub("\ufffd", v) if k == "content" and isinstance(v, str) else v
                      for k, v in m.items()} if isinstance(m, dict) else m for m in value]
        else:
            value = _clean_json(value)
        cleaned[key] = value
    return cleaned


def _clean_json(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if depth > MAX_MESSAGE_DEPTH:
        return value  # the harness says what is wrong with it
    if isinstance(value, dict):
        return {printable(k) if isinstance(k, str) else k: _clean_json(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean_json(v, depth + 1) for v in value]
    return value
