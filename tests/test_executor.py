import os
import sys
import time

from pytest_fmlbench import devices
from pytest_fmlbench.executor import format_command, run_command, scrubbed_env


def test_secrets_never_reach_experiments():
    env = scrubbed_env(base={"OPENAI_API_KEY": "sk-x", "ANTHROPIC_API_KEY": "a", "MY_SECRET": "s",
                             "GITHUB_TOKEN": "t", "OPENROUTER_API_KEY": "o", "PATH": "/bin", "HOME": "/root"})
    assert set(env) >= {"PATH", "HOME"}
    assert not {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MY_SECRET", "GITHUB_TOKEN", "OPENROUTER_API_KEY"} & set(env)
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"


def test_timeout_kills_the_whole_process_group(tmp_path):
    pid_file = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    start = time.monotonic()
    result = run_command([sys.executable, "-c", script], cwd=tmp_path, env=dict(os.environ), timeout_s=2,
                         log_path=tmp_path / "log.txt")
    assert result.timed_out and not result.ok
    assert time.monotonic() - start < 30
    assert "timed out after 2 s" in result.describe_failure("val run", 2)
    child = int(pid_file.read_text())
    time.sleep(0.2)
    assert not _alive(child), "the experiment's child process survived the timeout"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_output_tail_and_exit_code(tmp_path):
    argv = format_command("{python} -c {code}", {"code": "import sys; print('x' * 5000); sys.exit('boom')"})
    result = run_command(argv, cwd=tmp_path, env=dict(os.environ), timeout_s=30, log_path=tmp_path / "l.log")
    assert result.returncode == 1 and result.output_tail.endswith("boom\n")
    assert len(result.output_tail) == 1500


def test_worker_gpu_assignment(monkeypatch):
    devices.visible_gpus.cache_clear()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,6,7")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    try:
        assert devices.assigned_gpus(2) == ("6", "7")
        assert devices.assigned_gpus(1) == ("5",)
        assert devices.auto_workers(2) == 2
        assert devices.experiment_env(1)["CUDA_VISIBLE_DEVICES"] == "5"
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
        devices.visible_gpus.cache_clear()
        assert devices.assigned_gpus(1) == () and devices.auto_workers(1) is None
        assert "CUDA_VISIBLE_DEVICES" not in devices.experiment_env(1)
    finally:
        devices.visible_gpus.cache_clear()
