"""``fmlbench doctor`` on this machine (no GPU), without bubblewrap, with a sandbox that cannot start, and with
a key set (whose value it never shows). ``fmlbench doctor --help`` is in test_cli_help."""

from __future__ import annotations

import os
import shutil
import textwrap

import pytest

from pytest_fmlbench import devices, isolation
from pytest_fmlbench.cli import main
from pytest_fmlbench.isolation import gpu

from conftest import REPO

SECRET = "sk-doctor-Zq81xVt0pLm2"


@pytest.fixture
def doctor(tmp_path, monkeypatch, capsys):
    """Run ``fmlbench doctor`` in this process from the project's folder, with an empty data cache and no
    key of the user's; returns (exit code, output lines)."""
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("FMLBENCH_DATA", str(tmp_path / "data"))
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY",
                 "FMLBENCH_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    caches = (isolation.check_available, devices.visible_gpus, gpu.inventory, gpu.load_uvm)

    def run() -> tuple[int, list[str]]:
        for cache in caches:
            cache.cache_clear()
        code = main(["doctor"])
        return code, capsys.readouterr().out.splitlines()

    yield run
    for cache in caches:
        cache.cache_clear()


def _without(tool: str) -> str:
    return os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not os.path.exists(os.path.join(p, tool)))


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_this_machine_runs_the_small_profile_and_a_key_is_named_never_shown(doctor, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", _without("nvidia-smi"))
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    code, lines = doctor()
    text = "\n".join(lines)
    assert code == 0 and lines[-1] == "small profile: ready"
    assert "  ok   self-check " in text and "  ok   sandbox start " in text
    assert "  no   GPU                none (nvidia-smi is not on PATH)" in text
    assert "  ok   LLM keys           set: OPENAI_API_KEY" in text
    assert SECRET not in text and SECRET[:6] not in text and SECRET[-6:] not in text
    # a task whose data is all generated (gCastle's) is ready without any
    assert any(line.startswith(("  no   full tasks ", "  ok   full tasks ")) and f"have their data in {tmp_path / 'data'}"
               in line for line in lines)
    assert "  no   privacy_opacus_full missing cifar-10-python: fmlbench data fetch -k privacy_opacus_full" in lines


def test_without_bwrap_one_line_says_how_to_install_it_and_the_exit_code_is_1(doctor, monkeypatch, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code, lines = doctor()
    # (the data cache's line names this test's folder, which is named after the test)
    about = [line for line in lines if ("bwrap" in line or "bubblewrap" in line) and str(tmp_path) not in line]
    assert code == 1
    assert about == ["  FAIL bubblewrap         bwrap is not on PATH: install bubblewrap (Debian/Ubuntu: apt-get "
                     "install bubblewrap; Fedora: dnf install bubblewrap)"]
    assert lines[-1].startswith("small profile: cannot run sandboxed here; fix the 1 FAIL line(s)")


def test_a_sandbox_that_cannot_start_is_one_line_and_exit_code_1(doctor, monkeypatch, tmp_path):
    broken = tmp_path / "bin"
    broken.mkdir()
    (broken / "bwrap").write_text(textwrap.dedent("""\
        #!/bin/sh
        [ "$1" = --version ] && echo "bubblewrap 0.8.0" && exit 0
        echo "bwrap: setting up uid map: Permission denied" >&2
        exit 1
    """))
    (broken / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{broken}{os.pathsep}{os.environ['PATH']}")
    code, lines = doctor()
    [start] = [line for line in lines if "sandbox start" in line]
    assert code == 1
    assert start.startswith("  FAIL sandbox start      bubblewrap could not start a sandbox (bwrap: setting up uid "
                            "map: Permission denied): install bubblewrap")
    assert not any("self-check" in line for line in lines)
