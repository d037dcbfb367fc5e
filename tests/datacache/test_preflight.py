"""Before a full-profile run's first step: one line naming the artefact, what is wrong, and the fix."""

import hashlib

from pytest_fmlbench.datacache import Artifact, DataCache, problem
from pytest_fmlbench.datacache.fetch import write_fixtures

PAYLOAD = b"cifar" * 1000


def artifact(**extra) -> Artifact:
    return Artifact(name="cifar-10-python", urls=["https://example.invalid/cifar-10-python.tar.gz"],
                    sha256=hashlib.sha256(PAYLOAD).hexdigest(), size=len(PAYLOAD), fixture="cifar10_python",
                    description="CIFAR-10", **extra)


def place(cache: DataCache, wanted: Artifact, payload: bytes = PAYLOAD) -> None:
    cache.folder(wanted).mkdir(parents=True)
    cache.path(wanted).write_bytes(payload)
    cache.write_stamp(wanted, sha256=wanted.sha256, size=wanted.size)


def test_present_and_intact_is_no_problem(tmp_path):
    cache = DataCache(tmp_path)
    place(cache, artifact())
    assert problem("t_full", [artifact()], cache) is None


def test_missing_names_the_fetch_command(tmp_path):
    line = problem("t_full", [artifact()], DataCache(tmp_path))
    assert line == (f"t_full: cifar-10-python (CIFAR-10; 5.0 KB) is not in the data cache {tmp_path}: "
                    "run `fmlbench data fetch -k t_full`")


def test_corrupt_bytes_of_the_right_size_are_found(tmp_path):
    cache = DataCache(tmp_path)
    place(cache, artifact(), b"x" + PAYLOAD[1:])
    line = problem("t_full", [artifact()], cache)
    assert "is corrupt (sha256" in line and line.endswith("run `fmlbench data fetch -k t_full`")


def test_a_gated_artefact_names_its_token(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    line = problem("t_full", [artifact(gated=True, token_env="HF_TOKEN")], DataCache(tmp_path))
    assert line.endswith("run `HF_TOKEN=<token> fmlbench data fetch -k t_full`")


def test_smoke_scale_needs_the_fixtures_and_checks_their_own_stamp(tmp_path):
    cache = DataCache(tmp_path, "smoke")
    assert problem("t_full", [artifact()], cache).endswith("run `fmlbench data fixtures -k t_full`")
    assert [o.action for o in write_fixtures([artifact()], cache)] == ["written"]
    assert problem("t_full", [artifact()], cache) is None
    with open(cache.path(artifact()), "r+b") as fh:
        fh.write(b"\0")
    assert "is corrupt" in problem("t_full", [artifact()], cache)


def test_a_cache_inside_a_tree_every_sandbox_shows_is_refused():
    line = problem("t_full", [artifact()], DataCache(__import__("pathlib").Path("/usr/share/fmlbench")))
    assert "lies under /usr" in line and "FMLBENCH_DATA" in line
