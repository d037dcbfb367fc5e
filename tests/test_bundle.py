"""fmlbench bundle and fmlbench verify: one real session of the toy task (two seeds), bundled once; every
check reads that bundle, or a copy with one thing changed in it."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import DATA, child_args
from pytest_fmlbench.bundle.archive import extract, writer
from pytest_fmlbench.cli.commands import main

AGENT = """
import json

from pytest_fmlbench import Agent, WholeFile


class Tuned(Agent):
    name = "tuned"

    def run(self, session):
        edit = session.edit([WholeFile("config.json", json.dumps({"lr": 0.5, "epochs": 100}))])
        session.run_step("improve", plan="set lr and epochs", edit=edit)
"""
# a provider-shaped key and a token of no known shape, both in the bundling machine's environment
SHAPED_KEY = "sk-plantedkey0123456789abcdef"
PLAIN_TOKEN = "zq7-plain-token-of-no-known-shape"


@pytest.fixture(scope="module")
def bundled(tmp_path_factory):
    """(project folder, bundle): a session of two items, a key leaked into an agent's log, then bundled."""
    project = tmp_path_factory.mktemp("bundle")
    shutil.copytree(DATA / "toy_task", project / "toy_task")
    (project / "my_agent.py").write_text(AGENT)
    env = {**os.environ, "FMLBENCH_ENCODER": "none", "OPENAI_API_KEY": SHAPED_KEY, "MY_SERVICE_TOKEN": PLAIN_TOKEN}
    done = subprocess.run([sys.executable, "-m", "pytest", *child_args("--agent=my_agent.py:Tuned", "--seeds=2",
                                                                       "--steps=2", "toy_task")],
                          cwd=project, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:]
    # an agent that printed the keys it could find (none reach it: this stands for a leak we did not foresee)
    for log in sorted(project.glob("reports/fmlbench/runs/toy_task/*/logs/agent.log")):
        with open(log, "a") as fh:
            fh.write(f"found {SHAPED_KEY} and {PLAIN_TOKEN}\n")
    output = project / "results.tar.zst"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", SHAPED_KEY)
        patch.setenv("MY_SERVICE_TOKEN", PLAIN_TOKEN)
        assert main(["bundle", "last", "-o", str(output), "--fmlbench-out", str(project / "reports" / "fmlbench")]) == 0
    return project, output


def test_a_session_whose_run_a_later_session_rewrote_is_not_bundled(bundled, capsys, tmp_path):
    project, _ = bundled
    out = tmp_path / "fmlbench"
    shutil.copytree(project / "reports" / "fmlbench", out, ignore=shutil.ignore_patterns("*.lock"))
    record = next(out.glob("runs/toy_task/*seed1*/record.json"))
    _edit_json(record, lambda r: r.update(test_metric=0.5))  # as a later --fresh session of the same run would
    capsys.readouterr()
    assert main(["bundle", "last", "-o", str(tmp_path / "b.tar.gz"), "--fmlbench-out", str(out)]) == 2
    error = capsys.readouterr().err
    assert f"/{record.parent.name} no longer gives the scores this session saved (ni: 0.13666666666666671, now " \
           "0.0): a later session rewrote it (--fresh); bundle that session instead" in error
    assert not (tmp_path / "b.tar.gz").exists()


def verify(capsys, bundle: Path, *extra: str) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(["verify", str(bundle), *extra])
    return code, capsys.readouterr().out.splitlines()


