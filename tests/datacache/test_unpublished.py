"""Files whose publishers give no checksum at all (``checksum: unpublished``): refused unless the user accepts
pinning what the first fetch downloads, then held to that SHA-256 and size; a lab's shared pin fixes the bytes
before any download."""

import hashlib
import io

import pytest
from pydantic import ValidationError
from rich.console import Console

from pytest_fmlbench.datacache import Artifact, DataCache, problem
from pytest_fmlbench.datacache import download
from pytest_fmlbench.datacache.fetch import fetch_all
from pytest_fmlbench.datacache.pins import PINS_ENV, PinError, shared_pins

PAYLOAD = bytes(range(256)) * 4000
SHA256 = hashlib.sha256(PAYLOAD).hexdigest()
OTHER = PAYLOAD[:-1] + b"X"
ACCEPT = "fmlbench data fetch -k some_task_full --pin-unpublished"


@pytest.fixture(autouse=True)
def no_shared_pins(monkeypatch):
    monkeypatch.delenv(PINS_ENV, raising=False)


def unpublished(url: str, name: str = "images") -> Artifact:
    return Artifact(name=name, urls=[url], checksum="unpublished", filename="images.zip",
                    why="looked for on the host's page and in the upstream project", description="an image archive")


def served(tmp_path, payload: bytes, name: str = "served.zip") -> str:
    path = tmp_path / name
    path.write_bytes(payload)
    return path.as_uri()


def fetch(artifact: Artifact, cache: DataCache, accept: bool = False):
    (outcome,) = fetch_all([artifact], cache, Console(file=io.StringIO()), pin_unpublished=accept, pin_command=ACCEPT)
    return outcome


def share(tmp_path, monkeypatch, *lines: str):
    pins = tmp_path / "pins.txt"
    pins.write_text("# the lab's pins\n" + "".join(line + "\n" for line in lines))
    monkeypatch.setenv(PINS_ENV, str(pins))
    return pins


def test_it_is_refused_by_default_in_one_line_naming_the_command_that_accepts_it(tmp_path):
    cache = DataCache(tmp_path / "cache")
    wanted = unpublished(served(tmp_path, PAYLOAD))
    outcome = fetch(wanted, cache)
    assert outcome.action == "refused" and "\n" not in outcome.detail
    assert "no checksum is published" in outcome.detail and f"run `{ACCEPT}`" in outcome.detail
    assert {p.name for p in cache.folder(wanted).iterdir()} <= {".lock"}  # nothing downloaded


def test_accepted_it_is_pinned_to_the_sha256_it_arrived_with_and_held_to_it(tmp_path):
    cache = DataCache(tmp_path / "cache")
    wanted = unpublished(served(tmp_path, PAYLOAD))
    outcome = fetch(wanted, cache, accept=True)
    assert outcome.action == "pinned" and f"sha256 {SHA256}" in outcome.detail and "\n" not in outcome.detail
    assert f"'images {SHA256} {len(PAYLOAD)}'" in outcome.detail  # the line to share
    stamp = cache.read_stamp(wanted)
    assert (stamp["sha256"], stamp["size"], stamp["pinned"]) == (SHA256, len(PAYLOAD), "first fetch")
    assert cache.check(wanted) is None and fetch(wanted, cache).action == "cached"
    cache.path(wanted).write_bytes(OTHER)  # altered after the pin: every later check fails closed
    assert cache.check(wanted) == f"corrupt (sha256 {hashlib.sha256(OTHER).hexdigest()[:12]}..., expected " \
                                  f"{SHA256[:12]}..., pinned on its first fetch)"
    line = problem("some_task_full", [wanted], cache)
    assert "corrupt" in line and "\n" not in line


def test_a_refetch_of_a_pinned_file_keeps_only_the_pinned_bytes(tmp_path):
    cache = DataCache(tmp_path / "cache")
    first = unpublished(served(tmp_path, PAYLOAD))
    fetch(first, cache, accept=True)
    cache.path(first).unlink()
    moved = unpublished(served(tmp_path, OTHER, "moved.zip"))  # the host now serves other bytes
    outcome = fetch(moved, cache, accept=True)
    assert outcome.action == "failed" and f"expected {SHA256}" in outcome.detail and "to pin anew" in outcome.detail
    assert cache.check(moved) == "missing" and cache.read_stamp(moved)["sha256"] == SHA256


