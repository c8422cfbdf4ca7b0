"""Compiled schema validators kept across processes, keyed by what they are made from.

Every stage job is a fresh process that validates its records with
fastjsonschema; generating and compiling a schema's validator took ~10 ms a
schema, every job. The generated module is written once under the user cache
directory, named by the sha256 of its inputs (the schema, its formats, the
generator's version, fastjsonschema's version): a changed schema is another
name, so a stale validator is never found. The entry is the compiled bytecode
(marshal), keyed also by Python's bytecode version.

The cache is only a cache: a directory that cannot be written means compiling
in memory, as before, with the same validator.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import marshal
import os
import sys
import tempfile
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from types import CodeType
from typing import Any

import fastjsonschema

CACHE_ENV = "GRUMEM_CACHE_DIR"


def cache_dir() -> Path:
    """$GRUMEM_CACHE_DIR, else $XDG_CACHE_HOME/grumem, else ~/.cache/grumem."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "grumem"


def cache_key(inputs: Any) -> str:
    """sha256 of the JSON of `inputs`, fastjsonschema's version and Python's bytecode tag."""
    text = json.dumps(
        {
            "inputs": inputs,
            "fastjsonschema": fastjsonschema.VERSION,
            "python": sys.implementation.cache_tag,
            "magic": importlib.util.MAGIC_NUMBER.hex(),
        },
        sort_keys=True,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cached_validator(inputs: Any, generate: Callable[[], str]) -> Callable[[Any], Any]:
    """The `validate` function of the module `generate()` returns, made from `inputs`
    (JSON data naming everything the code depends on)."""
    key = cache_key(inputs)
    path = cache_dir() / "validators" / f"{key}.marshal"
    code = _read(path)
    if code is None:
        code = compile(generate(), f"<validator {key[:12]}>", "exec")
        _write(path, marshal.dumps(code))
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # noqa: S102 (fastjsonschema's code for one of our schemas)
    return namespace["validate"]


def _read(path: Path) -> CodeType | None:
    # bytecode is cached by hand: PYTHONDONTWRITEBYTECODE is common, and __pycache__
    # would still re-read the source's mtime; a broken entry is made again
    try:
        code = marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    return code if isinstance(code, CodeType) else None


def _write(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically (jobs running at once may write the same entry);
    an unwritable cache is skipped: the validator is the same, only made again next time."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            with suppress(OSError):
                os.unlink(tmp)
