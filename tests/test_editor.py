import os

import pytest

from pytest_fmlbench.editor import Editor, SearchReplace, WholeFile


@pytest.fixture
def editor(tmp_path):
    (tmp_path / "algo.py").write_text("x = 1\ny = 2\n")
    (tmp_path / "config.json").write_text('{"lr": 0.1}\n')
    (tmp_path / "train.py").write_text("print('protected')\n")
    return Editor(tmp_path, ["algo.py", "config.json"])


def test_whole_file_and_search_replace(editor):
    result = editor.apply([WholeFile("config.json", '{"lr": 0.5}'), SearchReplace("algo.py", "y = 2", "y = 3")])
    assert result.applied and result.changed == ("algo.py", "config.json")
    assert editor.read() == {"algo.py": "x = 1\ny = 3\n", "config.json": '{"lr": 0.5}'}


def test_search_must_match_exactly_once(editor):
    assert "not found" in editor.apply([SearchReplace("algo.py", "z = 9", "z = 1")]).error
    (editor.workspace / "algo.py").write_text("a = 1\na = 1\n")
    assert "matches 2 places" in editor.apply([SearchReplace("algo.py", "a = 1", "b")]).error


def test_search_tolerates_trailing_whitespace(editor):
    assert editor.apply([SearchReplace("algo.py", "x = 1   \ny = 2", "x = 5\ny = 2")]).applied
    assert editor.read()["algo.py"] == "x = 5\ny = 2\n"


def test_only_editable_files_are_written(editor):
    result = editor.apply([WholeFile("train.py", "print('pwned')")])
    assert not result.applied and "'train.py' is not editable" in result.error
    assert (editor.workspace / "train.py").read_text() == "print('protected')\n"
    assert not editor.apply([WholeFile("../algo.py", "x = 0")]).applied


def test_invalid_python_or_json_changes_nothing(editor):
    before = editor.read()
    result = editor.apply([WholeFile("config.json", '{"lr": 1}'), WholeFile("algo.py", "def broken(:\n")])
    assert not result.applied and "algo.py: does not parse" in result.error
    assert editor.read() == before
    assert "invalid JSON" in editor.apply([WholeFile("config.json", "{lr: 1}")]).error


def test_a_planted_link_is_replaced_not_followed(editor):
    os.remove(editor.workspace / "algo.py")
    os.symlink(editor.workspace / "train.py", editor.workspace / "algo.py")
    assert editor.apply([WholeFile("algo.py", "x = 2\n")]).applied
    assert not (editor.workspace / "algo.py").is_symlink()
    assert (editor.workspace / "train.py").read_text() == "print('protected')\n"


def test_an_empty_edit_is_reported(editor):
    assert editor.apply([]).error == "the edit contains no file changes"


def test_an_editable_file_replaced_by_a_link_is_never_followed(tmp_path):
    # the experiment can swap an editable file for a link to a credential: the harness must not copy
    # the credential into snapshots or the next LLM prompt
    secret = tmp_path / "netrc"
    secret.write_text("machine x password SECRET")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "config.json").symlink_to(secret)
    assert Editor(workspace, ["config.json"]).read() == {"config.json": ""}
