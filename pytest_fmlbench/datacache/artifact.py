"""One artefact a full-profile task needs: where it comes from and what its bytes must hash to.

A file is pinned by the SHA-256 its publishers give. Where none is published, and only then, a task may
declare what is: an MD5 (``md5``), or the leading hex digits of the SHA-256 that the publisher writes into
the file name (``sha256_prefix``, torch.hub's ``check_hash`` convention, e.g. ``resnet50-0676ba61.pth``).
Such a file is checked against that weaker digest when it is fetched, and against the SHA-256 and size
recorded then on every later check; the task says where the digest was published.

Where its publishers give no checksum at all, a task declares ``checksum: unpublished`` and ``why`` (where one was
looked for). Such a file is never fetched by default: ``fmlbench data fetch --pin-unpublished`` downloads it and
records the SHA-256 and size it has (pin on first fetch), and every later check holds it to them; a lab's shared
pins (``pins``) fix those values before any download, so that every machine holds the first one's bytes.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Literal
from urllib.parse import unquote, urlparse

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SCHEMES = ("https", "http", "file")


class Artifact(BaseModel):
    """A file (checked by SHA-256 and size, or where none is published by MD5 or a SHA-256 prefix) or a git
    repository (checked by its pinned commit)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", description="the cache folder's name; tasks may share one")
    kind: Literal["file", "git"] = "file"
    urls: list[str] = Field(min_length=1, description="sources tried in order (mirrors); https, http or file")
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$", description="of the file's bytes (kind file)")
    md5: str | None = Field(None, pattern=r"^[0-9a-f]{32}$",
                            description="of the file's bytes, only where its publishers give no SHA-256 (kind file)")
    sha256_prefix: str | None = Field(None, pattern=r"^[0-9a-f]{8,63}$",
                                      description="the SHA-256's leading hex digits that the publisher's file name "
                                      "carries, only where no full SHA-256 is published (kind file)")
    checksum: Literal["unpublished"] | None = Field(
        None, description="'unpublished': its publishers give no checksum at all; fetched only when the user accepts "
        "pinning the SHA-256 of what the first fetch downloads, or from a shared pin (kind file)")
    why: str | None = Field(None, min_length=1, description="with checksum: unpublished, where a checksum was looked for")
    size: int | None = Field(None, gt=0, description="the file's size in bytes (kind file; required with sha256)")
    commit: str | None = Field(None, pattern=r"^[0-9a-f]{40}$", description="the pinned commit (kind git)")
    lfs: bool = Field(False, description="the commit's Git LFS pointers are replaced by their objects, each checked "
                      "against its pointer's SHA-256 and size (kind git)")
    filename: str | None = Field(None, description="the file's name in the cache (default: the URL's last part)")
    gated: bool = Field(False, description="the source needs an access token (sent as a bearer token)")
    token_env: str | None = Field(None, description="the environment variable holding that token")
    fixture: str | None = Field(None, description="the generator in pytest_fmlbench.taskkit.fixtures that writes "
                                "a small stand-in in the same format, for --scale=smoke")
    description: str = Field(min_length=1)

    @field_validator("urls")
    @classmethod
    def _known_schemes(cls, urls: list[str]) -> list[str]:
        for url in urls:
            if urlparse(url).scheme not in SCHEMES:
                raise ValueError(f"{url!r}: the scheme must be one of {', '.join(SCHEMES)}")
        return urls

    @field_validator("filename")
    @classmethod
    def _plain_name(cls, name: str | None) -> str | None:
        if name is not None and (not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name)):
            raise ValueError(f"{name!r} must be a plain file name")
        return name

    @model_validator(mode="after")
    def _checks_for_kind(self) -> Artifact:
        digests = [key for key in ("sha256", "md5", "sha256_prefix", "checksum") if getattr(self, key) is not None]
        if self.kind == "file" and not digests:
            raise ValueError(f"artefact {self.name!r}: a file needs sha256 and size (or, only where no SHA-256 is "
                             "published, md5 or sha256_prefix; where no checksum at all is, checksum: unpublished)")
        if (self.checksum is None) != (self.why is None):
            raise ValueError(f"artefact {self.name!r}: checksum: unpublished goes with why (where a checksum was "
                             "looked for), and why only with it")
        if self.kind == "file" and len(digests) > 1:
            raise ValueError(f"artefact {self.name!r}: a file declares one checksum, not {' and '.join(digests)}")
        if self.kind == "file" and self.sha256 is not None and self.size is None:
            raise ValueError(f"artefact {self.name!r}: a file needs sha256 and size")
        if self.kind == "git" and digests:
            raise ValueError(f"artefact {self.name!r}: a git repository is pinned by its commit, not by {digests[0]}")
        if self.sha256_prefix is not None and f"-{self.sha256_prefix}." not in self.file_name:
            raise ValueError(f"artefact {self.name!r}: sha256_prefix must be the one its file name carries "
                             f"(name-<prefix>.ext), and {self.file_name!r} does not carry {self.sha256_prefix!r}")
        if self.lfs and self.kind != "git":
            raise ValueError(f"artefact {self.name!r}: lfs belongs to a git repository")
        if self.kind == "git" and self.commit is None:
            raise ValueError(f"artefact {self.name!r}: a git repository needs its pinned commit")
        if self.gated and not self.token_env:
            raise ValueError(f"artefact {self.name!r}: a gated source needs token_env (e.g. HF_TOKEN)")
        return self

    @property
    def file_name(self) -> str:
        if self.filename:
            return self.filename
        return PurePosixPath(unquote(urlparse(self.urls[0]).path)).name or self.name

    @property
    def unpublished(self) -> bool:
        """No checksum is published: the file is held to what was pinned on its first fetch, or to a shared pin."""
        return self.checksum == "unpublished"

    def size_text(self) -> str:
        if self.kind == "git":
            return "a git checkout with Git LFS files" if self.lfs else "a git checkout"
        return human_size(self.size) if self.size else "size not published"

    def mismatch(self, sha256: str, md5: str | None = None, size: int | None = None) -> str | None:
        """What bytes with these digests fail of the declared checksum and size; None when they pass.
        ``md5`` is needed only when one is declared."""
        if self.size is not None and size is not None and size != self.size:
            return f"{size} bytes, expected {self.size}"
        if self.sha256 is not None and sha256 != self.sha256:
            return f"sha256 {sha256}, expected {self.sha256}"
        if self.md5 is not None and md5 != self.md5:
            return f"md5 {md5}, expected {self.md5}"
        if self.sha256_prefix is not None and not sha256.startswith(self.sha256_prefix):
            return f"sha256 {sha256}, expected one starting {self.sha256_prefix}"
        return None


def human_size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")
