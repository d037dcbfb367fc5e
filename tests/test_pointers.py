"""Commands and failures that point at their cause: an option's value never moves pytest's root, an agent's
crash names the agent's own line and where its traceback is kept."""

import pytest


def _project_with_its_own_tests(pytester: pytest.Pytester) -> None:
    """A project as users have one: a pytest configuration whose testpaths is the benchmark, beside its own
    tests (named so that ``-k toy`` would select them too)."""
    (pytester.path / "pytest.ini").write_text("[pytest]\ntestpaths = toy_task\n")
    (pytester.mkdir("tests") / "test_own.py").write_text("def test_own_toy_check():\n    pass\n")


def test_the_resume_command_run_twice_never_collects_the_projects_tests(pytester, toy, bench):
    """A resume command as users wrote it: `--fmlbench-out DIR` as two words, DIR outside the project. Once DIR exists
    (a second run; the first run's xdist workers, started after the controller made it) pytest took DIR for
    a test path: its root moved, testpaths no longer applied and the project's own tests ran. Both runs stop
    with one line naming the fix; the fixed command runs, and resumes."""
    _project_with_its_own_tests(pytester)
    out = pytester.path.parent / f"{pytester.path.name}-runs"
    command = ("--agent=baseline", "--steps=1", "-k", "toy", "-n", "2", "--fmlbench-out", str(out))
    for _ in range(2):
        result = bench(*command)
        assert "test_own" not in result.stdout.str()
        assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
        error = [line for line in result.stderr.lines if line.strip()]
        assert len(error) == 1 and error[0].endswith(f"write --fmlbench-out={out} (one word)"), error
        assert error[0].startswith(f"ERROR: [fmlbench] --fmlbench-out {out}: pytest takes a separate value")
        out.mkdir(exist_ok=True)
    fixed = (*command[:-2], f"--fmlbench-out={out}")
    bench(*fixed).assert_outcomes(passed=1)
    again = bench(*fixed)
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["reused 1 finished run(s) recorded earlier*"])


def test_a_path_option_inside_the_project_as_two_words_keeps_the_root(pytester, toy, bench):
    _project_with_its_own_tests(pytester)
    pytester.mkdir("reports")
    # a value outside that is no path and never becomes one (the session creates only its output) is passed over
    elsewhere = pytester.path.parent / f"{pytester.path.name}-no-such-session"
    result = bench("--collect-only", "-q", "--agent=baseline", "--fmlbench-out", "reports/new", "--fmlbench-html",
                   "pytest.ini", "--fmlbench-compare", str(elsewhere))
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    assert [line for line in result.stdout.lines if "::" in line] == ["toy_task::toy_task[seed0]"]


CRASHES_BEFORE_ITS_FIRST_STEP = """
    from pytest_fmlbench import Agent

    class MyAgent(Agent):
        def run(self, session):
            config = self.read_config({})
            session.run_step("baseline")

        def read_config(self, files):
            return files["cfg.json"]
"""


@pytest.mark.parametrize("where", ["own process", "in process"])
def test_an_agent_crash_points_at_the_agents_line_and_where_its_traceback_is(pytester, toy, bench, write_agent,
                                                                            where):
    spec = write_agent(CRASHES_BEFORE_ITS_FIRST_STEP)
    source = (pytester.path / "my_agent.py").read_text().splitlines()
    line = source.index('        return files["cfg.json"]') + 1
    result = bench(f"--agent={spec}", *(["--agent-in-process"] if where == "in process" else []), "toy_task")
    result.assert_outcomes(errors=1)
    run_dir, = (pytester.path / "reports" / "fmlbench" / "runs" / "toy_task").iterdir()
    log = run_dir / "logs" / "agent.log"
    kept = f"{run_dir / 'record.json'} and {log}" if where == "own process" else f"{run_dir / 'record.json'}"
    result.stdout.fnmatch_lines([
        "toy_task: agent MyAgent crashed: KeyError: 'cfg.json'",
        f"  in the agent's code: {pytester.path / 'my_agent.py'}:{line} in read_config: return files[[]\"cfg.json\"]",
        f"  traceback: {kept}",
    ], consecutive=True)
    assert "agent crashed before its first step -> baseline" in result.stdout.str()
    assert "all val failed" not in result.stdout.str()
    if where == "own process":
        # the log holds the whole traceback, not only the header line of the agent's process
        text = log.read_text()
        assert "Traceback (most recent call last)" in text and f'line {line}, in read_config' in text
        assert text.rstrip().endswith("KeyError: 'cfg.json'")


