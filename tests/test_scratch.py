"""Temporary folders of the harness: one scratch folder per process, removed at its exit, and by the user's
next process where it was killed first (every cancelled Slurm job: submitit bypasses scancel's SIGTERM, then
Slurm sends SIGKILL)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

# what a run's process leaves in its scratch folder: code-only copies of hidden data folders, the agent's
# working copy (with a folder a tool made unreadable), the gateway's socket folder
MAKES_SCRATCH = """
import os, sys, tempfile, time
tempfile.tempdir = {tmp!r}
from pathlib import Path
from pytest_fmlbench import scratch
from pytest_fmlbench.isolation import package_data
from pytest_fmlbench.agent_host.working_copy import WorkingCopy

package_data.masks().binds()
source = Path(scratch.mkdtemp(prefix="source-"))
(source / "train.py").write_text("print(1)")
copy = WorkingCopy.create(source, [], [])
locked = copy.path / "locked"
(locked / "inner").mkdir(parents=True)
(locked / "inner" / "file").write_text("x")
os.chmod(locked / "inner", 0o000)
print(scratch.folder(), flush=True)
if sys.argv[1] == "killed":
    os.kill(os.getpid(), 9)
elif sys.argv[1] == "living":
    time.sleep(120)
"""


def _run(tmp_path: Path, how: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", MAKES_SCRATCH.format(tmp=str(tmp_path)), how],
                          capture_output=True, text=True, timeout=120)


def test_a_killed_process_s_folder_is_removed_by_the_next_and_never_a_living_one_s(tmp_path):
    killed = _run(tmp_path, "killed")
    assert killed.returncode == -9, killed.stderr
    killed_root = Path(killed.stdout.strip())
    assert killed_root.parent == tmp_path
    assert {p.name.split("-")[0] for p in killed_root.iterdir()} >= {"code", "source", "workdir"}, killed.stderr
    being_made = tmp_path / "fmlbench-scratch-being-made"  # no owner file yet: not ours to judge
    being_made.mkdir()
    living = subprocess.Popen([sys.executable, "-c", MAKES_SCRATCH.format(tmp=str(tmp_path)), "living"],
                              stdout=subprocess.PIPE, text=True)
    try:
        # the killed one's lock is free: the next process removes its folder, unreadable corners included
        living_root = Path(living.stdout.readline().strip())
        assert living_root.parent == tmp_path and not killed_root.exists() and being_made.is_dir()
        # and never a living one's
        after = _run(tmp_path, "ends")
        assert after.returncode == 0, after.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([living_root.name, being_made.name])
        assert (living_root / ".owner").is_file() and len(list(living_root.iterdir())) > 1
    finally:
        living.kill()
        living.wait()


def test_the_folder_is_removed_at_exit_also_when_a_ctrl_c_lands_there(tmp_path):
    """A terminal's Ctrl-C reaches every process of its group (xdist's workers too): one that landed in the
    removal at exit left the folder behind, with a traceback of the removal."""
    script = textwrap.dedent(f"""
        import os, shutil, signal, tempfile
        tempfile.tempdir = {str(tmp_path)!r}
        from pytest_fmlbench import scratch
        remove = shutil.rmtree

        def pressed_then_remove(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGINT)
            return remove(*args, **kwargs)

        shutil.rmtree = pressed_then_remove
        scratch.mkdtemp(prefix="x-")
        print(scratch.folder(), flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    root = Path(done.stdout.strip())
    assert root.parent == tmp_path and not root.exists(), done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_a_forked_child_s_exit_leaves_its_parent_s_folder(tmp_path):
    """A child forked without exec inherits the exit handlers: it must not remove the folder its parent
    still uses."""
    script = textwrap.dedent(f"""
        import os, sys, tempfile
        tempfile.tempdir = {str(tmp_path)!r}
        from pytest_fmlbench import scratch
        made = scratch.mkdtemp(prefix="x-")
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # the interpreter's exit, its handlers included
        os.waitpid(pid, 0)
        print(os.path.isdir(made), flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True", done.stderr
    assert list(tmp_path.iterdir()) == [], "the parent removes its folder at its own exit"
