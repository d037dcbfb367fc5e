"""A pydantic model as JSON its own reader reads back: what cannot be written so is mended, and said.

A run record holds what an agent sent (plans, analyses, ``extra``, end reasons, caught errors), and the
record must be written whatever they hold: the final test's result lands in it after them. pydantic writes
some values that it cannot read back, or cannot write at all:

- a string holding a lone surrogate (``"\\ud800"``) cannot be encoded as UTF-8: writing raises;
- data nested more deeply than pydantic-core's JSON reader accepts (about 200 levels) is written, and
  reading it back fails; deeper still (about 255), writing raises;
- a float that is not finite is written as ``null``, which a field typed ``dict[str, float]`` refuses.

:func:`to_json` writes the model as is when its reader reads that back; otherwise it writes a mended copy:
lone surrogates replaced by U+FFFD, what nests deeper than :data:`MAX_DEPTH` replaced by a short text, a
float that is not finite by null, and what still fails validation left out. Each change is one line in the
copy's ``mended`` field (where the model has one), so a reader knows the record is not verbatim.
"""

from __future__ import annotations

import math
from datetime import date, datetime, time, timedelta
from enum import Enum
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

# levels of nesting a mended document keeps, counted from its root: well below pydantic-core's JSON
# reader's limit (200), and below Python's recursion limit for every other reader (json, jinja2)
MAX_DEPTH = 100
CUT = f"[cut: nested deeper than {MAX_DEPTH} levels]"
# lines of ``mended`` one write adds at most: an agent's extra may hold thousands of broken strings
MAX_NOTES = 20
_ROUNDS = 5


class Unwritable(ValueError):
    """A model that no mending makes readable (a required field's value is unusable)."""


def to_json(model: BaseModel, indent: int | None = None) -> str:
    """``model`` as JSON that ``type(model).model_validate_json`` reads back."""
    cls = type(model)
    try:
        text = model.model_dump_json(indent=indent)
        cls.model_validate_json(text)
        return text
    except (PydanticSerializationError, ValidationError, ValueError, RecursionError):
        pass
    notes: list[str] = []
    data = _mend(model, "", 0, notes)
    for _ in range(_ROUNDS):
        if "mended" in cls.model_fields:
            data["mended"] = [*getattr(model, "mended", []), *_capped(notes)]
        try:
            mended = cls.model_validate(data)
        except ValidationError as exc:
            if not _leave_out(data, exc, notes):
                raise Unwritable(f"{cls.__name__}: {_first_error(exc)}") from None
            continue
        text = mended.model_dump_json(indent=indent)
        try:
            cls.model_validate_json(text)
        except ValidationError as exc:
            raise Unwritable(f"{cls.__name__}: mended, and still not readable: {_first_error(exc)}") from None
        return text
    raise Unwritable(f"{cls.__name__}: still invalid after {_ROUNDS} rounds of mending")


def valid_unicode(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (one character for one)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _mend(value: Any, path: str, depth: int, notes: list[str]) -> Any:
    """A copy of ``value`` as plain Python data pydantic validates and writes: models become dicts of their
    fields; a depth counter bounds the recursion, whatever the value's own depth."""
    if isinstance(value, str):
        fixed = valid_unicode(value)
        if fixed is not value:
            notes.append(f"{path or 'the record'}: characters that cannot be encoded (lone surrogates) "
                         "replaced by U+FFFD")
        return fixed
    if isinstance(value, float) and not math.isfinite(value):
        notes.append(f"{path}: {value} is no JSON number: written as null")
        return None
    if value is None or isinstance(value, (bool, int, float, datetime, date, time, timedelta, Enum)):
        return value
    if depth >= MAX_DEPTH:
        notes.append(f"{path}: nested deeper than {MAX_DEPTH} levels: cut")
        return CUT
    if isinstance(value, BaseModel):
        return {name: _mend(getattr(value, name), _join(path, name), depth + 1, notes)
                for name in type(value).model_fields}
    if isinstance(value, dict):
        return {_key(key, path, notes): _mend(item, _join(path, key), depth + 1, notes)
                for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_mend(item, f"{path}[{n}]", depth + 1, notes) for n, item in enumerate(value)]
    notes.append(f"{path}: a {type(value).__name__}, not JSON data: kept as its text")
    try:
        return valid_unicode(str(value))
    except Exception:  # its __str__ is anyone's code
        return f"<{type(value).__name__}>"


def _key(key: Any, path: str, notes: list[str]) -> str:
    text = key if isinstance(key, str) else str(key)
    fixed = valid_unicode(text)
    if fixed is not text:
        notes.append(f"{path}: a key with characters that cannot be encoded: replaced by U+FFFD")
    return fixed


def _join(path: str, key: Any) -> str:
    name = key if isinstance(key, str) and key.isidentifier() else repr(key)
    # a key is an agent's words: its path stays short and printable
    name = name.encode("ascii", "backslashreplace").decode("ascii")
    name = name if len(name) <= 40 else name[:40] + "..."
    return f"{path}.{name}" if path else name


def _leave_out(data: dict, exc: ValidationError, notes: list[str]) -> bool:
    """Delete each entry the errors point at; False where nothing could be deleted."""
    targets: dict[tuple[int, Any], tuple[Any, Any]] = {}
    for error in exc.errors(include_input=False, include_url=False):
        container, key = None, None
        current: Any = data
        for part in error["loc"]:
            # a union's member names and other tags are no keys of the data: stop at the last real one
            if isinstance(current, dict) and part in current:
                container, key, current = current, part, current[part]
            elif isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
                container, key, current = current, part, current[part]
            else:
                break
        if container is None:
            continue
        targets[(id(container), key)] = (container, key)
        notes.append(f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}: left out")
    if not targets:
        return False
    # list items from the last, so that the earlier indices still hold
    for container, key in sorted(targets.values(), key=lambda t: t[1] if isinstance(t[1], int) else -1,
                                 reverse=True):
        del container[key]
    return True


def _capped(notes: list[str]) -> list[str]:
    # a note may quote a key an agent chose: kept printable and encodable, its path short
    unique = list(dict.fromkeys(_short(note.encode("ascii", "backslashreplace").decode("ascii")) for note in notes))
    if len(unique) <= MAX_NOTES:
        return unique
    return unique[:MAX_NOTES] + [f"and {len(unique) - MAX_NOTES} more mended value(s)"]


def _short(note: str) -> str:
    path, sep, what = note.partition(": ")
    if len(path) > 120:
        path = f"{path[:100]}...{path[-16:]}"
    return path + sep + what


def _first_error(exc: ValidationError) -> str:
    error = exc.errors(include_input=False, include_url=False)[0]
    where = ".".join(str(p) for p in error["loc"])
    return f"{where}: {error['msg']}" if where else error["msg"]
