"""Reading a file that agent code or an experiment could have written, without trusting it.

Kept apart from evalkit (numpy, pydantic) so that what only reads such files (the editor, in every agent
host) starts without them."""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_UNTRUSTED_BYTES = 256 << 20


def read_untrusted(path: Path, max_bytes: int = MAX_UNTRUSTED_BYTES) -> bytes:
    """The bytes of a file the experiment could have written: a regular file, read within a size limit.

    Links are not followed (a planted link must not make the evaluator read, and echo in an error,
    a file the experiment itself could not see) and a FIFO cannot hang the reader.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise OSError(f"{path.name}: refused ({'a symbolic link' if path.is_symlink() else exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path.name}: refused (not a regular file)")
        if info.st_size > max_bytes:
            raise OSError(f"{path.name}: refused ({info.st_size} bytes, more than {max_bytes})")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise OSError(f"{path.name}: refused (more than {max_bytes} bytes)")
    return data
