"""Content-addressed response cache: one file per answered request, keyed by its sha256.

`cache_dir/ab/abcdef….json` holds `{"request_sha256", "attempts"}`: every
attempt of a request that ended in a successful answer, the last being that
answer. An entry is written to a temporary file in the same directory,
fsynced and renamed over its name, so a crash (kill -9 included) leaves
either the whole entry or none; temporary files start with `.` and are never
read as entries. A rerun after a crash finds every answer that arrived and
re-sends only what was in flight.

Every read checks the entry against itself: its JSON, its `request_sha256`
against its name, each attempt against the response schema and each body
against its recorded sha256 (the bytes, also when stored as `body_b64`). An
entry that fails is corrupt (bit rot, a bad copy, a hand edit) and is never
served: `CorruptEntry` names the file and the request, and the job fails. In
live mode the entry is first moved aside, in its own directory, to
`<sha>.json.corrupt` (a name never read as an entry), so the rerun meets a
miss and sends that one request again, its answer written in the entry's
place like any other. The job fails rather than re-sending at once: the new
answer may differ from the lost one (sampling, another server), and a user
who has a good copy of the entry can restore it before the rerun and keep
the recorded answer. Replay never moves anything.
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

from grumem.core.json_text import dumps, sha256_bytes, stdlib_loads
from grumem.core.recording import raw_body
from grumem.errors import CacheError, CorruptEntry
from grumem.io.fsync import fsync_dir
from grumem.io.jsonl import atomic_writer, compile_fast, schema

if TYPE_CHECKING:
    import jsonschema

_SHA_RE = re.compile(r"^[0-9a-f]{64}$")


class ResponseCache:
    def __init__(self, cache_dir: str | os.PathLike[str]):
        self.root = Path(cache_dir)

    def path(self, sha: str) -> Path:
        if not _SHA_RE.match(sha):
            raise ValueError(f"not a sha256 hex digest: {sha!r}")
        return self.root / sha[:2] / f"{sha}.json"

    def get(self, sha: str, *, set_aside: bool = False) -> list[dict[str, Any]] | None:
        """The attempts recorded for request `sha`, or None when it was never answered.

        CorruptEntry when the entry fails its checks; with `set_aside` (live mode)
        the entry is first moved to a name never read as an entry (see the module)."""
        path = self.path(sha)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return _check_entry(path, sha, raw)
        except CorruptEntry as e:
            if not set_aside:
                raise
            try:
                moved = self._set_aside(path, raw)
            except OSError as os_error:
                raise CorruptEntry(path, sha, e.reason, not_moved=str(os_error)) from None
            raise CorruptEntry(path, sha, e.reason, moved_to=moved) from None

    def _set_aside(self, path: Path, raw: bytes) -> Path:
        """Rename the corrupt entry `path` (whose bytes were `raw`) to a free
        `<name>.corrupt[.N]` in its directory; the bytes are kept as they were."""
        n = 0
        while True:
            target = path.with_name(path.name + ".corrupt" + (f".{n}" if n else ""))
            if not target.exists():
                break
            n += 1
        # another job may have replaced it with a good entry meanwhile: leave that one
        if path.read_bytes() == raw:
            os.rename(path, target)
            fsync_dir(path.parent)
        return target

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
        fsync_dir(path.parent)
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
        raise CorruptEntry(path, sha, f"not valid JSON ({e})") from None
    if not isinstance(entry, dict):
        raise CorruptEntry(path, sha, "not a JSON object")
    if entry.get("request_sha256") != sha:
        named = entry.get("request_sha256")
        raise CorruptEntry(path, sha, f"field 'request_sha256' is {named!r}, not its name")
    attempts = entry.get("attempts")
    if not isinstance(attempts, list) or not attempts:
        raise CorruptEntry(path, sha, "field 'attempts' holds no attempt")
    for i, attempt in enumerate(attempts):
        problem = _attempt_problem(i, attempt)
        if problem is not None:
            raise CorruptEntry(path, sha, problem)
    if attempts[-1]["status"] != 200:
        raise CorruptEntry(
            path, sha, f"it does not end in an answer (status {attempts[-1]['status']})"
        )
    return attempts


def _validate_attempt(path: Path, i: int, attempt: Any) -> None:
    problem = _attempt_problem(i, attempt)
    if problem is not None:
        raise CacheError(f"{path}: {problem}")


def _attempt_problem(i: int, attempt: Any) -> str | None:
    """Why attempt `i` cannot be served, naming its field; None when it can: the
    response schema's `attempt`, and a body that matches its recorded sha256."""
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
        return f"field '{field}' {message}"
    try:
        raw = raw_body(attempt["body"], attempt.get("body_b64"))  # checked: the attempt's shape
    except ValueError as e:
        return f"field 'attempts.{i}.body_b64' {e}"
    digest = None if raw is None else sha256_bytes(raw)
    if digest != attempt["sha256"]:
        return (
            f"field 'attempts.{i}.sha256': the body of attempt {i + 1} does not match its "
            "recorded sha256 (altered or damaged since it was received)"
        )
    return None


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
