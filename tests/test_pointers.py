"""Commands and failures that point at their cause: an option's value never moves pytest's root, an agent's
crash names the agent's own line and where its traceback is kept."""

import pytest


def _project_with_its_own_tests(pytester: pytest.Pytester) -> None:
    """A project as users have one: a pytest configuration whose testpaths is the benchmark, beside its own
    tests (named so that ``-k toy`` would select them too)."""
    (pytester.path / "pytest.ini").write_text("[pytest]\ntestpaths = toy_task\n")
    (pytester.mkdir("tests") / "test_own.py").write_text("def test_own_toy_check():\n    pass\n")


def test_the_resume_command_run_twice_never_collects_the_projects_tests(pytester, toy, bench):
    """README's resume command: `--fmlbench-out DIR` as two words, DIR outside the project. Once DIR exists
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
    result = bench("--collect-only", "-q", "--agent=baseline", "--fmlbench-out", "reports/new", "--fmlbench-html",
                   "pytest.ini")
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    assert [line for line in result.stdout.lines if "::" in line] == ["toy_task::toy_task[seed0]"]
