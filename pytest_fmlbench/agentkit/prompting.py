"""Prompt pieces and reply parsing shared by the LLM agents.

The reply format every agent asks for: a short plan in prose, then one fenced block per changed file,
the file's path in the fence's info string. Files up to ``WHOLE_FILE_MAX_LINES`` lines are rewritten
whole; larger ones are changed with SEARCH/REPLACE blocks::

    Plan: lower the learning rate and train longer.

    ```python algorithm.py
    ...the whole new file...
    ```

    ```python big_module.py
    <<<<<<< SEARCH
    lines copied exactly from the file
    =======
    their replacement
    >>>>>>> REPLACE
    ```

Models drift from any format, so the parser also takes the path from a comment on the block's first
line or from the line just before the fence, takes SEARCH/REPLACE blocks outside fences, and falls back
to the only editable file a block can belong to. That is the ``strict`` editor's format.

The FML-bench port's shared editor (the default) asks for and reads its own format (code_editor.py
355-395), and only that: a file is ``### FILE: <path>`` on one line, then a fence opened with ```python
(or a bare fence) holding the whole file; a SEARCH/REPLACE block is ``### FILE: <path>`` directly followed
by its ``<<<<<<< SEARCH`` line, one header per block. ``parse_port_reply`` reads it the same way.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from ..editor import WHOLE_FILE_MAX_LINES, Edit, SearchReplace, WholeFile
from ..executor import ERROR_TAIL_CHARS

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})\s*(.*)$")
_SEARCH = re.compile(r"^\s*<{5,9} ?SEARCH\s*$")
_DIVIDER = re.compile(r"^\s*={5,9}\s*$")
_REPLACE = re.compile(r"^\s*>{5,9} ?REPLACE\s*$")
_LANG = {".py": "python", ".json": "json", ".yaml": "yaml", ".yml": "yaml", ".sh": "bash", ".toml": "toml"}


@dataclass
class ParsedReply:
    plan: str
    edits: list[Edit] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def error(self) -> str:
        """Why the reply yields no usable edit ('' when it does)."""
        if self.edits:
            return ""
        return "; ".join(self.problems) or "the reply contains no code block for an editable file"


# -- prompts -------------------------------------------------------------------------------------
def language(path: str) -> str:
    return _LANG.get(PurePosixPath(path).suffix, "")


def uses_search_replace(content: str) -> bool:
    """Beyond the port's threshold: more than 500 newlines (a 500-line file is still rewritten whole)."""
    return content.count("\n") > WHOLE_FILE_MAX_LINES


def render_files(files: dict[str, str]) -> str:
    """The editable files as the model sees them: path, size, and content in a fence naming the path."""
    parts = []
    for path in sorted(files):
        content = files[path]
        fence = "````" if "```" in content else "```"
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        parts.append(f"### {path} ({lines} lines)\n{fence}{language(path)} {path}\n{content.rstrip()}\n{fence}")
    return "\n\n".join(parts)


def reply_format(files: dict[str, str]) -> str:
    """Instructions for the edit part of a reply, naming which files are rewritten whole."""
    whole = [p for p in sorted(files) if not uses_search_replace(files[p])]
    diffed = [p for p in sorted(files) if uses_search_replace(files[p])]
    text = [
        "Only these files can be changed: " + ", ".join(f"`{p}`" for p in sorted(files)) + ". "
        "Give only the files you change; the others stay as they are.",
    ]
    if whole:
        text.append(
            f"For {', '.join(f'`{p}`' for p in whole)}: write the complete new file in one fenced block whose "
            "info string is the language and the path, e.g.\n```python algorithm.py\n<the whole file>\n```"
        )
    if diffed:
        text.append(
            f"{', '.join(f'`{p}`' for p in diffed)} {'is' if len(diffed) == 1 else 'are'} longer than "
            f"{WHOLE_FILE_MAX_LINES} lines: change {'it' if len(diffed) == 1 else 'them'} with SEARCH/REPLACE "
            "blocks inside a fence naming the path; each SEARCH part must copy lines of the file exactly "
            "and match once:\n```python path/to/file.py\n<<<<<<< SEARCH\n<exact existing lines>\n=======\n"
            "<replacement lines>\n>>>>>>> REPLACE\n```"
        )
    text.append("Python must parse and JSON must be valid, or the change is rejected.")
    return "\n\n".join(text)


def tail(text: str, chars: int = ERROR_TAIL_CHARS) -> str:
    """The last ``chars`` characters, marked with a leading '...' when cut (the ports' _truncate_error)."""
    text = text or ""
    return text if len(text) <= chars else "..." + text[-chars:]


# -- the port's editor format ----------------------------------------------------------------------
_PORT_WHOLE = re.compile(r"### FILE:\s*(\S+)\s*\n```(\w*)\s*\n(.*?)```", re.DOTALL)
_PORT_BLOCK = re.compile(r"### FILE:\s*(\S+)\s*\n<<<<<<< SEARCH\n(.*?)\n=======\n(.*?)\n>>>>>>> REPLACE", re.DOTALL)


