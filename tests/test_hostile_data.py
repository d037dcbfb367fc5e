"""What an agent sends is an adversary's data, all the way to every sink (threat model, principle 8).

One session, two workers, three items of one user agent on the toy task: seed 0 sends text that rich,
terminals, spreadsheets, browsers and XML readers would interpret (it is all valid protocol data), seed 1
breaks the protocol's text rules after one honest step (raw on its socket: the Python client would spell
the escape sequence out), seed 2 is honest. The session must report every
item, show the hostile text as text in every sink, and give the broken item its final test. Seed 2 also has
one failed step, whose live line must say why it failed.
"""

import csv
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import junit_props

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

# valid protocol text that every sink would misread if it interpreted it
MARKUP = "[/][bold red]x[link=file:///etc/passwd]y"
FORMULA = '=HYPERLINK("http://example.org","x")'
SCRIPT = "</script><script>alert(1)</script>]]>"

AGENT = '''
import random
from pytest_fmlbench import Agent

MARKUP, FORMULA, SCRIPT = {markup!r}, {formula!r}, {script!r}


class Hostile(Agent):
    name = "hostile-data"

    def run(self, session):
        # which seed this item is: the harness seeds the agent's RNG with "<seed>:<task>:<agent>"
        draw = session.rng.random()
        seed = next(s for s in range(3) if random.Random(f"{{s}}:{{session.task.id}}:hostile-data").random() == draw)
        if seed == 0:
            session.run_step(MARKUP, plan=FORMULA + "\\n" + SCRIPT, analysis="+1+1\\t@SUM(A1)",
                             extra={{MARKUP: [FORMULA, {{"deep": SCRIPT}}], "-2": -0.5}})
            self.end_reason = MARKUP + " " + FORMULA
        elif seed == 1:
            session.run_step("honest", plan="one honest step")
            # past the Python client, which spells control characters out: raw on the agent's socket
            import json, socket, sys, time
            sock = socket.socket(fileno=int(sys.argv[-1]))
            request = {{"id": 99, "op": "run_step", "args": {{"action": "escape", "plan": "\\x1b]0;owned\\x07\\x1b[2J"}}}}
            sock.sendall(json.dumps(request).encode() + b"\\n")
            time.sleep(60)
        else:
            # a failed step first (its live line ends with its reason), then the baseline's code again
            session.set_files({{"config.json": '{{"lr": 0.01}}'}})
            session.run_step("no epochs")
            session.set_files(session.baseline_files)
            session.run_step("honest", plan="one honest step")
'''


def _records(project: Path) -> dict[int, dict]:
    records = [json.loads(p.read_text()) for p in (project / "reports/fmlbench/runs/toy_task").glob("*/record.json")]
    return {record["seed"]: record for record in records}


def test_a_hostile_agents_data_reaches_every_sink_as_text_and_the_session_reports_every_item(
        pytester, toy, bench, write_agent, real_encoder):  # the hostile code goes through the real tokenizer too
    spec = write_agent(AGENT.format(markup=MARKUP, formula=FORMULA, script=SCRIPT), cls="Hostile")
    result = bench(f"--agent={spec}", "--steps=2", "--seeds=3", "-n", "2", "--junitxml=out.xml",
                   "--fmlbench-html=report.html", "toy_task")
    result.assert_outcomes(passed=2, errors=1)
    out = result.stdout.str()
    # the session's tables were printed, and the terminal got no escape sequence from the agent
    assert "FML-bench results" in out and "\x1b]0;owned" not in out and "\x1b[2J" not in out
    assert "Traceback" not in out
    # seed 2's failed step: its live line says why it failed
    result.stdout.fnmatch_lines(["[[]fmlbench] toy_task[[]seed2] step 1/2 no epochs -> failed; *; reason: KeyError: 'epochs'"])

    records = _records(pytester.path)
    assert sorted(records) == [0, 1, 2]
    hostile, broken, honest = records[0], records[1], records[2]
    assert hostile["status"] == "finished" and hostile["end_reason"] == MARKUP + " " + FORMULA
    steps = [json.loads(line) for line in
             (pytester.path / "reports/fmlbench/runs/toy_task").glob("*seed0*/steps.jsonl").__next__().read_text().splitlines()]
    assert steps[0]["action"] == MARKUP and steps[0]["plan"] == FORMULA + "\n" + SCRIPT
    # the protocol refused the escape sequence: the agent ended with one line, its step stayed, and the best
    # code so far had its final test
    assert broken["status"] == "error" and broken["steps_used"] == 1
    assert broken["test_metric"] == pytest.approx(0.72)
    assert "\n" not in broken["error"].split("\n")[0] and "protocol" in broken["error"]
    assert honest["status"] == "finished" and honest["test_metric"] == pytest.approx(0.72)

    # CSV: no cell starts a formula, numbers stay numbers
    cells = [cell for path in (pytester.path / "reports/fmlbench/reports").rglob("*.csv")
             for row in csv.reader(path.open(encoding="utf-8")) for cell in row]
    assert cells and not [cell for cell in cells
                          if cell.startswith(("=", "+", "@", "\t", "\r")) or (cell.startswith("-") and not _number(cell))]
    assert any(MARKUP + " " + FORMULA in cell for cell in cells)  # the end reason, in the notes, as text

    # HTML: the agent's script is text inside the page, never an element of it
    page = (pytester.path / "report.html").read_text(encoding="utf-8")
    assert "hostile-data" in page and "<script>alert(1)" not in page

    # JUnit: valid XML, every item's properties there
    ET.parse(pytester.path / "out.xml")
    assert {junit_props(pytester.path / "out.xml", f"toy_task[seed{seed}]")["status"] for seed in range(3)} == {
        "finished", "error"}


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
