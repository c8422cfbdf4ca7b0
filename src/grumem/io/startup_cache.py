"""What every job would otherwise rebuild at start-up, kept across processes.

Every stage job is a fresh process. Two things it needs are most of a small
job's start-up: fastjsonschema's validator of each schema it reads or writes
(generated and compiled) and tiktoken's ranks (a 1.7 MB text file of base64,
parsed). Each is made once and kept under the user
cache directory as marshal data, named by the sha256 of everything it is made
from (the schema, the generator's and fastjsonschema's versions, the ranks
file's sha256, Python's bytecode version): a changed input is another name, so
a stale entry is never found.

It is only a cache: an entry that cannot be read is made again, and a
directory that cannot be written means making it in memory, every job.
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
    """sha256 of the JSON of `inputs`, fastjsonschema's version and Python's marshal version."""
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
    key = cache_key({"validator": inputs})
    path = cache_dir() / "validators" / f"{key}.marshal"
    code = _read(path)
    if not isinstance(code, CodeType):
        code = compile(generate(), f"<validator {key[:12]}>", "exec")
        _write(path, marshal.dumps(code))
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # noqa: S102 (fastjsonschema's code for one of our schemas)
    validate: Callable[[Any], Any] = namespace["validate"]
    return validate


def cached_data(inputs: Any, make: Callable[[], Any]) -> Any:
    """`make()` (a value marshal can write: str, bytes, numbers, dicts, lists...), made
    from `inputs` (JSON data naming everything it depends on)."""
    key = cache_key({"data": inputs})
    path = cache_dir() / "data" / f"{key}.marshal"
    value = _read(path)
    if value is None:
        value = make()
        _write(path, marshal.dumps(value))
    return value


def _read(path: Path) -> Any:
    # bytecode is kept by hand: PYTHONDONTWRITEBYTECODE is common, and __pycache__
    # would still read the source; a missing or broken entry is None, made again
    try:
        return marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None


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
