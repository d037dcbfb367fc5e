"""Fetching artefacts into the cache: resumed over HTTP Range and file://, verified, atomic, failing closed."""

import hashlib
import subprocess

import pytest
from rich.console import Console

from pytest_fmlbench.datacache import Artifact, DataCache
from pytest_fmlbench.datacache.download import FetchError, fetch_file, fetch_git
from pytest_fmlbench.datacache.fetch import fetch_all, unique

from .range_server import RangeServer

PAYLOAD = bytes(range(256)) * 8192  # 2 MiB: two chunks and more


def artifact(url: str, payload: bytes = PAYLOAD, **extra) -> Artifact:
    return Artifact(name="blob", urls=[url] if isinstance(url, str) else url, sha256=hashlib.sha256(payload).hexdigest(),
                    size=len(payload), filename="blob.bin", description="a test blob", **extra)


def no_progress(*_):
    pass


def test_a_download_cut_midway_resumes_with_a_range_request(tmp_path):
    cache = DataCache(tmp_path / "cache")
    with RangeServer(PAYLOAD, "blob.bin", cut_after=700_000) as server:
        path = fetch_file(artifact(server.url), cache, no_progress)
        ranges = [r["range"] for r in server.requests]
    assert path.read_bytes() == PAYLOAD
    assert ranges[0] is None and ranges[1].startswith("bytes=") and int(ranges[1][6:-1]) > 0
    assert not path.with_name("blob.bin.part").exists()
    assert cache.check(artifact(server.url)) is None


def test_a_partial_file_left_by_an_earlier_run_is_continued_not_restarted(tmp_path):
    cache = DataCache(tmp_path / "cache")
    folder = cache.folder(artifact("file:///x"))
    folder.mkdir(parents=True)
    (folder / "blob.bin.part").write_bytes(PAYLOAD[:1_000_000])
    with RangeServer(PAYLOAD, "blob.bin") as server:
        fetch_file(artifact(server.url), cache, no_progress)
        assert [r["range"] for r in server.requests] == ["bytes=1000000-"]
    assert cache.path(artifact(server.url)).read_bytes() == PAYLOAD


def test_a_file_url_is_fetched_and_resumed_from_its_offset(tmp_path):
    source = tmp_path / "source.bin"
    source.write_bytes(PAYLOAD)
    cache = DataCache(tmp_path / "cache")
    wanted = artifact(source.as_uri())
    cache.folder(wanted).mkdir(parents=True)
    (cache.folder(wanted) / "blob.bin.part").write_bytes(PAYLOAD[:12345])
    assert fetch_file(wanted, cache, no_progress).read_bytes() == PAYLOAD
    assert cache.read_stamp(wanted)["sha256"] == wanted.sha256


def test_a_wrong_checksum_keeps_nothing_and_says_so(tmp_path):
    source = tmp_path / "source.bin"
    source.write_bytes(PAYLOAD[:-1] + b"X")  # same size, one byte changed
    cache = DataCache(tmp_path / "cache")
    wanted = artifact(source.as_uri())
    with pytest.raises(FetchError) as failure:
        fetch_file(wanted, cache, no_progress)
    message = str(failure.value)
    assert "\n" not in message and "nothing kept" in message and wanted.sha256 in message
    assert list(cache.folder(wanted).iterdir()) == []  # no file, no part, no stamp
    assert cache.check(wanted) == "missing"


def test_a_corrupt_mirror_is_skipped_for_the_next_source(tmp_path):
    bad, good = tmp_path / "bad.bin", tmp_path / "good.bin"
    bad.write_bytes(b"\0" * len(PAYLOAD))
    good.write_bytes(PAYLOAD)
    cache = DataCache(tmp_path / "cache")
    wanted = artifact([bad.as_uri(), good.as_uri()])
    fetch_file(wanted, cache, no_progress)
    assert cache.read_stamp(wanted)["source"] == good.as_uri()


def test_a_source_sending_more_than_recorded_fails_closed(tmp_path):
    cache = DataCache(tmp_path / "cache")
    with RangeServer(PAYLOAD + b"extra", "blob.bin") as server:
        with pytest.raises(FetchError, match="more than the recorded"):
            fetch_file(artifact(server.url), cache, no_progress)
    assert not any(cache.folder(artifact(server.url)).iterdir())


