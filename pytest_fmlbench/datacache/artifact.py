"""One artefact a full-profile task needs: where it comes from and what its bytes must hash to."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Literal
from urllib.parse import unquote, urlparse

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SCHEMES = ("https", "http", "file")


class Artifact(BaseModel):
    """A file (checked by SHA-256 and size) or a git repository (checked by its pinned commit)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", description="the cache folder's name; tasks may share one")
    kind: Literal["file", "git"] = "file"
    urls: list[str] = Field(min_length=1, description="sources tried in order (mirrors); https, http or file")
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$", description="of the file's bytes (kind file)")
    size: int | None = Field(None, gt=0, description="the file's size in bytes (kind file)")
    commit: str | None = Field(None, pattern=r"^[0-9a-f]{40}$", description="the pinned commit (kind git)")
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
        if self.kind == "file" and (self.sha256 is None or self.size is None):
            raise ValueError(f"artefact {self.name!r}: a file needs sha256 and size")
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

    def size_text(self) -> str:
        return human_size(self.size) if self.size else "a git checkout"


def human_size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")