def test_the_agents_frame_is_its_last_in_its_own_files_and_shown_as_text(tmp_path):
    from pytest_fmlbench.agent_host.crash_site import agent_frame

    agent = tmp_path / "agents" / "mine"
    trace = "\n".join([
        "Traceback (most recent call last):",
        '  File "/site/pytest_fmlbench/agent_host/child.py", line 32, in run_agent',
        "    agent.run(session)",
        f'  File "{agent}/loop.py", line 7, in run',
        "    self.step(session)",
        f'  File "{agent}/loop.py", line 12, in step',
        "    plan = json.loads(reply)\x1b[2J",
        "           ^^^^^^^^^^^^^^^^^",
        '  File "/usr/lib/python3.11/json/__init__.py", line 346, in loads',
        "    return _default_decoder.decode(s)",
        f'  File "{agent}x/other.py", line 1, in elsewhere',
        "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
    ])
    frame = agent_frame(trace, [str(agent)])
    assert (frame.file, frame.line, frame.function) == (f"{agent}/loop.py", 12, "step")
    assert str(frame) == f"{agent}/loop.py:12 in step: plan = json.loads(reply)\\x1b[2J"
    assert agent_frame(trace, []) is None


@pytest.mark.parametrize("error, reason", [
    ("val run exited with code 1\nTraceback (most recent call last):\n  File \"train.py\"\nKeyError: 'epochs'\n",
     "KeyError: 'epochs'"),
    ("constraint violated: epsilon (value 8.2 vs limit 3.0)", "constraint violated: epsilon (value 8.2 vs limit 3.0)"),
    ("val run timed out after 60 s (process group killed)\nepoch 3/100", "val run timed out after 60 s (process group killed)"),
])
def test_a_failed_steps_live_line_ends_with_its_reason(tmp_path, error, reason):
    from pytest_fmlbench.progress import LiveFile, failure_reason

    live = LiveFile(tmp_path, "run", "toy_task[seed0]", 3, 0.76, "higher", 1.0)
    live.update(step=1, done=1, action="tweak", failed=1,
                last={"action": "tweak", "success": False, "metric": None, "reason": failure_reason(error)})
    live.update(step=2, done=2, action="tweak", best_val=0.8,
                last={"action": "tweak", "success": True, "metric": 0.8, "reason": ""})
    (_, failed), (_, passed) = live.state["lines"]
    assert failed.startswith("[fmlbench] toy_task[seed0] step 1/3 tweak -> failed; ")
    assert failed.endswith(f"; reason: {reason}")
    assert "reason" not in passed



@pytest.mark.parametrize("fields, note", [
    ({"error": "agent a crashed: KeyError: 'cfg.json'\nTraceback ...", "steps_used": 0},
     "agent crashed before its first step -> baseline"),
    ({"error": "agent a exceeded its time budget of 8 s; its process was killed", "steps_used": 0},
     "agent failed before its first step -> baseline"),
    # a step ran: the agent's crash came later, its steps' outcome stands
    ({"error": "agent a crashed: KeyError: 'x'", "steps_used": 1},
     "all val failed -> baseline"),
    ({"error": "harness error: prepare exited with code 1", "steps_used": 0},
     "all val failed -> baseline"),
])
def test_the_note_says_the_agent_failed_before_its_first_step(fields, note):
    from scoring.records import record

    from pytest_fmlbench.scoring import score_run
    from pytest_fmlbench.scoring.runs import from_record

    scored = score_run(from_record(record(status="error", test_metric=None, test_on_baseline=True,
                                          valid_steps=0, best_val=None, **fields), []))
    assert scored["note"].startswith(note), scored["note"]


def test_a_crash_keeps_the_agents_frame_under_many_of_a_librarys(tmp_path):
    """The traceback an agent's process sends kept its last six frames only: a crash deep in a library
    (torch, pandas) lost the agent's own line."""
    from pytest_fmlbench.agent_host.child import crashed
    from pytest_fmlbench.agent_host.crash_site import agent_frame

    library = tmp_path / "library.py"
    library.write_text("def descend(depth):\n    if depth == 0:\n        raise KeyError('cfg.json')\n"
                       "    descend(depth - 1)\n")
    namespace: dict = {}
    exec(compile(library.read_text(), str(library), "exec"), namespace)
    agent = tmp_path / "agent.py"
    agent.write_text("def run(descend):\n    descend(10)\n")
    exec(compile(agent.read_text(), str(agent), "exec"), namespace)
    try:
        namespace["run"](namespace["descend"])
    except KeyError as exc:
        done = crashed(exc)
    frame = agent_frame(done["traceback"], [str(agent)])
    assert (frame.file, frame.line, frame.function, frame.source) == (str(agent), 2, "run", "descend(10)")