def test_a_gated_source_needs_its_token_and_keeps_it_off_redirects(tmp_path, monkeypatch):
    cache = DataCache(tmp_path / "cache")
    monkeypatch.delenv("FMLBENCH_TEST_TOKEN", raising=False)
    with RangeServer(PAYLOAD, "blob.bin", token="s3cret") as server:
        gated = artifact(server.url, gated=True, token_env="FMLBENCH_TEST_TOKEN")
        with pytest.raises(FetchError, match="set FMLBENCH_TEST_TOKEN"):
            fetch_file(gated, cache, no_progress)
        assert server.requests == []  # nothing was asked without the token
        monkeypatch.setenv("FMLBENCH_TEST_TOKEN", "s3cret")
        fetch_file(gated, cache, no_progress)
    assert server.requests[-1]["authorization"] == "Bearer s3cret"
    with RangeServer(PAYLOAD, "blob.bin") as cdn, RangeServer(b"", "blob.bin", redirect_to=f"{cdn.base}/cdn/blob.bin") as hub:
        gated = artifact(hub.url, gated=True, token_env="FMLBENCH_TEST_TOKEN")
        fetch_file(gated, DataCache(tmp_path / "other"), no_progress)
        assert hub.requests[0]["authorization"] == "Bearer s3cret"
        assert cdn.requests[0]["authorization"] is None  # the redirect's target never sees the token


def _fixture_repository(path):
    """A local repository with two commits; returns their ids (old, new)."""
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "PATH": "/usr/bin:/bin", "HOME": str(path.parent)}

    def git(*args):
        return subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True, text=True, env=env).stdout

    path.mkdir()
    git("init", "-q")
    (path / "method.py").write_text("VERSION = 1\n")
    git("add", ".")
    git("commit", "-qm", "one")
    old = git("rev-parse", "HEAD").strip()
    (path / "method.py").write_text("VERSION = 2\n")
    git("commit", "-qam", "two")
    return old, git("rev-parse", "HEAD").strip()


def test_a_git_repository_is_checked_out_at_its_pinned_commit(tmp_path):
    old, _ = _fixture_repository(tmp_path / "upstream")
    repo = Artifact(name="upstream", kind="git", urls=[(tmp_path / "upstream").as_uri()], commit=old,
                    description="an upstream repository")
    cache = DataCache(tmp_path / "cache")
    path = fetch_git(repo, cache)
    assert (path / "method.py").read_text() == "VERSION = 1\n"
    assert cache.check(repo) is None
    (path / "method.py").write_text("VERSION = 3\n")
    assert cache.check(repo) == "its checkout has local changes"


def test_a_commit_the_repository_lacks_keeps_nothing(tmp_path):
    _fixture_repository(tmp_path / "upstream")
    repo = Artifact(name="upstream", kind="git", urls=[(tmp_path / "upstream").as_uri()], commit="0" * 40,
                    description="an upstream repository")
    cache = DataCache(tmp_path / "cache")
    with pytest.raises(FetchError, match="nothing kept"):
        fetch_git(repo, cache)
    assert not cache.path(repo).exists() and cache.check(repo) == "missing"


def test_fetch_all_skips_what_is_cached_and_redownloads_what_is_corrupt(tmp_path):
    source = tmp_path / "source.bin"
    source.write_bytes(PAYLOAD)
    cache = DataCache(tmp_path / "cache")
    wanted = artifact(source.as_uri())
    console = Console(file=open(tmp_path / "out.txt", "w"), width=100)
    assert [o.action for o in fetch_all([wanted], cache, console)] == ["fetched"]
    assert [o.action for o in fetch_all([wanted], cache, console)] == ["cached"]
    cache.path(wanted).write_bytes(b"rot" + PAYLOAD[3:])
    assert cache.check(wanted).startswith("corrupt (sha256")
    assert [o.action for o in fetch_all([wanted], cache, console)] == ["fetched"]
    assert cache.check(wanted) is None


def test_one_name_declared_with_two_checksums_is_refused():
    a = artifact("file:///a")
    b = artifact("file:///a", payload=b"other")
    assert unique([a, a]) == [a]
    with pytest.raises(FetchError, match="declared twice"):
        unique([a, b])
