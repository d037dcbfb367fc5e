"""Reply parsing: the format we ask for, and the drift models show."""

import pytest

from pytest_fmlbench.agentkit.prompting import extract_json, parse_reply, render_files, reply_format
from pytest_fmlbench.editor import WHOLE_FILE_MAX_LINES, Editor, SearchReplace, WholeFile

FILES = {
    "algorithm.py": "import numpy as np\n\n\ndef fit(X, y, config):\n    return np.zeros(3)\n",
    "config.json": '{"lr": 0.01, "epochs": 5}\n',
    "split_config.json": '{"val_ratio": 0.25, "val_seed": 0}\n',
}
BIG = "".join(f"x{i} = {i}\n" for i in range(WHOLE_FILE_MAX_LINES + 20))


def test_the_asked_format_plan_then_whole_files():
    reply = ("Plan: use a larger learning rate and\ntrain longer.\n\n"
             "```python algorithm.py\nimport numpy as np\n```\n\n```json config.json\n{\"lr\": 0.5}\n```\n")
    parsed = parse_reply(reply, FILES)
    assert parsed.plan == "use a larger learning rate and\ntrain longer."
    assert parsed.edits == [WholeFile("algorithm.py", "import numpy as np\n"), WholeFile("config.json", '{"lr": 0.5}\n')]
    assert parsed.error == ""


@pytest.mark.parametrize("reply", [
    "Plan.\n\n### config.json\n```json\n{\"lr\": 1}\n```",                 # path on a heading line
    "Plan.\n\n**File: `config.json`**\n```\n{\"lr\": 1}\n```",              # bold label, bare fence
    "Plan.\n\n```json\n// config.json\n{\"lr\": 1}\n```",                   # path comment, removed from JSON
    "Plan.\n\n```json path=config.json\n{\"lr\": 1}\n```",                  # key=value info string
    "Plan.\n\n```json ./workspace/config.json\n{\"lr\": 1}\n```",           # a longer path ending in it
])
def test_paths_are_found_where_models_put_them(reply):
    parsed = parse_reply(reply, FILES)
    assert parsed.edits == [WholeFile("config.json", '{"lr": 1}\n')], parsed.problems
    assert parsed.plan == "Plan."


def test_an_unnamed_python_block_goes_to_the_only_python_file():
    assert parse_reply("```python\nx = 1\n```", FILES).edits == [WholeFile("algorithm.py", "x = 1\n")]
    # two JSON files: an unnamed JSON block is ambiguous and reported, not guessed
    parsed = parse_reply("```json\n{}\n```", FILES)
    assert parsed.edits == [] and "names no editable file" in parsed.error


def test_search_replace_in_a_fence_outside_fences_and_several_per_file():
    files = {**FILES, "big.py": BIG}
    reply = ("Plan: change two constants.\n\n```python big.py\n<<<<<<< SEARCH\nx3 = 3\n=======\nx3 = 33\n>>>>>>> REPLACE\n"
             "<<<<<<< SEARCH\nx7 = 7\n=======\nx7 = 77\n>>>>>>> REPLACE\n```\n\nbig.py\n<<<<<<< SEARCH\nx9 = 9\n=======\n"
             "x9 = 99\n>>>>>>> REPLACE\n")
    parsed = parse_reply(reply, files)
    assert parsed.edits == [SearchReplace("big.py", "x3 = 3\n", "x3 = 33\n"), SearchReplace("big.py", "x7 = 7\n", "x7 = 77\n"),
                            SearchReplace("big.py", "x9 = 9\n", "x9 = 99\n")]
    assert parsed.plan == "change two constants."


def test_an_unnamed_search_block_goes_to_the_one_file_containing_it(tmp_path):
    files = {**FILES, "big.py": BIG}
    parsed = parse_reply("<<<<<<< SEARCH\nx11 = 11\n=======\nx11 = -1\n>>>>>>> REPLACE", files)
    assert parsed.edits == [SearchReplace("big.py", "x11 = 11\n", "x11 = -1\n")]
    # and the shared editor applies what the parser produced
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    result = Editor(tmp_path, list(files)).apply(parsed.edits)
    assert result.applied and "x11 = -1\nx12 = 12\n" in (tmp_path / "big.py").read_text()


def test_replies_without_usable_code_say_why():
    assert parse_reply("I would tune the learning rate.", FILES).error == \
        "the reply contains no code block for an editable file"
    assert parse_reply("```python other.py\nx=1\n```", FILES).error == \
        "other.py is not an editable file (editable: algorithm.py, config.json, split_config.json)"
    assert parse_reply("```python big.py\n<<<<<<< SEARCH\nx\n=======\n", {"big.py": BIG}).error == \
        "an unterminated SEARCH/REPLACE block"
    # shell commands and console output are illustrations, not edits or problems
    shell = parse_reply("Run it with\n```bash\npython train.py\n```\n```python algorithm.py\nx = 2\n```", FILES)
    assert shell.edits == [WholeFile("algorithm.py", "x = 2\n")] and shell.problems == []


def test_a_reply_cut_mid_block_yields_the_partial_file_for_the_editor_to_reject():
    parsed = parse_reply("Plan.\n```python algorithm.py\ndef fit(X, y, config):\n    return (", FILES)
    assert parsed.edits == [WholeFile("algorithm.py", "def fit(X, y, config):\n    return (\n")]


def test_prompt_pieces_name_the_edit_mode_per_file():
    text = reply_format({**FILES, "big.py": BIG})
    assert "`big.py` is longer than 500 lines" in text and "<<<<<<< SEARCH" in text
    assert "For `algorithm.py`, `config.json`, `split_config.json`: write the complete new file" in text
    rendered = render_files({"config.json": FILES["config.json"]})
    assert rendered == '### config.json (1 lines)\n```json config.json\n{"lr": 0.01, "epochs": 5}\n```'
    # the rendered block parses back to the same file
    assert parse_reply(rendered, FILES).edits == [WholeFile("config.json", FILES["config.json"])]


def test_extract_json_fenced_bare_or_none():
    assert extract_json('Here:\n```json\n{"is_bug": false, "summary": "ok"}\n```') == {"is_bug": False, "summary": "ok"}
    assert extract_json('verdict {"is_bug": true, "summary": "x {y}"} done') == {"is_bug": True, "summary": "x {y}"}
    assert extract_json("no json here {not json}") is None
