"""The README's examples, and the site pages' copies of them, work as written; the layout list (the README's,
the same as the site's) matches the folders."""

import fnmatch
import re

from conftest import REPO, load_record
from doc_pages import document, one_example


def test_readme_agent_example(pytester, toy, bench):
    example = one_example(r"```python\n(# my_agent.py.*?)```", "README.md", "how-to/write-an-agent.md")
    command = re.search(r"->\s+pytest (.*)", example).group(1).split()
    (pytester.path / "my_agent.py").write_text(example)
    result = bench(*command, "toy_task")
    result.assert_outcomes(passed=1)
    record = load_record(pytester.path)
    assert record["agent"] == "tweak" and record["agent_options"] == {"lr": 0.05} and record["steps_used"] == 1


def test_readme_compare_example(pytester, toy, bench, monkeypatch):
    """Each command of the compare block (the README's, the same as the how-to's), in order, on the toy task."""
    import shlex
    import sys

    monkeypatch.setenv("FMLBENCH_ENCODER", "none")  # exploration metrics play no part here
    block = one_example(r"<!-- compare-example -->\n```bash\n(.*?)```", "README.md", "how-to/compare-sessions.md")
    commands = [shlex.split(line.split("#")[0]) for line in block.splitlines() if line.strip()]
    assert [c[0] for c in commands] == ["pytest", "pytest", "fmlbench", "pytest", "fmlbench"]
    outputs = []
    for program, *args in commands:
        if program == "pytest":
            result = bench(*args, "toy_task")
            result.assert_outcomes(passed=1)
        else:
            result = pytester.run(sys.executable, "-m", "pytest_fmlbench.cli", *args)
        assert result.ret == 0, result.stdout.str() + result.stderr.str()
        outputs.append(result.stdout.str())
    assert "FML-bench comparison" in outputs[1] and "no task lost more than 0.05 in signed improvement or NI" in outputs[1]
    assert "random-search/-" in outputs[2] and (pytester.path / "compare.json").is_file()
    assert "baseline/- -> random-search/-" in outputs[4] and "toy_task" in outputs[4]
    assert len(list((pytester.path / "reports" / "fmlbench" / "sessions").glob("0*.json"))) == 2


def test_soak_loop_counts_green_rounds_and_keeps_failed_logs(pytester):
    """`make soak` runs scripts/soak.sh: N fresh sessions beside CPU burners, failed rounds' logs kept."""
    import os
    import subprocess
    import sys

    pytester.makepyfile(test_flaky="""
        import os, pathlib
        def test_fails_on_the_second_round():
            counter = pathlib.Path(os.environ["ROUNDS_FILE"])
            counter.write_text(counter.read_text() + "x" if counter.exists() else "x")
            assert len(counter.read_text()) != 2
    """)
    logs = pytester.path / "soak-logs"
    env = {**os.environ, "PY": sys.executable, "SOAK_LOGS": str(logs), "ROUNDS_FILE": str(pytester.path / "rounds")}
    done = subprocess.run([str(REPO / "scripts" / "soak.sh"), "3", "1", str(pytester.path / "test_flaky.py"),
                           "-p", "no:cacheprovider", f"--rootdir={pytester.path}"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("soak: round 1/3 green in ") and "1 passed" in lines[0]
    assert "round 2/3 FAILED" in lines[1] and "1 failed" in lines[1] and "round 3/3 green" in lines[2]
    assert re.fullmatch(r"soak: 2 of 3 rounds green, 1 CPU burner\(s\), \d+ s", lines[3])
    assert sorted(p.name for p in logs.iterdir()) == ["round-2.log"]
    assert "test_fails_on_the_second_round" in (logs / "round-2.log").read_text()


def layout_rooms(readme: str) -> list[list[str]]:
    """The README's "How the code is laid out" list: per line, its paths from the repository's root (the
    line's first path is from the root, the others sit in the first one's folder)."""
    block = re.search(r"<!-- layout -->\n((?:- .*\n)+)", readme).group(1)
    rooms = []
    for line in block.splitlines():
        head = re.match(r"- ((?:`[^`]+`, )*`[^`]+`): ", line)
        assert head, f"a layout line names its paths in backticks, then a colon: {line!r}"
        first, *others = re.findall(r"`([^`]+)`", head.group(1))
        folder = first.rstrip("/").rpartition("/")[0]
        rooms.append([first, *(f"{folder}/{name}" if folder else name for name in others)])
    return rooms


def _ignored(name: str) -> bool:
    patterns = [p.strip().strip("/") for p in (REPO / ".gitignore").read_text().splitlines() if p.strip()]
    return any(fnmatch.fnmatch(name, pattern) for pattern in patterns)


def test_readme_layout_matches_the_folders():
    """Each listed room exists, and every top-level module and folder of the package, and every folder of
    the repository (hidden and ignored ones aside), is listed once; the site's layout page lists the same."""
    rooms = layout_rooms(document("README.md"))
    assert layout_rooms(document("explanation/layout.md")) == rooms
    listed = [path for room in rooms for path in room]
    assert len(listed) == len(set(listed)), f"listed twice: {sorted({p for p in listed if listed.count(p) > 1})}"
    for path in listed:
        target = REPO / path
        assert (target.is_dir() if path.endswith("/") else target.is_file()), f"the README lists {path}, which is not there"
    package = REPO / "pytest_fmlbench"
    expected = {f"pytest_fmlbench/{p.name}" for p in package.glob("*.py") if p.name != "__init__.py"}
    expected |= {f"pytest_fmlbench/{p.name}/" for p in package.iterdir() if p.is_dir() and p.name != "__pycache__"}
    expected |= {f"{p.name}/" for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")
                 and not _ignored(p.name) and p.name != "pytest_fmlbench"}
    missing = sorted(expected - set(listed))
    assert not missing, f"not in the README's layout: {missing}"