def fence_language(path: str) -> str:
    """The fence the port's prompt opens a file with: python for Python (the port's only kind of file)."""
    return language(path) or "python"


def render_port_file(path: str, content: str) -> str:
    return f"### FILE: {path}\n```{fence_language(path)}\n{content}\n```"


def port_path(name: str, editable: list[str]) -> str | None:
    """The editable file a reply's path names, as the port resolves it (code_editor.py 439-465): the
    path itself, else the first editable file with the same base name or ending in it."""
    if name in editable:
        return name
    clean = name.strip().rstrip("/")
    for path in editable:
        if PurePosixPath(path).name == PurePosixPath(clean).name or path.endswith(clean):
            return path
    return None


def parse_port_reply(text: str, files: dict[str, str]) -> ParsedReply:
    """A reply in the port's format: every whole file first, then every SEARCH/REPLACE block, each in
    reply order (the order the port applies them in). A whole file's trailing newlines are dropped, as
    the port writes it. A path naming no editable file, or a fence in another language than Python or the
    file's own, is a problem and no edit; the plan is the prose before the first ``### FILE:``."""
    editable = list(files)
    text = text or ""
    edits: list[Edit] = []
    problems: list[str] = []
    for name, lang, body in _PORT_WHOLE.findall(text):
        path = port_path(name, editable)
        if path is None:
            problems.append(f"{name} is not an editable file (editable: {', '.join(editable)})")
        elif lang not in ("", "python", language(path)):
            problems.append(f"{path}: a ```{lang} fence (the file must be in a ```python or bare fence)")
        else:
            edits.append(WholeFile(path, body.rstrip("\n")))
    for name, search, replace in _PORT_BLOCK.findall(text):
        path = port_path(name, editable)
        if path is None:
            problems.append(f"{name} is not an editable file (editable: {', '.join(editable)})")
        else:
            edits.append(SearchReplace(path, search, replace))
    if not edits and not problems:
        problems.append("the reply holds no '### FILE: <path>' followed by a fenced file or a SEARCH/REPLACE block")
    before = text.split("### FILE:", 1)[0]
    return ParsedReply(_clean_plan(before.splitlines(), editable), edits, problems)


def extract_json(text: str) -> dict | None:
    """The first JSON object in a reply (fenced or bare), or None."""
    for match in re.finditer(r"```(?:json)?\s*\n(.*?)```", text, re.DOTALL):
        try:
            value = json.loads(match.group(1))
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    decoder = json.JSONDecoder()
    for start in (m.start() for m in re.finditer(r"\{", text)):
        try:
            value, _ = decoder.raw_decode(text[start:])
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


# -- reply parsing -------------------------------------------------------------------------------
def parse_reply(text: str, files: dict[str, str]) -> ParsedReply:
    """Split a reply into its plan and its edits to ``files`` (the editable files and their content)."""
    editable = sorted(files)
    lines = (text or "").splitlines()
    plan_lines: list[str] = []
    prose: list[str] = []  # lines since the last block: where a path may be named
    seen_code = False
    edits: list[Edit] = []
    problems: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            marker, info = fence.group(1), fence.group(2)
            body, i = _until_fence_close(lines, i + 1, marker)
            _take_block(info, body, prose, files, editable, edits, problems)
            seen_code, prose = True, []
            continue
        if _SEARCH.match(line):
            block, i = _until_replace(lines, i)
            _take_block("", block, prose, files, editable, edits, problems)
            seen_code, prose = True, []
            continue
        if not seen_code:
            plan_lines.append(line)
        if line.strip():
            prose.append(line)
        i += 1
    plan = _clean_plan(plan_lines, editable)
    return ParsedReply(plan, edits, problems)


def _until_fence_close(lines: list[str], i: int, marker: str) -> tuple[list[str], int]:
    body = []
    closer = marker[0] * len(marker)
    while i < len(lines):
        if lines[i].strip().startswith(closer) and not lines[i].strip().strip(marker[0]):
            return body, i + 1
        body.append(lines[i])
        i += 1
    return body, i  # unterminated (a reply cut at the token limit): what is there is parsed, and usually fails


def _until_replace(lines: list[str], i: int) -> tuple[list[str], int]:
    block = []
    while i < len(lines):
        block.append(lines[i])
        i += 1
        if _REPLACE.match(block[-1]):
            # consecutive bare blocks for the same file belong together
            if i < len(lines) and _SEARCH.match(lines[i]):
                continue
            break
    return block, i


