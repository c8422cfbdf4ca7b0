"""A chunk as the prompt shows it: its records rendered, and the sha256 of exactly the
text that fills `{chunk}` (a chunk's identity in labels, prompts and the corpus)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from grumem.core.json_text import sha256_text

# The model tells a tool result from a decision by these labels.
ROLE_LABELS: dict[str, str] = {
    "user": "[User]",
    "assistant": "[Assistant]",
    "tool_result": "[ToolResult]",
    "system": "[System]",
}


@dataclass(frozen=True)
class Chunk:
    session: str
    index: int
    records: tuple[dict[str, Any], ...]
    path: str = ""
    line: int = 0

    @property
    def t(self) -> int:
        return self.index + 1

    @property
    def text(self) -> str:
        return render_records(self.records)

    @property
    def sha(self) -> str:
        return chunk_sha(self.records)


def render_record(role: str, text: str) -> str:
    return f"{ROLE_LABELS[role]} {text}"


def render_records(records: Sequence[dict[str, Any]]) -> str:
    """Each record as `[Role] text`, records separated by one blank line."""
    return "\n\n".join(render_record(r["role"], r["text"]) for r in records)


def chunk_sha(records: Sequence[dict[str, Any]]) -> str:
    """sha256 of the rendered chunk: exactly the bytes that fill `{chunk}`."""
    return sha256_text(render_records(records))


def distinct_chunks(sessions: Iterable[tuple[str, Sequence[Chunk]]]) -> Iterator[Chunk]:
    """Each chunk sha once, at its first occurrence in file and session order, streaming
    (`sessions` as grumem.io.chunk_files.iter_sessions gives them)."""
    seen: set[str] = set()
    for _, chunks in sessions:
        for chunk in chunks:
            sha = chunk.sha
            if sha not in seen:
                seen.add(sha)
                yield chunk