def test_a_bundle_verifies_and_says_what_it_left_out(bundled, capsys, tmp_path):
    project, bundle = bundled
    code, lines = verify(capsys, bundle)
    assert code == 0, lines
    assert lines[-1].startswith("verified: ") and "2 run(s)" in lines[-1]
    assert sum(line.startswith("run toy_task/tuned__none__seed") for line in lines) == 2
    assert re.fullmatch(r"left out at bundling \(MANIFEST.json's left_out\): data \d+, outputs \d+, private \d+, "
                        r"search workspace \d+; secrets masked in 2 file\(s\)", lines[1]), lines[1]
    assert lines.count("  sandbox refused: nothing") == 2
    hidden = [line for line in lines if "hidden split:" in line]
    assert len(hidden) == 2 and all("not reached, by construction" in line and "logs/search_sandbox_check.log" in line
                                    for line in hidden)

    names = extract(bundle, tmp_path)
    manifest = json.loads((tmp_path / "MANIFEST.json").read_text())
    assert set(manifest["files"]) == set(names) - {"MANIFEST.json"}
    # the hidden split, the evaluator's private data and the experiment's outputs stay behind, and are named
    assert not [n for n in names if set(n.split("/")) & {"private", "out", "evidence"}], names
    why = {entry["path"].split("/", 3)[-1]: entry["why"] for entry in manifest["left_out"]}
    assert why["final/private/test_labels.npy"] == "private"
    assert why["final/out/test/test_inputs.npz"] == "outputs"
    assert manifest["left_out_reasons"]["private"].startswith("the evaluator's private data")
    # what a reviewer needs is there: records, steps, snapshots, logs, verdicts, the final code, the context
    run = next(tmp_path.glob("runs/toy_task/*seed0*"))
    for rel in ("record.json", "steps.jsonl", "snapshots/step_0001.json", "snapshots/baseline.json",
                "logs/search_sandbox_check.log", "final/verdicts/test.json", "final/workspace/config.json"):
        assert (run / rel).is_file(), rel
    environment = json.loads((tmp_path / "environment.json").read_text())
    assert environment["packages"]["pytest-fmlbench"] and environment["packages"]["numpy"]
    tasks = json.loads((tmp_path / "tasks.json").read_text())
    (entry,) = tasks["toy_task"]["fingerprints"].values()
    assert entry["source_found"] and "workspace/train.py" in entry["protected"]
    assert json.loads((tmp_path / "session.json").read_text())["args"][-1] == "toy_task"
    # the session is its output folder's last: the summary there is its own (options, hardware, the author's tables)
    assert json.loads((tmp_path / "summary.json").read_text())["options"]["seeds"] == 2


def test_no_key_enters_the_bundle(bundled):
    project, bundle = bundled
    with tarfile.open(fileobj=_decompressed(bundle), mode="r:") as tar:
        contents = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}
    leaked = [name for name, data in contents.items() if SHAPED_KEY.encode() in data or PLAIN_TOKEN.encode() in data]
    assert not leaked
    logs = [data for name, data in contents.items() if name.endswith("logs/agent.log")]
    assert len(logs) == 2 and all(b"found [redacted] and [redacted]" in data for data in logs)
    manifest = json.loads(contents["MANIFEST.json"])
    assert sorted(n.rsplit("/", 1)[-1] for n in manifest["redacted"]) == ["agent.log", "agent.log"]


def _decompressed(bundle: Path):
    import io

    import zstandard

    return io.BytesIO(zstandard.ZstdDecompressor().stream_reader(bundle.read_bytes()).read())


def _edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


def _rehash(root: Path, name: str) -> None:
    """The manifest's hash of ``name`` recomputed, as a forger would."""
    manifest = json.loads((root / "MANIFEST.json").read_text())
    manifest["files"][name] = hashlib.sha256((root / name).read_bytes()).hexdigest()
    (root / "MANIFEST.json").write_text(json.dumps(manifest))


def _record(root: Path) -> str:
    return next(root.glob("runs/toy_task/*seed0*")).relative_to(root).as_posix()


def _forged_test_metric(root: Path) -> str:
    run = _record(root)
    _edit_json(root / run / "record.json", lambda r: r.update(test_metric=0.99))
    _rehash(root, f"{run}/record.json")
    return f"{run}/record.json: test_metric: 0.99, but the final test's verdict (final/verdicts/test.json) says"


