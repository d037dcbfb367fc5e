"""The JSON session summary (session.json beside the CSVs): the tables as data, encoder, versions, the
suite's git commit and the session's options; from pytest and from ``fmlbench score``."""

import platform
import shutil
import subprocess
from importlib import metadata

import pandas as pd
import pytest

from pytest_fmlbench.cli import main
from pytest_fmlbench.reports.summary import SessionSummary

from scoring.records import write_run


def git(folder, *args):
    return subprocess.run(["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_pytest_session_writes_the_summary_beside_the_csvs(pytester, toy, bench):
    suite = pytester.path / "suite"
    suite.mkdir()
    shutil.move(toy, suite / "toy_task")
    git(pytester.path, "init", "-q")
    git(pytester.path, "add", "suite")
    git(pytester.path, "commit", "-q", "-m", "suite")
    result = bench("--agent=random-search", "--steps=2", "--agent-opt", "include_baseline=false", "suite/toy_task")
    result.assert_outcomes(passed=1)
    reports = pytester.path / "reports" / "fmlbench" / "reports"
    result.stdout.fnmatch_lines(["*session summary: session.json*"])
    summary = SessionSummary.model_validate_json((reports / "session.json").read_text())

    assert summary.schema_version == 1 and summary.source == "pytest" and summary.runs == 1
    options = summary.options
    assert (options.agent, options.steps, options.seeds, options.model, options.provider) == ("random-search", 2, 1, None, None)
    assert options.agent_options == {"include_baseline": False} and options.sandboxed
    assert summary.suite.path == str(suite.resolve())
    assert summary.suite.git_commit == git(pytester.path, "rev-parse", "HEAD") and summary.suite.git_dirty is False
    assert summary.versions["python"] == platform.python_version()
    assert summary.versions["torch"] == metadata.version("torch")
    assert summary.versions["pytest-fmlbench"] == metadata.version("pytest-fmlbench")

    # the same numbers as the CSVs, and the encoder they name
    (tables,) = summary.tables
    folder = reports / "random-search__-"
    ni = pd.read_csv(folder / "normalized_improvement.csv", index_col=0)
    process = pd.read_csv(folder / "process_metrics.csv", index_col=0)
    raw = pd.read_csv(folder / "raw_performance.csv", index_col=0)
    assert tables.normalized_improvement[0].ni == pytest.approx(ni.loc["toy_task", "Normalized Improvement"])
    assert tables.raw_performance[0].raw_test == pytest.approx(raw.loc["toy_task", "raw_test"])
    assert tables.process_metrics[0].values.valid_step_ratio == pytest.approx(process.loc["toy_task", "Valid step ratio"])
    assert tables.process_metrics[0].values.cost_usd == pytest.approx(0.0)
    assert summary.encoder == process.loc["toy_task", "encoder"]
    assert [row.solver for row in summary.aup] == ["random-search", "declared baseline"]

    # disclosures, so that two tables are comparable or visibly not
    import hashlib
    import os

    from pytest_fmlbench.agentkit.loading import agents_dir

    hardware = summary.hardware
    assert hardware.cpu_count == os.cpu_count() and hardware.memory_gb > 0 and hardware.cpu_model
    assert hardware.gpu_count == len(hardware.gpu_models)
    assert options.network is False and options.agent_timeout_s is None and options.task_timeouts_s == {"toy_task": 60}
    module = agents_dir() / "random_search.py"
    expected = hashlib.sha256(b"random_search.py\0" + hashlib.sha256(module.read_bytes()).digest()).hexdigest()
    assert options.agent_code_sha256 == expected and options.judges == []
    assert tables.audited_runs == 1 and tables.suspect_runs == [] and tables.research_review == []


def test_fmlbench_score_writes_the_summary_with_its_csvs(tmp_path, capsys):
    root = tmp_path / "runs"
    for agent, gain in (("a", 0.1), ("b", 0.2)):
        write_run(root, [(0.5 + gain, {"config.json": '{"lr": 1}'}), (None, {"algorithm.py": "oops"})],
                  agent=agent, test_metric=0.6 + gain)
    assert main(["score", str(root), "--encoder", "none", "--csv-dir", str(tmp_path / "csv"),
                 "--json", str(tmp_path / "elsewhere.json")]) == 0
    assert f"wrote {tmp_path / 'csv' / 'session.json'}" in capsys.readouterr().out
    summary = SessionSummary.model_validate_json((tmp_path / "csv" / "session.json").read_text())
    again = SessionSummary.model_validate_json((tmp_path / "elsewhere.json").read_text())
    assert again.tables == summary.tables
    assert summary.source == "fmlbench score" and summary.options is None
    assert summary.suite.git_commit is None and summary.encoder == "none (exploration metrics off)"
    comparison = pd.read_csv(tmp_path / "csv" / "comparison_normalized_improvement.csv", index_col=0)
    for tables in summary.tables:
        assert tables.normalized_improvement[0].ni == pytest.approx(comparison.loc["t", tables.solver])
        assert tables.process_metrics[0].values.valid_step_ratio == 0.5
        # no exploration metrics without an encoder: null, never NaN (JSON has none)
        assert tables.process_metrics[0].values.spread is None
    assert [t.solver for t in summary.tables] == ["a", "b"]


def test_summary_schema_is_versioned_and_strict():
    schema = SessionSummary.model_json_schema()
    assert {"schema_version", "encoder", "versions", "suite", "options", "tables", "aup"} <= set(schema["required"]) | set(schema["properties"])
    with pytest.raises(ValueError):
        SessionSummary.model_validate({"schema_version": 2})
    options = schema["$defs"]["SessionOptions"]["properties"]
    assert not any("key" in name.lower() for name in options)
