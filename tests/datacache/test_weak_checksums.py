"""Files whose publishers give no SHA-256: an MD5, or the SHA-256 prefix in the file's name, checked on fetch
(failing closed), then held to the SHA-256 and size recorded when they passed."""

import hashlib

import pytest
from pydantic import ValidationError

from pytest_fmlbench.datacache import Artifact, DataCache
from pytest_fmlbench.datacache.download import FetchError, fetch_file

PAYLOAD = bytes(range(251)) * 5000
SHA256 = hashlib.sha256(PAYLOAD).hexdigest()
MD5 = hashlib.md5(PAYLOAD).hexdigest()


def no_progress(*_):
    pass


def source(tmp_path, payload=PAYLOAD, name="source.bin"):
    path = tmp_path / name
    path.write_bytes(payload)
    return path.as_uri()


def by_md5(url: str, md5: str = MD5) -> Artifact:
    return Artifact(name="archive", urls=[url], md5=md5, filename="archive.zip", description="an MD5-pinned file")


def by_prefix(url: str, prefix: str = SHA256[:8]) -> Artifact:
    return Artifact(name="weights", urls=[url], sha256_prefix=prefix, filename=f"net-{SHA256[:8]}.pth",
                    description="a file named by its SHA-256 prefix")


def test_an_md5_pinned_file_is_fetched_then_held_to_the_sha256_it_had(tmp_path):
    cache = DataCache(tmp_path / "cache")
    wanted = by_md5(source(tmp_path))
    path = fetch_file(wanted, cache, no_progress)
    assert path.read_bytes() == PAYLOAD
    stamp = cache.read_stamp(wanted)
    assert (stamp["sha256"], stamp["size"], stamp["md5"]) == (SHA256, len(PAYLOAD), MD5)
    assert cache.check(wanted) is None
    path.write_bytes(PAYLOAD[:-1] + b"X")
    assert cache.check(wanted).startswith("corrupt (sha256")


def test_a_wrong_md5_keeps_nothing_and_names_both_digests(tmp_path):
    cache = DataCache(tmp_path / "cache")
    wanted = by_md5(source(tmp_path, PAYLOAD[:-1] + b"X"))
    with pytest.raises(FetchError) as failure:
        fetch_file(wanted, cache, no_progress)
    message = str(failure.value)
    assert "nothing kept" in message and f"expected {MD5}" in message and "\n" not in message
    assert list(cache.folder(wanted).iterdir()) == []
    assert cache.check(wanted) == "missing"


def test_a_stamp_rewritten_to_other_bytes_still_fails_the_declared_md5(tmp_path):
    cache = DataCache(tmp_path / "cache")
    wanted = by_md5(source(tmp_path))
    path = fetch_file(wanted, cache, no_progress)
    other = PAYLOAD[:-1] + b"X"
    path.write_bytes(other)
    cache.write_stamp(wanted, sha256=hashlib.sha256(other).hexdigest(), size=len(other))
    assert cache.check(wanted) == f"corrupt (md5 {hashlib.md5(other).hexdigest()}, expected {MD5})"


def test_a_sha256_prefix_is_checked_on_fetch_and_fails_closed(tmp_path):
    cache = DataCache(tmp_path / "cache")
    wanted = by_prefix(source(tmp_path))
    assert fetch_file(wanted, cache, no_progress).name == f"net-{SHA256[:8]}.pth"
    assert cache.check(wanted) is None and cache.read_stamp(wanted)["sha256"] == SHA256
    impostor = by_prefix(source(tmp_path, b"other weights", "other.bin"))
    other_cache = DataCache(tmp_path / "other-cache")
    with pytest.raises(FetchError, match=f"expected one starting {SHA256[:8]}"):
        fetch_file(impostor, other_cache, no_progress)
    assert other_cache.check(impostor) == "missing"


@pytest.mark.parametrize("fields, problem", [
    ({"sha256": SHA256, "size": 1, "md5": MD5}, "one checksum, not sha256 and md5"),
    ({"md5": MD5, "sha256_prefix": SHA256[:8], "filename": f"w-{SHA256[:8]}.pth"}, "not md5 and sha256_prefix"),
    ({"sha256": SHA256}, "needs sha256 and size"),
    ({}, "needs sha256 and size"),
    ({"sha256_prefix": SHA256[:8], "filename": "weights.pth"}, "does not carry"),
    ({"sha256_prefix": "0676ba6", "filename": "w-0676ba6.pth"}, "sha256_prefix"),  # shorter than torch.hub's 8
    ({"kind": "git", "commit": "a" * 40, "md5": MD5}, "pinned by its commit"),
])
def test_a_file_declares_exactly_one_checksum_and_a_prefix_its_name_carries(fields, problem):
    with pytest.raises(ValidationError, match=problem):
        Artifact(name="x", urls=["https://example.invalid/x"], description="x", **fields)


def test_the_size_of_a_file_without_a_published_one_reads_so():
    assert by_md5("https://example.invalid/archive.zip").size_text() == "size not published"
