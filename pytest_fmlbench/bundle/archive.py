"""The bundle's container: a tar written as a stream (never held whole in memory), compressed by the output's
suffix, and read back by its first bytes; reading accepts plain files only, at names inside the bundle."""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from . import BundleError

SUFFIXES = (".tar.zst", ".tzst", ".tar.gz", ".tgz", ".tar.xz", ".tar")
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# a file of a bundle is a record, a log or code: anything larger is refused, not read into memory
MAX_MEMBER_BYTES = 512 << 20
# and the whole bundle unpacked: a compressed bundle that would fill the verifier's disk is refused
MAX_TOTAL_BYTES = 64 << 30


def _zstandard():
    try:
        import zstandard
    except ImportError:
        raise BundleError("a .tar.zst bundle needs the zstandard package (pip install zstandard), or name the "
                          "output .tar.gz") from None
    return zstandard


class Writer:
    """Adds files to the open tar stream with fixed owners and times, so a bundle's bytes depend on its
    contents only."""

    def __init__(self, tar: tarfile.TarFile):
        self._tar = tar

    def add(self, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = 0o644
        self._tar.addfile(info, io.BytesIO(data))


@contextmanager
def writer(path: Path) -> Iterator[Writer]:
    """A bundle written to ``path`` (atomically: a failed bundle leaves no file behind)."""
    name = path.name
    if not name.endswith(SUFFIXES):
        raise BundleError(f"{path}: name the bundle with one of {', '.join(SUFFIXES)}")
    zstd = _zstandard() if name.endswith((".tar.zst", ".tzst")) else None
    tmp = path.with_name(f".{name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as raw:
            if zstd is not None:
                with zstd.ZstdCompressor(level=10).stream_writer(raw, closefd=False) as packed, \
                        tarfile.open(fileobj=packed, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                    yield Writer(tar)
            else:
                mode = "w|gz" if name.endswith((".tar.gz", ".tgz")) else "w|xz" if name.endswith(".tar.xz") else "w|"
                with tarfile.open(fileobj=raw, mode=mode, format=tarfile.PAX_FORMAT) as tar:
                    yield Writer(tar)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _safe_name(name: str) -> str:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or any(part in ("..", "") for part in name.split("/")) or "\\" in name:
        raise BundleError(f"{name!r}: a name outside the bundle")
    return path.as_posix()


def extract(path: Path, into: Path) -> list[str]:
    """Every file of the bundle at ``path``, written under ``into``; their names in the bundle's order."""
    try:
        raw = open(path, "rb")
    except OSError as exc:
        raise BundleError(f"{path}: {exc.strerror or exc}") from None
    with raw:
        head = raw.read(4)
        raw.seek(0)
        if head == _ZSTD_MAGIC:
            stream = _zstandard().ZstdDecompressor().stream_reader(raw)
            mode = "r|"
        else:
            stream, mode = raw, "r|*"
        names: list[str] = []
        total = 0
        try:
            with tarfile.open(fileobj=stream, mode=mode) as tar:
                for member in tar:
                    name = _safe_name(member.name)
                    if member.isdir():
                        continue
                    if not member.isfile():
                        raise BundleError(f"{name}: not a plain file (a link or a device), refused")
                    if member.size > MAX_MEMBER_BYTES:
                        raise BundleError(f"{name}: {member.size} bytes, more than a bundle's file may hold")
                    total += member.size
                    if total > MAX_TOTAL_BYTES:
                        raise BundleError(f"{path}: unpacks to more than {MAX_TOTAL_BYTES >> 30} GiB, refused")
                    if name in names:
                        raise BundleError(f"{name}: in the bundle twice")
                    target = into / name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    source = tar.extractfile(member)
                    with open(target, "wb") as out:
                        while chunk := source.read(1 << 20):
                            out.write(chunk)
                    names.append(name)
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise BundleError(f"{path}: not a readable bundle ({type(exc).__name__}: {exc})") from None
        except Exception as exc:  # zstandard's own errors
            if type(exc).__module__.startswith("zstandard"):
                raise BundleError(f"{path}: not a readable bundle ({exc})") from None
            raise
    return names