def test_a_shared_pin_makes_the_first_fetch_fail_closed_on_other_bytes(tmp_path, monkeypatch):
    share(tmp_path, monkeypatch, f"images {SHA256} {len(PAYLOAD)}")
    cache = DataCache(tmp_path / "cache")
    impostor = unpublished(served(tmp_path, OTHER))
    outcome = fetch(impostor, cache, accept=True)  # even accepted: the shared pin decides
    assert outcome.action == "failed" and f"expected {SHA256}" in outcome.detail and "nothing kept" in outcome.detail
    assert cache.check(impostor) == "missing"
    genuine = unpublished(served(tmp_path, PAYLOAD, "genuine.zip"))
    assert fetch(genuine, cache).action == "fetched"  # no flag needed: the lab's pin is the checksum
    assert cache.read_stamp(genuine)["pinned"].startswith("shared pin ") and cache.check(genuine) is None


def test_bytes_pinned_here_fail_a_shared_pin_of_other_bytes(tmp_path, monkeypatch):
    cache = DataCache(tmp_path / "cache")
    wanted = unpublished(served(tmp_path, OTHER))
    fetch(wanted, cache, accept=True)
    pins = share(tmp_path, monkeypatch, f"images {SHA256} {len(PAYLOAD)}")
    assert cache.check(wanted) == f"corrupt (sha256 {hashlib.sha256(OTHER).hexdigest()[:12]}..., expected " \
                                  f"{SHA256[:12]}..., pinned by {pins}:2)"


def test_preflight_says_in_one_line_that_it_is_not_pinned(tmp_path):
    cache = DataCache(tmp_path / "cache")
    line = problem("some_task_full", [unpublished("https://example.invalid/images.zip")], cache)
    assert line == (f"some_task_full: images (an image archive; size not published) has no published checksum and is "
                    f"not pinned in the data cache {cache.base}: run `fmlbench data fetch -k some_task_full "
                    f"--pin-unpublished` to download it and pin the SHA-256 it has, or set {PINS_ENV} to a file of "
                    "shared pins")


@pytest.mark.parametrize("content, message", [
    ("images abc 12\n", "pins.txt:1: expected 'name sha256 size'"),
    (f"images {SHA256} 12\nimages {'0' * 64} 12\n", "pins.txt:2: images is pinned again to other bytes"),
])
def test_a_malformed_pin_file_is_one_line(tmp_path, monkeypatch, content, message):
    (tmp_path / "pins.txt").write_text(content)
    monkeypatch.setenv(PINS_ENV, str(tmp_path / "pins.txt"))
    with pytest.raises(PinError, match=message):
        shared_pins()
    assert message in problem("some_task_full", [unpublished("https://example.invalid/x.zip")],
                              DataCache(tmp_path / "cache"))


@pytest.mark.parametrize("fields, message", [
    ({"checksum": "unpublished"}, "goes with why"),
    ({"why": "nowhere", "md5": "0" * 32}, "goes with why"),
    ({"checksum": "unpublished", "why": "nowhere", "sha256": SHA256, "size": 1}, "one checksum"),
    ({"checksum": "unpublished", "why": "nowhere", "kind": "git", "commit": "a" * 40}, "pinned by its commit"),
    ({"checksum": "published", "why": "x"}, "checksum"),
])
def test_unpublished_is_declared_with_why_and_alone(fields, message):
    with pytest.raises(ValidationError, match=message):
        Artifact(name="x", urls=["https://example.invalid/x"], description="x", **fields)


def test_a_google_drive_source_is_fetched_through_gdown_and_checked(tmp_path, monkeypatch):
    """gdown answers Drive's confirmation page; what it lands is verified like any download."""
    asked = []

    def fake_download(url, output, **options):
        asked.append((url, options["resume"]))
        with open(output, "wb") as fh:
            fh.write(PAYLOAD)
        return output

    monkeypatch.setattr("gdown.download", fake_download)
    url = "https://drive.google.com/uc?export=download&id=some-file-id"
    cache = DataCache(tmp_path / "cache")
    outcome = fetch(unpublished(url), cache, accept=True)
    assert outcome.action == "pinned" and asked == [(url, True)]
    assert cache.read_stamp(unpublished(url))["sha256"] == SHA256
    weights = Artifact(name="weights", urls=[url], sha256="0" * 64, size=len(PAYLOAD), description="weights")
    with pytest.raises(download.FetchError, match="nothing kept"):
        download.fetch_file(weights, cache, lambda *_: None)
    assert cache.check(weights) == "missing"


def test_a_run_records_how_an_unpublished_file_was_pinned(tmp_path, monkeypatch):
    cache = DataCache(tmp_path / "cache")
    artifact = unpublished(served(tmp_path, PAYLOAD))
    assert fetch(artifact, cache, accept=True).action == "pinned"
    assert cache.identity(artifact) == {"sha256": SHA256, "size": len(PAYLOAD), "pinned": "first fetch"}
    pins = share(tmp_path, monkeypatch, f"images {SHA256} {len(PAYLOAD)}")
    assert cache.identity(artifact)["pinned"].startswith("shared pin") and str(pins) in cache.identity(artifact)["pinned"]
