"""A git artefact's Git LFS files: fetched from the local store or an LFS server's batch API, each checked
against the pointer its pinned commit holds before it takes the pointer's place, and checked again later."""

import functools
import hashlib
import json
import subprocess
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pytest_fmlbench.datacache import Artifact, DataCache
from pytest_fmlbench.datacache.download import FetchError, fetch_git
from pytest_fmlbench.datacache.lfs import endpoint, parse_pointer, pointer_text, pointers
from pytest_fmlbench.taskkit.gitrepo import write_repository

WEIGHTS = bytes(range(256)) * 4096  # 1 MiB
OID = hashlib.sha256(WEIGHTS).hexdigest()


@pytest.fixture
def upstream(tmp_path):
    """A repository like a Hugging Face model's: config.json in git, model.safetensors in Git LFS; returns
    (its path, its commit)."""
    files = tmp_path / "files"
    files.mkdir()
    (files / "config.json").write_text('{"hidden_size": 8}\n')
    (files / "model.safetensors").write_bytes(WEIGHTS)
    (files / "copy").mkdir()
    (files / "copy" / "model.safetensors").write_bytes(WEIGHTS)  # the same object behind a second path
    repo = tmp_path / "upstream"
    write_repository(repo, files, "weights", lfs=("**/*.safetensors",))
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    return repo, head


def model(url: str, commit: str, lfs: bool = True) -> Artifact:
    return Artifact(name="model", kind="git", urls=[url], commit=commit, lfs=lfs, description="a model repository")


def test_the_commit_holds_pointers_and_only_pointers_are_read_as_such(upstream):
    repo, _ = upstream
    committed = subprocess.run(["git", "-C", str(repo), "show", "HEAD:model.safetensors"], capture_output=True,
                               check=True).stdout
    assert committed.decode() == pointer_text(OID, len(WEIGHTS)) and parse_pointer(committed) == (OID, len(WEIGHTS))
    assert {(p.path, p.oid, p.size) for p in pointers(repo)} == {
        ("model.safetensors", OID, len(WEIGHTS)), ("copy/model.safetensors", OID, len(WEIGHTS))}
    assert parse_pointer(b'{"hidden_size": 8}\n') is None
    assert parse_pointer(committed.replace(b"spec/v1", b"spec/v2")) is None
    assert parse_pointer(committed + b"x" * 1024) is None


def test_a_file_source_gives_each_object_checked_against_its_pointer(upstream, tmp_path):
    repo, head = upstream
    cache = DataCache(tmp_path / "cache")
    path = fetch_git(model(repo.as_uri(), head), cache)
    assert (path / "model.safetensors").read_bytes() == WEIGHTS == (path / "copy" / "model.safetensors").read_bytes()
    assert cache.check(model(repo.as_uri(), head)) is None
    assert not (cache.folder(model(repo.as_uri(), head)) / "lfs").exists()  # no partial download left
    # without lfs, the checkout holds the pointer: what the commit pins is the pointer's SHA-256
    plain = fetch_git(model(repo.as_uri(), head, lfs=False), DataCache(tmp_path / "plain"))
    assert parse_pointer((plain / "model.safetensors").read_bytes()) == (OID, len(WEIGHTS))


def test_a_changed_lfs_file_or_tracked_file_fails_the_check(upstream, tmp_path):
    repo, head = upstream
    cache = DataCache(tmp_path / "cache")
    wanted = model(repo.as_uri(), head)
    path = fetch_git(wanted, cache)
    (path / "model.safetensors").write_bytes(b"\xff" + WEIGHTS[1:])
    assert cache.check(wanted) == ("its LFS file model.safetensors is corrupt (sha256 is not its pointer's "
                                   f"{OID[:12]}...)")
    (path / "model.safetensors").write_bytes(WEIGHTS[:-1])
    assert cache.check(wanted) == f"its LFS file model.safetensors is corrupt ({len(WEIGHTS) - 1} bytes, expected {len(WEIGHTS)})"
    (path / "model.safetensors").unlink()
    assert cache.check(wanted) == "its LFS file model.safetensors is missing"
    (path / "model.safetensors").write_bytes(WEIGHTS)
    assert cache.check(wanted) is None
    (path / "config.json").write_text('{"hidden_size": 9}\n')
    assert cache.check(wanted) == "its checkout has local changes"


