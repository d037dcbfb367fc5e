"""Large literal data in code: the shape hard-coded answers take.

A method learns its numbers from data; a list of 300 labels typed into ``algorithm.py`` (or a JSON
config) is an answer key, whatever the code around it says. Python files are read with ``ast``: a
literal list, tuple, set or dict made only of constants (nested ones included, negative numbers too)
with at least ``MIN_ITEMS`` of them is reported with its lines, as is a string constant long enough to
pack such an array. JSON files are read as JSON. Files that do not parse are skipped: the validation
run reports those.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass

# a hyper-parameter grid or a class-name list stays well below this; an answer key for a test split does not
MIN_ITEMS = 64
# a string this long made of digits and separators can carry an array (300 labels as "0110..."), and so can
# a longer one of base64; an integer this large can pack one bit per label
MIN_DIGIT_CHARS = 200
MIN_BASE64_CHARS = 512
MIN_PACKED_INT = 10 ** 40
_DIGITS = re.compile(r"^[\s\d.,;:+\-eE\[\]()]+$")
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]+$")


@dataclass(frozen=True)
class Literal:
    file: str
    first_line: int
    last_line: int
    items: int  # constants in it (characters, for a packed string)
    kind: str  # "array", "packed string" or "packed number"
    text: str  # its source text, for telling one literal from another across steps

    @property
    def describe(self) -> str:
        if self.kind == "packed string":
            return f"a string of {self.items} characters that can pack an array"
        if self.kind == "packed number":
            return f"a {self.items}-digit number that can pack an array"
        return f"a literal array of {self.items} constants"


def _constants(node: ast.AST) -> int | None:
    """How many constants a literal made only of constants holds; None if anything else is inside."""
    if isinstance(node, ast.Constant):
        return 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) and isinstance(node.operand, ast.Constant):
        return 1
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        parts = [_constants(e) for e in node.elts]
    elif isinstance(node, ast.Dict):
        parts = [_constants(e) for e in (*node.keys, *node.values) if e is not None]
    else:
        return None
    return None if any(p is None for p in parts) else sum(parts)


def python_literals(path: str, source: str) -> list[Literal]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    lines = source.splitlines()
    found: list[Literal] = []
    covered: list[tuple[int, int]] = []  # an outer literal is reported, not the literals inside it
    for node in ast.walk(tree):  # breadth first: outer literals come before the ones they hold
        first, last = getattr(node, "lineno", 0), getattr(node, "end_lineno", 0) or getattr(node, "lineno", 0)
        if any(a <= first and last <= b for a, b in covered):
            continue
        if isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
            count = _constants(node)
            if count is not None and count >= MIN_ITEMS:
                text = "\n".join(lines[first - 1:last])
                found.append(Literal(path, first, last, count, "array", text))
                covered.append((first, last))
        elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            value = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
            if (len(value) >= MIN_DIGIT_CHARS and _DIGITS.match(value)) or \
                    (len(value) >= MIN_BASE64_CHARS and _BASE64.match(value)):
                found.append(Literal(path, first, last, len(value), "packed string", value))
                covered.append((first, last))
        elif isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) >= MIN_PACKED_INT:
            digits = len(str(abs(node.value)))
            found.append(Literal(path, first, last, digits, "packed number", str(node.value)))
            covered.append((first, last))
    return found


def _json_count(value) -> int | None:
    if isinstance(value, (int, float, str, bool)) or value is None:
        return 1
    if isinstance(value, list):
        parts = [_json_count(v) for v in value]
        return None if any(p is None for p in parts) else sum(parts)
    return None


def json_literals(path: str, source: str) -> list[Literal]:
    try:
        data = json.loads(source)
    except ValueError:
        return []
    found: list[Literal] = []

    def walk(value, key: str) -> None:
        if isinstance(value, str) and ((len(value) >= MIN_DIGIT_CHARS and _DIGITS.match(value))
                                       or (len(value) >= MIN_BASE64_CHARS and _BASE64.match(value))):
            line = _line_of(source, key)
            found.append(Literal(path, line, line, len(value), "packed string", value))
        elif isinstance(value, list):
            count = _json_count(value)
            if count is not None and count >= MIN_ITEMS:
                # a JSON file is often one line: the key's line is where the array starts
                line = _line_of(source, key)
                found.append(Literal(path, line, line, count, "array", json.dumps(value)))
                return
            for item in value:
                walk(item, key)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, f'"{k}"')

    walk(data, "")
    return found


def _line_of(source: str, key: str) -> int:
    at = source.find(key) if key else 0
    return source.count("\n", 0, max(at, 0)) + 1


def literals(path: str, source: str) -> list[Literal]:
    if path.endswith(".py"):
        return python_literals(path, source)
    if path.endswith(".json"):
        return json_literals(path, source)
    return []