def _changed_snapshot(root: Path) -> str:
    run = _record(root)
    _edit_json(root / run / "snapshots/step_0001.json", lambda s: s.update({"config.json": '{"lr": 0.9}'}))
    return f"{run}/snapshots/step_0001.json: sha256: "


def _changed_snapshot_rehashed(root: Path) -> str:
    run = _record(root)
    _edit_json(root / run / "snapshots/step_0001.json", lambda s: s.update({"config.json": '{"lr": 0.9}'}))
    _rehash(root, f"{run}/snapshots/step_0001.json")
    return f"{run}/snapshots/step_0001.json: (code): hashes to "


def _snapshot_outside_the_run(root: Path) -> str:
    run = _record(root)
    steps = root / run / "steps.jsonl"
    first, *rest = steps.read_text().splitlines()
    step = json.loads(first)
    step["snapshot"] = "../../../session.json"
    steps.write_text("\n".join([json.dumps(step), *rest]) + "\n")
    _rehash(root, f"{run}/steps.jsonl")
    return (f"{run}/steps.jsonl: line 1 (step 1) snapshot_sha256: names '../../../session.json', outside the "
            "run's folder")


def _changed_table_cell(root: Path) -> str:
    _edit_json(root / "tables.json", lambda t: t["tables"][0]["normalized_improvement"][0].update(ni=0.5))
    _rehash(root, "tables.json")
    return "tables.json: tables[0].normalized_improvement[0].ni: bundled 0.5, re-scored from the records 0.1"


def _removed_file(root: Path) -> str:
    run = _record(root)
    (root / run / "logs" / "agent.log").unlink()
    return f"{run}/logs/agent.log: (file): missing (MANIFEST.json lists it)"


def _extra_file(root: Path) -> str:
    (root / "runs" / "notes.txt").write_text("trust me")
    return "runs/notes.txt: (file): not listed in MANIFEST.json"


def _changed_manifest(root: Path) -> str:
    manifest = json.loads((root / "MANIFEST.json").read_text())
    manifest["files"]["session.json"] = "0" * 64
    (root / "MANIFEST.json").write_text(json.dumps(manifest))
    return "session.json: sha256: "


def _repacked(root: Path, bundle: Path) -> Path:
    with writer(bundle) as tar:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            tar.add(path.relative_to(root).as_posix(), path.read_bytes())
    return bundle


@pytest.mark.parametrize("tamper", [_forged_test_metric, _changed_snapshot, _changed_snapshot_rehashed,
                                    _snapshot_outside_the_run, _changed_table_cell, _removed_file, _extra_file,
                                    _changed_manifest],
                         ids=lambda f: f.__name__.strip("_"))
def test_each_change_is_named_in_one_line(bundled, capsys, tmp_path, tamper):
    _, bundle = bundled
    root = tmp_path / "unpacked"
    extract(bundle, root)
    expected = tamper(root)
    code, lines = verify(capsys, _repacked(root, tmp_path / "forged.tar.gz"))
    assert code == 1
    assert lines[-1].startswith(f"NOT verified: {expected}"), lines[-1]
    assert sum(line.startswith("NOT verified") for line in lines) == 1


