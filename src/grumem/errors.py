"""Every error grumem raises for a user to act on; the CLI prints one as a line and exits 1.

Each names what is wrong, where (file, line, field; request; endpoint) and what to
do. The hierarchy, by what went wrong:

    GrumemError
    ├── RecordError (ValueError)        a record or file that cannot be used: path, line, field
    │   └── NestingError (JSONDecodeError)  JSON (or YAML) nested past the depth limit
    ├── RecordShapeError (ValueError)   a value that is not its record class's shape: field
    ├── WriteError                      an output that cannot be written (disk full, read-only)
    ├── UnknownFormatError (ValueError) a transcript no format reader accepts
    ├── ParseError                      an answer that is not the strict tag shape (tag, reason)
    ├── TemplateError (ValueError)      a prompt template without its slots
    ├── BudgetError (ValueError)        a prompt over the token budget, naming the component
    ├── TurnBudgetError (ValueError)    a verl rollout's turn over its budget or prompt_length
    ├── ChunkBudgetError (ValueError)   a record that cannot be cut to the section budget
    ├── KappaError                      κ that cannot be computed from these labels
    ├── MissingLabelsError              turns whose (query, chunk) has no evidence label
    ├── ExportRefused                   the export's κ gate is not met: nothing written
    ├── SampleChanged                   a calibration sample edited while its page was open
    ├── PageRequestRefused              a request the calibration page answers with 4xx
    ├── GroupFailed                     a rollout of a verl group whose sibling failed
    ├── VerlVersionError                a verl other than the one the CPU backend is pinned to
    ├── EmbeddedTrainError              the embedded (CPU) training backend cannot start
    ├── TrainPlanError (ValueError)     training settings the dataset or verl cannot run
    ├── RolloutRowError (ValueError)    a sessions.parquet row that cannot be built or run
    ├── SplitError (ValueError)         split fractions that are no split, or a split needed empty
    ├── EndpointError                   llm.base_url cannot be used as given
    ├── RequestError (ValueError)       a request body that cannot be built or sent
    ├── GrammarUnsupported              a grammar asked of a server kind that takes none
    ├── LocalServerError                the embedded llama.cpp server did not start or died
    ├── CacheError                      a response cache entry that cannot be used
    │   └── CorruptEntry                one failing its checks: never served
    └── LLMError                        what a server did, or the recording found
        ├── ReplayMiss                  replay met a request with no cached answer
        ├── WireMismatch                the bytes sent were not the recorded body
        ├── KeyInResponse               a response body holds the API key
        └── ModelMismatch               the answer names another model than asked

One exception stays beside its code: grumem.llm.transport.ResponseTooLarge
must be an httpx2 TransportError, so that the SDK maps it as it maps a cut
connection (the client records it as a failed attempt), and this module
imports no dependency. It never reaches a user as such. This module imports
nothing of grumem either: every layer may raise these.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path


class GrumemError(Exception):
    exit_code = 1


def _located(path: str, line: int | None, field: str | None, why: str) -> str:
    where = path if line is None else f"{path}:{line}"
    what = f" field '{field}'" if field else ""
    return f"{where}:{what} {why}".replace(":  ", ": ")


class RecordError(GrumemError, ValueError):
    """A record that cannot be used, located by file, line and field."""

    def __init__(self, path: str | os.PathLike[str], line: int | None, field: str | None, why: str):
        # None only on a NestingError about a text that no file holds
        self.path: str | None = str(path)
        self.line = line
        self.field = field
        self.why = why
        super().__init__(_located(self.path, line, field, why))


class NestingError(RecordError, json.JSONDecodeError):
    """JSON nested deeper than MAX_JSON_DEPTH, refused before any parser recurses that
    deep. A RecordError naming the file, line and field when raised with a path; also a
    JSONDecodeError (as orjson's own refusal past 1024 is), so a reader that turns bad
    JSON into an error of its own, or into "not JSON", does the same with this one.

    `depth` is how deep the text nests, None when only "more than the limit" is
    known; `pos`, `lineno` and `colno` (JSONDecodeError's) point at the first bracket
    past the limit when the text is known."""

    def __init__(
        self,
        depth: int | None,
        why: str,
        path: str | os.PathLike[str] | None = None,
        line: int | None = None,
        field: str | None = None,
        at: tuple[int, int, int] = (0, 1, 1),
    ):
        self.depth = depth
        self.path = None if path is None else str(path)
        self.line, self.field, self.why = line, field, why
        # JSONDecodeError's attributes, set here: its __init__ words its own message
        self.msg, self.doc = why, ""
        self.pos, self.lineno, self.colno = at
        # not RecordError.__init__: its super() would reach JSONDecodeError's
        Exception.__init__(
            self, why if self.path is None else _located(self.path, line, field, why)
        )


class RecordShapeError(GrumemError, ValueError):
    """A value that is not the shape of its record class (grumem.records), naming the
    field by its JSON path; a reader that knows the file and line says them too."""

    def __init__(self, field: str | None, why: str):
        self.field = field
        self.why = why
        super().__init__(f"{field or '(record)'}: {why}")


class WriteError(GrumemError):
    """An output that cannot be written (disk full, read-only), naming the path."""


class ParseError(GrumemError):
    """An answer that is not exactly the expected tag shape; names the failing tag."""

    MAX_RAW = 2000  # characters of the answer kept

    def __init__(self, tag: str, reason: str, text: str):
        self.tag = tag  # the tag's name without brackets: think, check, evidence, ...
        self.reason = reason
        self.raw = text
        if len(text) > self.MAX_RAW:
            self.raw = f"{text[: self.MAX_RAW]}...[truncated: {len(text)} characters in all]"
        super().__init__(f"<{tag}>: {reason}")

    def to_json(self) -> dict[str, str]:
        return {"tag": self.tag, "reason": self.reason, "raw": self.raw}


class TemplateError(GrumemError, ValueError):
    pass


class BudgetError(GrumemError, ValueError):
    """The assembled prompt does not fit; names the component that overflowed."""

    def __init__(self, component: str, tokens: int, limit: int, detail: str = ""):
        self.component = component
        self.tokens = tokens
        self.limit = limit
        msg = f"over budget: {component} is {tokens} tokens, limit {limit}"
        super().__init__(msg + (f" ({detail})" if detail else ""))


class TurnBudgetError(GrumemError, ValueError):
    """A turn of a verl rollout whose prompt does not fit (the row's budget, or the
    policy's rollout.prompt_length): names the component, the turn and the row."""

    def __init__(self, message: str, component: str):
        self.component = component
        super().__init__(message)


class ChunkBudgetError(GrumemError, ValueError):
    pass


class KappaError(GrumemError):
    """κ cannot be computed meaningfully from these inputs."""


class MissingLabelsError(GrumemError):
    """Turns whose (query_id, chunk_sha) has no label: the export cannot score them."""

    def __init__(
        self,
        labels_path: str,
        count: int,
        examples: Iterable[str],
        shown: int,
        what: str | None = None,
    ):
        self.count = count
        examples = list(examples)
        more = "" if count <= shown else f" (first {shown} shown)"
        super().__init__(
            f"{what or f'{count} turn(s)'} have no label in {labels_path}{more}: "
            + "; ".join(examples)
            + ". Labels join by (query_id, chunk_sha): a re-chunked session or a label file"
            " made for other chunks does not match; relabel these chunks."
        )


class ExportRefused(GrumemError):
    """The export's preconditions (a κ calibration it can rely on) are not met; nothing
    was written."""


class RolloutRowError(GrumemError, ValueError):
    """A sessions row that cannot be built or run: what is wrong, in which field, what to do."""


class SplitError(GrumemError, ValueError):
    """Train / val / test fractions that are not fractions summing to 1 (`field`: the one
    at fault, None for the sum), or a split a consumer needs that holds no row."""

    def __init__(self, field: str | None, why: str):
        self.field = field
        self.why = why
        super().__init__(f"split.{field} {why}" if field else f"split: {why}")


class UnknownFormatError(GrumemError, ValueError):
    pass


class CacheError(GrumemError):
    """A cache entry that cannot be used; names the file."""


class CorruptEntry(CacheError):
    """A cache entry that fails its checks: never served. `moved_to` is where it was
    set aside (live mode), else None; `label` names the request for people."""

    def __init__(
        self,
        path: Path,
        sha: str,
        reason: str,
        *,
        label: str = "",
        moved_to: Path | None = None,
        not_moved: str | None = None,
    ):
        self.path = path
        self.sha = sha
        self.reason = reason
        self.label = label
        self.moved_to = moved_to
        self.not_moved = not_moved
        where = f" ({label})" if label else ""
        super().__init__(
            f"{path}: the cache entry of request {sha}{where} is corrupt: {reason}; "
            f"{self._what_to_do()}"
        )

    def for_request(self, label: str) -> CorruptEntry:
        """The same error, naming the request as the caller knows it."""
        return CorruptEntry(
            self.path,
            self.sha,
            self.reason,
            label=label,
            moved_to=self.moved_to,
            not_moved=self.not_moved,
        )

    def _what_to_do(self) -> str:
        if self.moved_to is not None:
            return (
                f"it was moved to {self.moved_to}. Rerun to send this request again (its "
                "answer takes the entry's place), or first restore the entry from a good "
                "copy of the cache to keep the recorded answer"
            )
        if self.not_moved is not None:
            return (
                f"it could not be moved aside ({self.not_moved}): delete it and rerun to "
                "send this request again, or restore it from a good copy of the cache"
            )
        return (
            "replay serves only intact answers: restore the entry from a good copy of the "
            "cache, or delete it and run in llm.mode: live to send this request again"
        )


class EndpointError(GrumemError):
    """`llm.base_url` cannot be used as given."""


class RequestError(GrumemError, ValueError):
    """A request body that cannot be built or sent as given."""


class GrammarUnsupported(GrumemError):
    pass


class LocalServerError(GrumemError):
    pass


class LLMError(GrumemError):
    pass


class ReplayMiss(LLMError):
    """Replay mode met a request with no cached answer."""

    def __init__(self, sha: str, label: str = ""):
        self.sha = sha
        self.label = label
        where = f" ({label})" if label else ""
        super().__init__(
            f"replay: no cached response for request {sha}{where}; run in llm.mode: live to send it"
        )


class WireMismatch(LLMError):
    """The SDK sent bytes other than the recorded body: the record would be a lie."""


class KeyInResponse(LLMError):
    """A response body holds the API key: it may be neither cached nor recorded."""


class ModelMismatch(LLMError):
    """The server answered as another model than the request asked for."""


class SampleChanged(GrumemError):
    """The sample file no longer holds the pair the page answered (edited meanwhile)."""


class PageRequestRefused(GrumemError):
    """A request to the calibration page refused with HTTP `status` (4xx); nothing was
    changed. `text` is what the page answers."""

    def __init__(self, status: int, text: str):
        super().__init__(text)
        self.status = status
        self.text = text


class GroupFailed(GrumemError):
    """Another rollout of the row failed, so this one is not trained on either."""


class VerlVersionError(GrumemError):
    """The installed verl is not the version whose private names grumem.verl.private
    was read from: the CPU backend would patch what may no longer be there."""


class EmbeddedTrainError(GrumemError):
    """The embedded CPU training backend cannot run as asked: its model folder, its
    settings, or a rollout request it cannot serve."""


class TrainPlanError(GrumemError, ValueError):
    """Training settings checked against the dataset before verl starts: every setting
    that cannot run, each naming its value, what it was checked against and what to do."""

    def __init__(self, problems: Iterable[str]):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))
