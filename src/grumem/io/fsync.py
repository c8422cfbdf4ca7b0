"""A rename made durable: the directory entry fsynced after a file is renamed into place.

grumem.io.jsonl.atomic_writer fsyncs the file's bytes before the rename; the
rename itself is on disk only once its directory is, and without that a power
cut can bring the old file back (or none). The response cache and the
calibration sample, which other jobs or a later run rely on at once, call
this after each write.
"""

from __future__ import annotations

import os


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """fsync `directory`, so that the renames made in it are on disk."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
