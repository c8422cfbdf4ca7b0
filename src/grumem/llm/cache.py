"""Content-addressed response cache: one file per answered request, keyed by its sha256.

`cache_dir/ab/abcdef….json` holds `{"request_sha256", "attempts"}`: every
attempt of a request that ended in a successful answer, the last being that
answer. An entry is written to a temporary file in the same directory,
fsynced and renamed over its name, so a crash (kill -9 included) leaves
either the whole entry or none; temporary files start with `.` and are never
read as entries. A rerun after a crash finds every answer that arrived and
re-sends only what was in flight.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fastjsonschema

from grumem.errors import GrumemError
from grumem.jsonl import RecordError, atomic_writer, compile_fast, dumps, schema, stdlib_loads

if TYPE_CHECKING:
    import jsonschema

_SHA_RE = re.compile(r"^[0-9a-f]{64}$")


class CacheError(GrumemError):
    """A cache entry that cannot be used; names the file."""


class ResponseCache:
    def __init__(self, cache_dir: str | os.PathLike[str]):
        self.root = Path(cache_dir)

    def path(self, sha: str) -> Path:
        if not _SHA_RE.match(sha):
            raise ValueError(f"not a sha256 hex digest: {sha!r}")
        return self.root / sha[:2] / f"{sha}.json"

    def get(self, sha: str) -> list[dict[str, Any]] | None:
        """The attempts recorded for request `sha`, or None when it was never answered."""
        path = self.path(sha)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        return _check_entry(path, sha, raw)

    def put(self, sha: str, attempts: list[dict[str, Any]]) -> Path:
        """Store the attempts of an answered request, atomically; returns the entry's path."""
        if not attempts or attempts[-1]["status"] != 200:
            raise ValueError("only a request whose last attempt answered (HTTP 200) is cached")
        path = self.path(sha)
        for i, attempt in enumerate(attempts):
            _validate_attempt(path, i, attempt)
        with atomic_writer(path) as f:
            f.write(dumps({"request_sha256": sha, "attempts": attempts}))
            f.write("\n")
        _fsync_dir(path.parent)
        return path

    def __contains__(self, sha: str) -> bool:
        return self.path(sha).is_file()

    def shas(self) -> Iterator[str]:
        """Every request sha with an entry (temporary files excluded), streaming."""
        if not self.root.is_dir():
            return
        for sub in sorted(self.root.iterdir()):
            if not sub.is_dir() or len(sub.name) != 2:
                continue
            for f in sorted(sub.iterdir()):
                if f.suffix == ".json" and _SHA_RE.match(f.stem) and f.stem[:2] == sub.name:
                    yield f.stem


def _check_entry(path: Path, sha: str, raw: bytes) -> list[dict[str, Any]]:
    try:
        entry = stdlib_loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CacheError(
            f"{path}: cache entry is not valid JSON ({e}); delete the file "
            "to have the request sent again"
        ) from None
    if not isinstance(entry, dict) or entry.get("request_sha256") != sha:
        raise CacheError(f"{path}: cache entry is not the one for request {sha}")
    attempts = entry.get("attempts")
    if not isinstance(attempts, list) or not attempts:
        raise CacheError(f"{path}: cache entry has no attempts")
    for i, attempt in enumerate(attempts):
        _validate_attempt(path, i, attempt)
    if attempts[-1]["status"] != 200:
        raise CacheError(
            f"{path}: cache entry does not end in an answer (status {attempts[-1]['status']})"
        )
    return attempts


def _validate_attempt(path: Path, i: int, attempt: Any) -> None:
    # the compiled check on every entry (a put per answer, a get per request);
    # jsonschema, the reference, only to name the field of one it rejects
    try:
        _fast_attempt_check()(attempt)
    except fastjsonschema.JsonSchemaValueException as fast:
        errors = list(_attempt_validator().iter_errors(attempt))
        e = errors[0] if errors else None
        where = [str(p) for p in e.absolute_path] if e else fast.path[1:]
        field = ".".join(["attempts", str(i), *where])
        message = e.message if e else fast.message
        raise CacheError(str(RecordError(path, None, field, message))) from None


def _attempt_schema() -> dict[str, Any]:
    """The `attempt` definition of workflow/schemas/response.schema.yaml."""
    s = schema("response")
    return {"$schema": s["$schema"], **s["$defs"]["attempt"]}


@lru_cache(maxsize=1)
def _fast_attempt_check() -> Callable[[Any], Any]:
    return compile_fast(_attempt_schema())


@lru_cache(maxsize=1)
def _attempt_validator() -> jsonschema.protocols.Validator:
    import jsonschema  # ~80 ms to import: only for an entry the compiled check rejects

    attempt_schema = _attempt_schema()
    return jsonschema.validators.validator_for(attempt_schema)(attempt_schema)


def _fsync_dir(directory: Path) -> None:
    # the rename is durable only once the directory entry is on disk
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
