"""--agent=external: any program drives a run over a UNIX socket, with the docs' stdlib-only client."""

import os
import queue
import re
import subprocess
import sys
import threading

import pytest

from conftest import REPO, junit_props, load_record

DOCS = REPO / "docs" / "agent-protocol.md"
WAITING = re.compile(r"toy_task\[seed0\]: waiting for an external agent on (\S+) \(agent protocol version 2\)")


def docs_client() -> str:
    return re.search(r"<!-- external-client -->\n```python\n(.*?)```", DOCS.read_text(), re.S).group(1)


def start(project, *args) -> tuple[subprocess.Popen, "queue.Queue[str]"]:
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--agent=external", *args],
                            cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)  # the end of its output

    threading.Thread(target=read, daemon=True).start()
    return proc, lines


def announced(lines: "queue.Queue[str]", seen: list[str]) -> str:
    while True:
        line = lines.get(timeout=180)
        assert line is not None, "the session ended before it waited for an agent:\n" + "".join(seen)
        seen.append(line)
        found = WAITING.search(line)
        if found:
            return found.group(1)


def finish(proc: subprocess.Popen, lines: "queue.Queue[str]", seen: list[str]) -> str:
    proc.wait(timeout=300)
    # every line it wrote, however slowly the reader gets to them on a busy machine
    while (line := lines.get(timeout=300)) is not None:
        seen.append(line)
    return "".join(seen)


def test_the_docs_client_is_short_and_uses_the_standard_library_alone():
    client = docs_client()
    assert len([line for line in client.splitlines() if line.strip()]) <= 32
    imports = {name.strip() for line in client.splitlines() if line.startswith("import ")
               for name in line[len("import "):].split(",")}
    assert imports == {"json", "random", "socket", "sys"} and "from " not in client


def test_the_docs_client_drives_a_task_through_the_socket(pytester, toy):
    (pytester.path / "external_agent.py").write_text(docs_client())
    proc, lines = start(pytester.path, "--steps=3", "--junitxml=out.xml", "toy_task")
    seen: list[str] = []
    try:
        path = announced(lines, seen)
        assert os.stat(os.path.dirname(path)).st_mode & 0o077 == 0  # a folder only its owner can enter
        # -S: no site-packages at all, the standard library alone
        client = subprocess.run([sys.executable, "-S", "external_agent.py", path], cwd=pytester.path,
                                capture_output=True, text=True, timeout=300)
    finally:
        output = finish(proc, lines, seen)
    assert client.returncode == 0, client.stderr
    assert proc.returncode == 0, output[-3000:]
    assert [line.split()[0] for line in client.stdout.splitlines()[:3]] == ["1", "2", "3"]
    assert client.stdout.splitlines()[3].startswith("best: {")
    assert not os.path.exists(path)
    record = load_record(pytester.path)
    assert (record["agent"], record["agent_process"], record["status"], record["steps_used"]) == \
        ("external", "external", "finished", 3)
    assert record["test_metric"] is not None and record["integrity"] == "ok"
    props = junit_props(pytester.path / "out.xml", "toy_task[seed0]")
    assert props["agent_process"] == "external"
    assert "external agent" in output  # the tables' note


def test_a_client_that_leaves_early_fails_the_item_in_one_line_and_the_run_resumes(pytester, toy):
    quitter = docs_client().replace('while ask("steps")["left"] > 0:', 'while ask("steps")["used"] < 1:')
    quitter = quitter[:quitter.index('print("best:"')]  # leaves without saying it is done
    (pytester.path / "quitter.py").write_text(quitter)
    proc, lines = start(pytester.path, "--steps=3", "toy_task")
    seen: list[str] = []
    try:
        path = announced(lines, seen)
        subprocess.run([sys.executable, "-S", "quitter.py", path], cwd=pytester.path, timeout=300, check=True,
                       capture_output=True)
    finally:
        output = finish(proc, lines, seen)
    assert proc.returncode == 1
    assert "toy_task: agent external disconnected before it said it was done" in output
    record = load_record(pytester.path)
    assert record["status"] == "error" and record["steps_used"] == 1 and record["test_metric"] is not None
    # the same command again: the recorded step is replayed for the next client, not run again
    (pytester.path / "external_agent.py").write_text(docs_client())
    proc, lines = start(pytester.path, "--steps=3", "toy_task")
    seen = []
    try:
        path = announced(lines, seen)
        client = subprocess.run([sys.executable, "-S", "external_agent.py", path], cwd=pytester.path,
                                capture_output=True, text=True, timeout=300)
    finally:
        output = finish(proc, lines, seen)
    assert proc.returncode == 0, output[-3000:]
    record = load_record(pytester.path)
    assert record["status"] == "finished" and record["resumed_from_step"] == 1 and record["steps_used"] == 3


@pytest.mark.parametrize("extra", [["--agent-opt", "x=1"], ["--agent-in-process"]])
def test_external_takes_no_agent_options(pytester, toy, bench, extra):
    result = bench("--agent=external", *extra, "toy_task")
    result.stderr.fnmatch_lines(["ERROR: --agent=external is another program: --agent-opt and --agent-in-process "
                                 "do not apply to it"])
