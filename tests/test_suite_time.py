"""scripts/suite_time.py: the suite's time per folder and its slowest tests, from the JUnit XML `make test` writes."""

import re
import subprocess
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from conftest import REPO


def suite_time(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "suite_time.py"), *map(str, args)],
                          capture_output=True, text=True)


def test_suite_time_reads_the_files_and_outcomes_of_pytests_own_junit_xml(pytester):
    pytester.makepyfile(**{
        "tests/tasks/test_task": """
            def test_one():
                pass
            class TestGroup:
                def test_two(self):
                    pass
        """,
        "tests/test_top": """
            import pytest
            @pytest.mark.parametrize("x", [1, 2])
            def test_param(x):
                pass
            def test_skipped():
                pytest.skip("no")
        """,
    })
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--junitxml=tests.xml", "tests").assert_outcomes(
        passed=4, skipped=1)
    out = suite_time(pytester.path / "tests.xml", "--slowest", "5").stdout
    assert "5 tests: 4 passed, 1 skipped" in out
    slowest = out.split("slowest tests")[1].strip().splitlines()
    assert sorted(line.split()[-1] for line in slowest) == [
        "tests/tasks/test_task.py::test_one", "tests/tasks/test_task.py::test_two", "tests/test_top.py::test_param[1]",
        "tests/test_top.py::test_param[2]", "tests/test_top.py::test_skipped"]


def test_suite_time_sums_each_folder_and_lists_the_slowest_tests(tmp_path):
    cases = [("tests.tasks.test_a", "test_x", 30.0), ("tests.tasks.test_b.TestB", "test_y", 20.0),
             ("tests.test_top", "test_p[0.5]", 40.0), ("tests.agents.test_c", "test_z", 5.0)]
    (tmp_path / "t.xml").write_text(
        '<testsuites><testsuite name="pytest">'
        + "".join(f'<testcase classname="{c}" name="{n}" time="{t}"/>' for c, n, t in cases)
        + "</testsuite></testsuites>")
    out = suite_time(tmp_path / "t.xml", "--wall", "90", "--slowest", "2").stdout
    assert "wall                90.0 s    1.5 min" in out
    assert "test time           95.0 s    1.6 min" in out
    folders = out.split("per folder")[1].split("the ten most costly files")[0].strip().splitlines()[1:]
    # a file directly under tests/ is its own row; a folder's row sums its files
    assert [row.split()[-1] for row in folders] == ["tests/tasks", "tests/test_top.py", "tests/agents"]
    assert folders[0].split()[0] == "50.0" and "52.6%" in folders[0]
    slowest = out.split("slowest tests")[1].strip().splitlines()
    assert [line.split()[-1] for line in slowest] == ["tests/test_top.py::test_p[0.5]", "tests/tasks/test_a.py::test_x"]


def test_suite_time_names_an_unreadable_file_in_one_line(tmp_path):
    done = suite_time(tmp_path / "missing.xml")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "cannot read" in done.stderr