def test_rerun_reproduces_the_recorded_test_value_and_the_report_opens_from_the_bundle(bundled, capsys, tmp_path,
                                                                                       monkeypatch):
    project, bundle = bundled
    monkeypatch.chdir(project)  # the task folder given relative to here, as a user types it
    run_id = json.loads(next(project.glob("reports/fmlbench/runs/toy_task/*seed1*/record.json")).read_text())["run_id"]
    page = tmp_path / "report.html"
    code, lines = verify(capsys, bundle, "--rerun", run_id, "--tasks", ".", "--html", str(page))
    assert code == 0, lines
    assert lines[-2] == f"wrote {page}" and "toy_task" in page.read_text()
    assert "(toy_task seed 1): test accuracy 0.8566666666666667, recorded 0.8566666666666667, difference 0 " \
           "(reproduced" in lines[-1]

    # the same task with other contents is not the task the run was measured on
    changed = tmp_path / "suite"
    shutil.copytree(project / "toy_task", changed / "toy_task")
    with open(changed / "toy_task" / "harness" / "evaluate.py", "a") as fh:
        fh.write("\n# changed\n")
    code, lines = verify(capsys, bundle, "--rerun", run_id, "--tasks", str(changed))
    assert code == 1
    assert lines[-1].startswith(f"rerun {run_id}: task toy_task here ") and "the task changed since" in lines[-1]


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen (OpenSSH) is not installed")
def test_a_signed_bundle_verifies_with_its_authors_key_and_a_re_hashed_forgery_does_not(bundled, capsys, tmp_path):
    project, _ = bundled
    key = tmp_path / "author_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "author", "-f", str(key)], check=True)
    signers = tmp_path / "allowed_signers"
    signers.write_text(f"author@lab {key.with_suffix('.pub').read_text()}")
    signed = tmp_path / "signed.tar.gz"
    assert main(["bundle", "last", "-o", str(signed), "--fmlbench-out", str(project / "reports" / "fmlbench"),
                 "--sign", str(key)]) == 0
    trusted = ("--allowed-signers", str(signers), "--signer", "author@lab")
    code, lines = verify(capsys, signed, *trusted)
    assert code == 0, lines
    assert lines[0] == "signature: good, MANIFEST.json signed by author@lab (ssh-keygen -Y verify)"
    assert verify(capsys, signed)[1][0] == "signature: present, not checked (give --allowed-signers FILE --signer ID)"

    # a forger who rewrote a record and recomputed its hash in the manifest cannot sign the new manifest
    root = tmp_path / "unpacked"
    extract(signed, root)
    _forged_test_metric(root)
    code, lines = verify(capsys, _repacked(root, tmp_path / "forged.tar.gz"), *trusted)
    assert code == 1
    assert lines[-1].startswith("NOT verified: MANIFEST.json.sig: signature: does not verify MANIFEST.json for "
                                "'author@lab'"), lines[-1]


def test_a_run_whose_search_could_reach_the_hidden_split_is_listed_so(bundled, capsys, tmp_path):
    _, bundle = bundled
    root = tmp_path / "unpacked"
    extract(bundle, root)
    runs = sorted(p.relative_to(root).as_posix() for p in root.glob("runs/toy_task/*"))
    check_log = root / runs[0] / "logs" / "search_sandbox_check.log"
    text = check_log.read_text()
    check_log.write_text(text.replace("$ bwrap ", f"$ bwrap --ro-bind {root / runs[0]}/final/private /private ", 1))
    _rehash(root, f"{runs[0]}/logs/search_sandbox_check.log")
    (root / runs[1] / "logs" / "search_sandbox_check.log").write_text("[]\n")
    _rehash(root, f"{runs[1]}/logs/search_sandbox_check.log")
    code, lines = verify(capsys, _repacked(root, tmp_path / "open.tar.gz"))
    hidden = [line.strip() for line in lines if "hidden split:" in line]
    assert hidden[0].startswith(f"hidden split: REACHABLE: the search's sandbox bound {root / runs[0]}/final/private")
    assert hidden[1] == ("hidden split: NOT shown out of reach: logs/search_sandbox_check.log holds no sandbox "
                         "command line")
    assert code == 0, lines[-1]  # findings about the runs; the bundle itself is what its author wrote


def test_fmlbench_report_reads_a_bundle_as_it_reads_run_folders(bundled, capsys, tmp_path):
    _, bundle = bundled
    page = tmp_path / "from-bundle.html"
    assert main(["report", str(bundle), "--html", str(page), "--encoder", "none"]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {page} (2 run(s)")
    assert "toy_task" in page.read_text()
    broken = tmp_path / "broken.tar.zst"
    broken.write_bytes(b"not a bundle")
    assert main(["report", str(broken), "--html", str(page), "--encoder", "none"]) == 2
    assert capsys.readouterr().err.startswith("fmlbench: ")
