"""Files the commands write: atomically, and through no link planted where they write.

A file is written to a new file of an unpredictable name beside it (created exclusively, so
never through a link someone planted there), flushed to disk, then renamed over the target (a
link at the target's own name is replaced, not followed): a reader sees the old file or the
new one, never half of one, and no file elsewhere is overwritten.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Union

__all__ = ["write_file", "copy_file"]


def write_file(target: Union[str, Path], data: Union[str, bytes], *,
               mode: int = 0o644) -> Path:
    """Write ``data`` (text as UTF-8, newlines as given) to ``target`` atomically, following
    no link; the file gets ``mode`` (readable by all by default). Raises OSError when the
    directory is missing or cannot be written."""
    target = Path(target)
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    handle, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part",
                                    dir=str(target.parent))
    try:
        with os.fdopen(handle, "wb") as written:
            written.write(raw)
            written.flush()
            os.fsync(written.fileno())
        os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return target


def copy_file(source: Union[str, Path], directory: Union[str, Path]) -> Path:
    """Copy ``source`` into ``directory`` under its own name, as :func:`write_file` writes."""
    source = Path(source)
    return write_file(Path(directory) / source.name, source.read_bytes())