def test_the_suites_own_tests_record_their_processor_time(pytester):
    """tests/conftest.py adds each test's processor time, its child processes' included, to the JUnit XML: a test
    that sleeps records next to none, one that computes in a child process records that child's time (processor
    time, whatever else the machine runs meanwhile), also in a child pytest forked from the zygote
    (tests/pytest_zygote.py), which is no child of the test's process."""
    pytester.makeconftest((REPO / "tests" / "conftest.py").read_text())
    shutil.copy(REPO / "tests" / "pytest_zygote.py", pytester.path)
    inner = pytester.mkdir("inner")
    (inner / "pytest.ini").write_text("[pytest]\n")
    (inner / "test_spins.py").write_text("import time\n\ndef test_spins():\n    t = time.process_time()\n"
                                         "    while time.process_time() - t < 1.0:\n        pass\n")
    pytester.makepyfile(test_work="""
        import os, subprocess, sys, time
        from conftest import child_pytest

        def test_waits():
            time.sleep(1.0)

        def test_computes_in_a_child():
            subprocess.run([sys.executable, "-c", "t = __import__('time').process_time()\\n"
                            "while __import__('time').process_time() - t < 1.0: pass"], check=True)

        def test_computes_in_a_forked_child_pytest():
            command = child_pytest()
            assert "pytest_zygote.py" in command[-1]
            done = subprocess.run([*command, "-p", "no:cacheprovider", "-q", "test_spins.py"], cwd="inner",
                                  capture_output=True, text=True)
            assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr
    """)
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "--junitxml=tests.xml", "test_work.py").assert_outcomes(passed=3)
    cases = {case.get("name"): case for case in ET.parse(pytester.path / "tests.xml").getroot().iter("testcase")}
    cpu = {name: float(next(p.get("value") for p in case.iter("property") if p.get("name") == "cpu_s"))
           for name, case in cases.items()}
    assert cpu["test_waits"] < 0.5 and float(cases["test_waits"].get("time")) >= 1.0, cpu
    assert 1.0 <= cpu["test_computes_in_a_child"] < 3.0, cpu
    assert 1.0 <= cpu["test_computes_in_a_forked_child_pytest"] < 6.0, cpu


def test_suite_time_says_how_busy_each_row_is_and_which_tests_waited():
    cases = [("tests.test_slurm", "test_queue", 40.0, 4.0), ("tests.tasks.test_a", "test_run", 30.0, 29.0),
             ("tests.tasks.test_b", "test_old", 10.0, None)]
    xml = "".join(f'<testcase classname="{c}" name="{n}" time="{t}">'
                  + (f'<properties><property name="cpu_s" value="{cpu}"/></properties>' if cpu is not None else "")
                  + "</testcase>" for c, n, t, cpu in cases)
    path = Path(tempfile.mkdtemp()) / "t.xml"
    path.write_text(f'<testsuites><testsuite name="pytest">{xml}</testsuite></testsuites>')
    out = suite_time(path, "--slowest", "2").stdout
    assert "processor time      33.0 s    0.6 min  (of the 2 tests that recorded it" in out
    rows = {line.split()[-3]: line.split()[-1] for line in out.splitlines() if "  busy " in line}
    # a folder's share is of the tests that recorded their time: 29 s of 30
    assert rows["tests/tasks"] == "97%" and rows["tests/test_slurm.py"] == "10%"
    waited = out.split("waited longest (test time less processor time)")[1].strip().splitlines()
    assert [line.split()[0] for line in waited] == ["36.0", "1.0"]
    assert waited[0].split()[2] == "tests/test_slurm.py::test_queue"


def test_process_cpu_charges_a_commands_processor_time_to_its_kind_of_process(tmp_path):
    """scripts/process_cpu.py: the command's own processes are found with what they spent, and named by kind."""
    out = tmp_path / "cpu.json"
    spin = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\n"
    (tmp_path / "train.py").write_text(spin)
    script = REPO / "scripts" / "process_cpu.py"
    done = subprocess.run([sys.executable, str(script), "run", str(out), "--", sys.executable, "train.py"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    import json

    processes = json.loads(out.read_text())["processes"].values()
    (spent,) = [last - first for command, first, last in processes if command.endswith("train.py")]
    assert 0.4 <= spent <= 1.5  # sampled ten times a second: the last tenth of a second may be missed
    shown = subprocess.run([sys.executable, str(script), "show", str(out)], capture_output=True, text=True).stdout
    assert re.search(r"^ +\d+\.\d s +\d+\.\d min +\d+ processes  experiment$", shown, re.M), shown
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from process_cpu import kind_of
    finally:
        sys.path.remove(str(REPO / "scripts"))
    assert kind_of("/v/bin/python -s -B -m pytest_fmlbench.agent_host.child run 20") == "agent host"
    assert kind_of("/v/bin/python -mpytest --basetemp=/tmp/x -p no:cacheprovider") == "child pytest"
    assert kind_of("/v/bin/python /r/pytest_fmlbench/isolation/warm/parent/main.py 16") == "warm parent"
