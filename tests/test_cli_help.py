"""``fmlbench --help`` and each command's help read as plain text in a terminal."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_fmlbench.cli import COMMAND_NAMES

# reStructuredText and Sphinx markup that a terminal shows as literal characters
MARKUP = re.compile(r"``|`[^`\s][^`]*`_?|:(?:func|class|meth|mod|attr|data|ref):")


def fmlbench(*args: str) -> str:
    script = Path(sys.executable).with_name("fmlbench")  # the console script a user runs
    done = subprocess.run([str(script), *args], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "COLUMNS": "100"})
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("command", [[]] + [[name] for name in COMMAND_NAMES], ids=lambda c: " ".join(c) or "fmlbench")
def test_help_is_plain_text(command):
    out = fmlbench(*command, "--help")
    assert out.startswith("usage: fmlbench")
    assert not MARKUP.search(out), MARKUP.search(out).group(0)


def test_top_level_help_names_every_command_with_an_example():
    out = fmlbench("--help")
    for name in COMMAND_NAMES:
        assert re.search(rf"^  fmlbench {name} ", out, re.M), name
    assert "'fmlbench COMMAND --help'" in out
