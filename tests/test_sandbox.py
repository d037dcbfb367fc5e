"""--sandbox: tampering fails inside bubblewrap instead of merely being caught afterwards."""

import shutil

import pytest

from conftest import load_record
from test_attacks import attack

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


def test_protected_files_are_read_only_and_private_labels_hidden(pytester, toy, bench, write_agent):
    spec = attack(write_agent, """
        import numpy, os
        assert not os.listdir(os.path.dirname(os.environ['HARNESS_FILE'])), 'the harness is visible'
        for action in (lambda: open('train.py', 'a').write('# patched'),
                       lambda: os.remove('data/dev.npz'),
                       lambda: open(os.environ['HARNESS_FILE'], 'a').write('# patched')):
            try:
                action()
            except OSError as exc:
                print('refused:', exc)
        assert not os.listdir('../private'), 'the labels are visible'
        numpy.save('../private/dev_labels.npy', numpy.zeros(400, dtype=int))
    """)
    (pytester.path / "conftest.py").write_text(
        f"import os\nos.environ['HARNESS_FILE'] = {str(toy / 'harness' / 'evaluate.py')!r}\n")
    result = bench(f"--agent={spec}", "--sandbox", "toy_task")
    result.assert_outcomes(passed=1)
    record = load_record(pytester.path)
    assert record["integrity"] == "ok" and record["valid_steps"] == 1
    assert record["best_val"] == pytest.approx(0.76)  # scored against the real labels
    log = next(pytester.path.glob("reports/fmlbench/runs/toy_task/*/logs/step_0001_val.log")).read_text()
    # deleting a bound file: EBUSY; the harness write lands in a throwaway in-memory stand-in
    assert log.count("refused:") == 2 and "Read-only file system" in log


def test_no_network_inside(pytester, toy, bench, write_agent):
    spec = attack(write_agent, """
        import socket
        try:
            socket.create_connection(("127.0.0.1", 9), timeout=2)
        except OSError as exc:
            print("network:", exc)
        print("interfaces:", [name for _, name in socket.if_nameindex()])
    """)
    bench(f"--agent={spec}", "--sandbox", "toy_task").assert_outcomes(passed=1)
    log = next(pytester.path.glob("reports/fmlbench/runs/toy_task/*/logs/step_0001_val.log")).read_text()
    assert "interfaces: ['lo']" in log
