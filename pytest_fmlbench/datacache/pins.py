"""Shared pins: the SHA-256 and size a lab recorded for artefacts whose publishers give no checksum.

``$FMLBENCH_PINS`` names a text file of ``name sha256 size`` lines (``#`` starts a comment). Where it holds a
line for an artefact declared ``checksum: unpublished``, that line is the artefact's checksum before any download:
a fetch keeps only those bytes and every later check holds the cached file to them. A second machine given the
first one's file therefore gets exactly the first one's bytes, or nothing. ``fmlbench data fetch
--pin-unpublished`` prints the line to share.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PINS_ENV = "FMLBENCH_PINS"
_LINE = re.compile(r"^([a-z0-9][a-z0-9._-]*)\s+([0-9a-f]{64})\s+([1-9][0-9]*)$")


class PinError(ValueError):
    """The pin file cannot be read or holds a malformed line; one line naming the file and the line."""


@dataclass(frozen=True)
class Pin:
    sha256: str
    size: int
    origin: str  # where it was recorded: "path:line"


def pin_line(name: str, sha256: str, size: int) -> str:
    return f"{name} {sha256} {size}"


def shared_pins(env: Mapping[str, str] | None = None) -> dict[str, Pin]:
    """Every pin of the file ``$FMLBENCH_PINS`` names (none when it is unset); a name pinned twice to other bytes
    is an error, since the file would not say which bytes a machine must hold."""
    path_text = (os.environ if env is None else env).get(PINS_ENV)
    if not path_text:
        return {}
    path = Path(path_text).expanduser()
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise PinError(f"{PINS_ENV}={path_text}: cannot read it ({exc.strerror or exc})") from None
    pins: dict[str, Pin] = {}
    for number, raw in enumerate(lines, 1):
        text = raw.split("#", 1)[0].strip()
        if not text:
            continue
        match = _LINE.match(text)
        if match is None:
            raise PinError(f"{path}:{number}: expected 'name sha256 size', got {text[:80]!r}")
        name, sha256, size = match.group(1), match.group(2), int(match.group(3))
        pin = Pin(sha256, size, f"{path}:{number}")
        earlier = pins.setdefault(name, pin)
        if (earlier.sha256, earlier.size) != (sha256, size):
            raise PinError(f"{path}:{number}: {name} is pinned again to other bytes than at {earlier.origin}")
    return pins