def _take_block(info: str, body: list[str], prose: list[str], files: dict[str, str], editable: list[str],
                edits: list[Edit], problems: list[str]) -> None:
    has_markers = any(_SEARCH.match(line) for line in body)
    path = _path_in(info, editable)
    if path is None and body and not has_markers:
        path = _path_comment(body[0], editable)
        if path is not None:
            body = body[1:]
    if path is None:
        for line in reversed(prose[-2:]):
            path = _path_in(line, editable)
            if path is not None:
                break
    if has_markers:
        pairs, error = _search_replace_pairs(body)
        if error:
            problems.append(error)
            return
        if path is None:
            path = _only_file_containing([s for s, _ in pairs], files)
        if path is None:
            problems.append("a SEARCH/REPLACE block names no editable file")
            return
        edits.extend(SearchReplace(path, search, replace) for search, replace in pairs)
        return
    if path is None:
        foreign = _foreign_path(info)
        if foreign:
            problems.append(f"{foreign} is not an editable file (editable: {', '.join(editable)})")
            return
        path = _only_file_of_language(info, editable)
    if path is None:
        lang = info.split()[0] if info.split() else ""
        if lang.lower() in ("", "python", "py", "json", "yaml", "yml", "diff"):
            problems.append(f"a code block names no editable file (editable: {', '.join(editable)})")
        return  # other languages (console output, shell commands) are illustrations, not edits
    content = "\n".join(body)
    edits.append(WholeFile(path, content + "\n" if content else ""))


def _search_replace_pairs(body: list[str]) -> tuple[list[tuple[str, str]], str]:
    pairs: list[tuple[str, str]] = []
    state, search, replace = "outside", [], []
    for line in body:
        if state == "outside":
            if _SEARCH.match(line):
                state, search, replace = "search", [], []
        elif state == "search":
            if _DIVIDER.match(line):
                state = "replace"
            else:
                search.append(line)
        elif _REPLACE.match(line):
            pairs.append(("\n".join(search) + "\n", "\n".join(replace) + "\n" if replace else ""))
            state = "outside"
        else:
            replace.append(line)
    if state != "outside":
        return pairs, "an unterminated SEARCH/REPLACE block"
    return pairs, ""


def _normalise_token(token: str) -> str:
    token = token.strip().strip("`'\"*,;:()[]<>")
    for prefix in ("path=", "file=", "filename=", "title="):
        if token.lower().startswith(prefix):
            token = token[len(prefix):].strip("`'\"")
    return token[2:] if token.startswith("./") else token


def _path_in(text: str, editable: list[str]) -> str | None:
    """The one editable path a line names (exactly, or as a longer path ending in it)."""
    found = set()
    for raw in re.split(r"[\s:]+", text or ""):
        token = _normalise_token(raw)
        if not token:
            continue
        for path in editable:
            if token == path or token.endswith("/" + path):
                found.add(path)
    return found.pop() if len(found) == 1 else None


def _foreign_path(info: str) -> str | None:
    """A file path the info string names (after the language), when it is none of the editable ones."""
    for raw in info.split()[1:] if len(info.split()) > 1 else []:
        token = _normalise_token(raw)
        if "." in token or "/" in token:
            return token
    return None


def _path_comment(first_line: str, editable: list[str]) -> str | None:
    stripped = first_line.strip()
    if not stripped.startswith(("#", "//", "<!--")):
        return None
    words = re.sub(r"^(#|//|<!--)\s*|\s*-->$", "", stripped)
    words = re.sub(r"^(file(name)?|path)\s*[:=]\s*", "", words, flags=re.IGNORECASE)
    # only a comment that is nothing but the path: "# algorithm.py", "# file: algorithm.py"
    return _path_in(words, editable) if len(words.split()) == 1 else None


def _only_file_containing(searches: list[str], files: dict[str, str]) -> str | None:
    owners = {p for p, content in files.items() if searches and all(s.strip() in content for s in searches)}
    return owners.pop() if len(owners) == 1 else None


def _only_file_of_language(info: str, editable: list[str]) -> str | None:
    lang = (info.split()[0] if info.split() else "").lower()
    wanted = {"python": ".py", "py": ".py", "json": ".json", "yaml": ".yaml", "yml": ".yaml"}.get(lang)
    if wanted is None:
        return None
    same = [p for p in editable if PurePosixPath(p).suffix in ({wanted, ".yml"} if wanted == ".yaml" else {wanted})]
    return same[0] if len(same) == 1 else None


def _is_path_line(line: str, editable: list[str]) -> bool:
    """A heading-like line that only names a file: '### algorithm.py', '**File: `config.json`**'."""
    words = re.sub(r"^[#*>\s]*((file(name)?|path)\s*[:=]?)?\s*", "", line.strip(), flags=re.IGNORECASE)
    words = words.strip().strip("*`:")
    return len(words.split()) == 1 and _path_in(words, editable) is not None


def _clean_plan(lines: list[str], editable: list[str]) -> str:
    # a trailing line that only names the next block's file is not part of the plan
    while lines and (not lines[-1].strip() or _is_path_line(lines[-1], editable)):
        lines = lines[:-1]
    plan = "\n".join(lines).strip()
    return re.sub(r"^(plan|solution sketch|outline)\s*:\s*", "", plan, flags=re.IGNORECASE)
