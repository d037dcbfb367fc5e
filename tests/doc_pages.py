"""The README and the documentation site's pages, read as the tests that run their examples read them.

An example shown in several places (the README and a page) is run once, after checking that every place
shows the same text, so none of its copies can drift from what the test runs."""

import re
from pathlib import Path

REPO = Path(__file__).parent.parent


def document(name: str) -> str:
    """``README.md``, or a page of the site by its path under ``docs/`` (``how-to/write-an-agent.md``)."""
    return (REPO / name if name == "README.md" else REPO / "docs" / name).read_text()


def one_example(pattern: str, *names: str) -> str:
    """The first group of ``pattern`` (a regular expression, DOTALL) in each named document: the same in all."""
    found = {}
    for name in names:
        match = re.search(pattern, document(name), re.S)
        assert match, f"{name} no longer shows the example /{pattern}/"
        found[name] = match.group(1)
    first, *others = found.values()
    assert all(text == first for text in others), f"the example differs between {list(found)}"
    return first


def lines_starting(prefixes: tuple[str, ...], *names: str) -> list[str]:
    """Each line of the named documents that starts with one of ``prefixes``, once, in the order shown."""
    lines = [line for name in names for line in document(name).splitlines() if line.startswith(prefixes)]
    return list(dict.fromkeys(lines))