def test_an_object_that_is_not_its_pointers_keeps_nothing(upstream, tmp_path):
    repo, head = upstream
    stored = repo / ".git" / "lfs" / "objects" / OID[:2] / OID[2:4] / OID
    stored.write_bytes(b"\xff" + WEIGHTS[1:])  # the right size, other bytes
    cache = DataCache(tmp_path / "cache")
    wanted = model(repo.as_uri(), head)
    with pytest.raises(FetchError) as refused:
        fetch_git(wanted, cache)
    got = hashlib.sha256(stored.read_bytes()).hexdigest()
    assert str(refused.value) == (f"model: not fetched, nothing kept: {repo.as_uri()}: LFS file "
                                  f"copy/model.safetensors has sha256 {got}, expected its pointer's {OID} (deleted)")
    assert {p.name for p in cache.folder(wanted).iterdir()} == {"lfs"} and not any((cache.folder(wanted) / "lfs").iterdir())
    assert cache.check(wanted) == "missing"


class LfsServer:
    """A repository over git's dumb HTTP protocol, with an LFS batch API that answers download actions for
    the objects of its store (and an error for any other), each behind a header it requires."""

    def __init__(self, root, repo_name: str):
        self.root, self.repo_name, self.batches = root, repo_name, []
        server = self

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path.startswith("/objects/") and self.headers.get("X-Ticket") != "t1":
                    self.send_error(403)
                    return
                super().do_GET()

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.batches.append({"path": self.path, "body": body, "accept": self.headers.get("Accept")})
                objects = []
                for wanted in body["objects"]:
                    oid = wanted["oid"]
                    if (server.root / "objects" / oid).is_file():
                        objects.append({**wanted, "actions": {"download": {
                            "href": f"http://127.0.0.1:{server.port}/objects/{oid}", "header": {"X-Ticket": "t1"}}}})
                    else:
                        objects.append({**wanted, "error": {"code": 404, "message": "Object does not exist"}})
                answer = json.dumps({"transfer": "basic", "objects": objects}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.git-lfs+json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/{repo_name}"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def served(upstream, tmp_path, with_object: bool = True):
    """The upstream repository, bare and ready for dumb HTTP, under a web root with its objects beside it."""
    repo, _ = upstream
    root = tmp_path / "web"
    (root / "objects").mkdir(parents=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(root / "model.git")], check=True)
    subprocess.run(["git", "-C", str(root / "model.git"), "update-server-info"], check=True)
    if with_object:
        (root / "objects" / OID).write_bytes(WEIGHTS)
    return root


def test_an_lfs_server_is_asked_once_through_its_batch_api(upstream, tmp_path):
    _, head = upstream
    with LfsServer(served(upstream, tmp_path), "model") as server:
        assert endpoint(server.url) == f"{server.url}.git/info/lfs" == endpoint(server.url + ".git")
        cache = DataCache(tmp_path / "cache")
        path = fetch_git(model(server.url + ".git", head), cache)
    assert (path / "model.safetensors").read_bytes() == WEIGHTS and cache.check(model(server.url, head)) is None
    (batch,) = server.batches
    assert batch["path"] == "/model.git/info/lfs/objects/batch" and batch["accept"] == "application/vnd.git-lfs+json"
    assert batch["body"] == {"operation": "download", "transfers": ["basic"],
                             "objects": [{"oid": OID, "size": len(WEIGHTS)}]}


def test_an_object_the_server_lacks_keeps_nothing(upstream, tmp_path):
    _, head = upstream
    with LfsServer(served(upstream, tmp_path, with_object=False), "model") as server:
        cache = DataCache(tmp_path / "cache")
        with pytest.raises(FetchError, match=f"object {OID}: Object does not exist"):
            fetch_git(model(server.url + ".git", head), cache)
    assert not cache.path(model(server.url, head)).exists()


def test_lfs_belongs_to_git_artefacts():
    with pytest.raises(ValueError, match="lfs belongs to a git repository"):
        Artifact(name="w", urls=["https://example.invalid/w.bin"], sha256="0" * 64, size=1, lfs=True,
                 description="weights")
