"""The trajectory viewer: one self-contained HTML page per project, built from the corpus
(trajectories.jsonl) and the turn log (log.jsonl) alone.

The page lists trajectories (filters: query, session, sample, r_format, r_exit
value or reason, aborted) and shows one as a timeline of its turns: the
section (collapsed), the update gate against the evidence label, the exit
gate, the memory after the turn with what changed since the turn before, the
think text, parse failures (tag, reason), the rewards and advantages; the last
evidence turn and the exit turn are marked.

How it stays usable at 100,000 trajectories: the page holds a sample, never
the corpus. A first pass over the corpus keeps, per stratum (r_exit value or
reason x r_format x abort reason), the `max_trajectories` trajectories whose
sha256(trajectory_id) is smallest (a pseudo-random pick that depends on the
ids, not on the file's order); the strata then take turns, smallest hash
first, so a rare stratum (aborted, r_format 0) is shown as often as a common
one. A second pass streams the log and the corpus side by side and spools the
picked trajectories' records to an unnamed temporary file; the page takes
them in that order while it stays under `max_bytes` (default: what a
Snakemake report can show, see MAX_BYTES). Sections are stored once per
chunk_sha. Memory: the per-stratum picks and the spool's offsets, a few
hundred bytes a picked trajectory. The page says how many it shows of how
many, per stratum.

Text from transcripts is data, never markup: every record is JSON inside a
`<script type="application/json">` element with `<`, `>` and `&` escaped
(so no text can close the element), and the page's script puts text into the
document with `textContent` only. A Content-Security-Policy allows only the
page's own inlined script and style (by hash) and no network at all.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import heapq
import html
import json
import os
import re
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.resources import files
from typing import IO, Any

from grumem.core.template import memory_text
from grumem.corpus.log_reader import LogReader, LogTrajectory, group_trajectories
from grumem.errors import RecordError
from grumem.io.jsonl import atomic_writer
from grumem.io.template_files import GRU_MEM_TEMPLATE, load_template
from grumem.io.typed import read_records
from grumem.records.gate import ParseFailure
from grumem.records.log import LogLine
from grumem.records.trajectory import Trajectory, TrajectoryTurn

VIEWER = "viewer.html"
DEFAULT_MAX_TRAJECTORIES = 500
# Chromium shows no data: URL longer than 2 MiB, and the Snakemake report embeds
# each result as a base64 data: URL (4 characters per 3 bytes) in an iframe
MAX_BYTES = 1_500_000

EXIT_NAMES = {0.0: "on_time", -0.75: "early", -0.5: "late"}

# a word, a run of whitespace, or one other character: memory diffs by word
_TOKEN_RE = re.compile(r"\w+|\s+|[^\w\s]")
_SLOT_RE = re.compile(r"\{(prompt|memory|chunk)\}")


# ------------------------------------------------------------------ pure parts


def exit_label(r_exit: float | None, reason: str | None) -> str:
    """r_exit by name (on_time, early, late), or the reason it is null."""
    if r_exit is None:
        return str(reason)
    return EXIT_NAMES[float(r_exit)]


def memory_diff(before: str | None, after: str | None) -> list[list[str]]:
    """What changed from memory `before` to `after`, by word: [op, text] with op "="
    (kept), "-" (removed) or "+" (added), adjacent ops merged. No memory yet (None)
    diffs as empty; `after` is the "=" and "+" texts joined."""
    a = _TOKEN_RE.findall(before or "")
    b = _TOKEN_RE.findall(after or "")
    ops: list[list[str]] = []

    def add(op: str, tokens: list[str]) -> None:
        if not tokens:
            return
        if ops and ops[-1][0] == op:
            ops[-1][1] += "".join(tokens)
        else:
            ops.append([op, "".join(tokens)])

    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            add("=", a[i1:i2])
        else:
            add("-", a[i1:i2])
            add("+", b[j1:j2])
    return ops


@dataclass(frozen=True)
class PromptShape:
    """Reads the question and the section back out of a recorded user message, given
    the template it was filled from and the memory that filled its memory slot."""

    pieces: tuple[str, ...]  # literal, slot, literal, slot, ... literal

    @classmethod
    def from_template(cls, template: str) -> PromptShape:
        return cls(tuple(_SLOT_RE.split(template)))

    def split(self, user: str, memory_before: str | None) -> tuple[str, str] | None:
        """(question, section), or None when the message is not this template filled."""
        pattern = []
        slots = self.pieces[1::2]
        for i, piece in enumerate(self.pieces):
            if i % 2 == 0:
                pattern.append(re.escape(piece))
            elif piece == "memory":
                pattern.append(re.escape(memory_text(memory_before)))
            else:
                last = slots.index(piece) == len(slots) - 1
                pattern.append(f"(?P<{piece}>.*)" if last else f"(?P<{piece}>.*?)")
        m = re.fullmatch("".join(pattern), user, flags=re.DOTALL)
        if m is None:
            return None
        return m.group("prompt"), m.group("chunk")


def script_json(value: Any) -> str:
    """JSON that is safe as the text of a <script> element: no `<`, `>` or `&`
    (a transcript holding `</script>` cannot end the element) and no U+2028/9."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(ch, esc)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def stratum(traj: Trajectory) -> tuple[str, int, str]:
    """(r_exit by name or reason, r_format, abort reason or "none") of a corpus record."""
    aborted = traj.aborted
    return (
        exit_label(traj.r_exit, traj.r_exit_reason),
        traj.r_format,
        "none" if aborted is None else aborted.reason,
    )


def id_rank(trajectory_id: str) -> int:
    return int.from_bytes(hashlib.sha256(trajectory_id.encode("utf-8")).digest()[:8], "big")


def take_turns(strata: dict[tuple[str, int, str], list[tuple[int, str]]]) -> list[str]:
    """Ids in the order the page takes them: the strata in turn, each smallest rank first."""
    queues = [sorted(strata[s]) for s in sorted(strata)]
    order: list[str] = []
    depth = 0
    while any(depth < len(q) for q in queues):
        order += [q[depth][1] for q in queues if depth < len(q)]
        depth += 1
    return order


# ------------------------------------------------------------------ the first pass


@dataclass
class Plan:
    """What the first pass over the corpus decides: the order in which the page takes
    trajectories, and the corpus's counts per stratum."""

    order: list[str]
    counts: Counter[tuple[str, int, str]]
    trajectories: int


def plan(trajectories: str | os.PathLike[str], max_trajectories: int) -> Plan:
    keep: dict[tuple[str, int, str], list[tuple[int, str]]] = {}
    counts: Counter[tuple[str, int, str]] = Counter()
    n = 0
    for _, traj in read_records(trajectories, Trajectory):
        n += 1
        key = stratum(traj)
        counts[key] += 1
        heap = keep.setdefault(key, [])
        item = (-id_rank(traj.trajectory_id), traj.trajectory_id)
        if len(heap) < max_trajectories:
            heapq.heappush(heap, item)
        elif item > heap[0]:
            heapq.heapreplace(heap, item)
    ranked = {k: [(-r, tid) for r, tid in v] for k, v in keep.items()}
    return Plan(take_turns(ranked)[:max_trajectories], counts, n)


# ------------------------------------------------------------------ the second pass


def turn_view(
    turn: TrajectoryTurn, line: LogLine, shape: PromptShape, sections: dict[str, str]
) -> tuple[dict[str, Any], str | None]:
    """One turn as the page shows it, and the question its prompt holds (if it parses)."""
    user = turn.prompt[-1].content
    split = shape.split(user, line.memory_before)
    view: dict[str, Any] = {
        "t": turn.t,
        "chunk_sha": turn.chunk_sha,
        "label": turn.label,
        "update_gate": turn.update_gate,
        "exit_gate": turn.exit_gate,
        "parsed": turn.parsed,
        "parse_error": _parse_error(line.parse_error),
        "earlier_asks": [
            {"ask": a.ask, "parse_error": _parse_error(a.parse_error)} for a in line.earlier_asks
        ],
        "r_update": turn.r_update,
        "advantage": turn.advantage,
        "advantage_traj": turn.advantage_traj,
        "advantage_turn": turn.advantage_turn,
        "think": line.think,
        "memory": memory_diff(line.memory_before, line.memory_after),
        "memory_empty": line.memory_after is None,
        "response": turn.response,
        "asks": turn.asks,
        "attempt": turn.attempt,
        "latency_s": None if line.response is None else line.response.latency_s,
        "prompt": None if split else user,
    }
    if split is not None:
        sections.setdefault(turn.chunk_sha, split[1])
    return view, None if split is None else split[0]


def _parse_error(e: ParseFailure | None) -> dict[str, str] | None:
    return None if e is None else {"tag": e.tag, "reason": e.reason}


def trajectory_view(
    traj: Trajectory, log: LogTrajectory, shape: PromptShape, log_path: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """A joined trajectory as the page shows it, and the sections it needs (sha -> text)."""
    lines = {rec.t: (lineno, rec) for lineno, rec in log.turns}
    sections: dict[str, str] = {}
    turns = []
    question = None
    for turn in traj.turns:
        if turn.t not in lines:
            raise RecordError(
                log_path,
                None,
                "t",
                f"trajectory {traj.trajectory_id!r} has no log line for its turn"
                f" t={turn.t}: the corpus is not the export of this log",
            )
        lineno, line = lines[turn.t]
        if line.chunk_sha != turn.chunk_sha:
            raise RecordError(
                log_path,
                lineno,
                "chunk_sha",
                f"differs from the corpus's turn t={turn.t} of {traj.trajectory_id!r}:"
                " the corpus is not the export of this log",
            )
        view, q = turn_view(turn, line, shape, sections)
        question = question or q
        turns.append(view)
    abort = None
    if log.abort is not None:
        a = log.abort[1]
        assert a.abort is not None  # the reader's check: an aborted line says why
        abort = {"t": a.t, **a.abort.to_dict()}
    view = {
        "id": traj.trajectory_id,
        "query_id": traj.query_id,
        "question": question,
        "session": traj.session,
        "sample": traj.sample,
        "level": traj.level,
        "model": traj.model,
        "r_exit": traj.r_exit,
        "r_exit_reason": traj.r_exit_reason,
        "r_format": traj.r_format,
        "r_outcome": traj.r_outcome,
        "t_exit": traj.t_exit,
        "t_last_evidence": traj.t_last_evidence,
        "aborted": abort,
        "turns": turns,
    }
    return view, sections


def index_row(view: dict[str, Any]) -> dict[str, Any]:
    """What the list shows of a trajectory (and filters on)."""
    turns = view["turns"]
    return {
        "id": view["id"],
        "query_id": view["query_id"],
        "session": view["session"],
        "sample": view["sample"],
        "level": view["level"],
        "turns": len(turns),
        "r_format": view["r_format"],
        "exit": exit_label(view["r_exit"], view["r_exit_reason"]),
        "r_exit": view["r_exit"],
        "aborted": None if view["aborted"] is None else view["aborted"]["reason"],
        "agree": sum(t["update_gate"] == t["label"] for t in turns),
        "parsed": sum(t["parsed"] for t in turns),
    }


def joined(
    log_path: str, trajectories_path: str
) -> Iterator[tuple[Trajectory | None, LogTrajectory]]:
    """The log's trajectories with their corpus records, side by side in one stream
    (the export writes the corpus in the log's order); None for a trajectory aborted
    before its first answer, which the export leaves out."""
    corpus = read_records(trajectories_path, Trajectory)
    pending = next(corpus, None)
    for log in group_trajectories(log_path, iter(LogReader(log_path, hash=False))):
        tid = log.first.trajectory_id
        if pending is not None and pending[1].trajectory_id == tid:
            yield pending[1], log
            pending = next(corpus, None)
        elif not log.turns:
            yield None, log
        else:
            where = pending[0] if pending is not None else None
            found = repr(pending[1].trajectory_id) if pending is not None else "its end"
            raise RecordError(
                trajectories_path,
                where,
                "trajectory_id",
                f"the log's next exported trajectory is {tid!r}, the corpus has {found}:"
                " give the corpus exported from this log",
            )
    if pending is not None:
        raise RecordError(
            trajectories_path,
            pending[0],
            "trajectory_id",
            f"{pending[1].trajectory_id!r} is not in the log: give the log it was exported from",
        )


@dataclass
class Spool:
    """Records written once to an unnamed temporary file, read back by offset."""

    file: IO[bytes]
    where: dict[str, tuple[int, int]] = field(default_factory=dict)

    def put(self, key: str, data: bytes) -> None:
        self.where[key] = (self.file.tell(), len(data))
        self.file.write(data)

    def get(self, key: str) -> bytes:
        offset, size = self.where[key]
        self.file.seek(offset)
        return self.file.read(size)

    def size(self, key: str) -> int:
        return self.where[key][1]


@dataclass
class ViewerStats:
    trajectories: int  # in the corpus
    not_exported: int  # in the log only (aborted before their first answer)
    shown: int
    bytes: int


def write_viewer(
    log: str | os.PathLike[str],
    trajectories: str | os.PathLike[str],
    template: str | os.PathLike[str] | None,
    out: str | os.PathLike[str],
    project: str,
    max_trajectories: int = DEFAULT_MAX_TRAJECTORIES,
    max_bytes: int = MAX_BYTES,
) -> ViewerStats:
    """Write the viewer page to `out` (atomically)."""
    log_path, corpus_path = str(log), str(trajectories)
    shape = PromptShape.from_template(load_template(template or GRU_MEM_TEMPLATE))
    planned = plan(corpus_path, max_trajectories)
    wanted = set(planned.order)
    questions: dict[str, str] = {}
    rows: dict[str, dict[str, Any]] = {}
    keys: dict[str, tuple[str, int, str]] = {}
    needs: dict[str, list[str]] = {}
    not_exported = 0
    out_dir = os.path.dirname(os.path.abspath(out))
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryFile(dir=out_dir) as spool_file:
        spool = Spool(spool_file)
        for traj, log_traj in joined(log_path, corpus_path):
            if traj is None:
                not_exported += 1
                continue
            if traj.trajectory_id not in wanted:
                continue
            view, sections = trajectory_view(traj, log_traj, shape, log_path)
            if view["question"] is not None:
                questions.setdefault(view["query_id"], view["question"])
            tid = view["id"]
            spool.put("t:" + tid, script_json(view).encode("utf-8"))
            for sha, text in sections.items():
                if "s:" + sha not in spool.where:
                    spool.put("s:" + sha, script_json(text).encode("utf-8"))
            needs[tid] = sorted(sections)
            rows[tid] = index_row(view)  # the record itself is in the spool, not kept
            keys[tid] = stratum(traj)
        shown, sections_shown, size = _fit(planned.order, needs, spool, max_bytes)
        index = _index(project, planned, shown, rows, keys, questions, not_exported, max_bytes)
        with atomic_writer(out, "wb") as f:
            size = _write_page(f, project, index, shown, sections_shown, spool)
    return ViewerStats(planned.trajectories, not_exported, len(shown), size)


# the page around the records, with room for the index: what _fit counts per page
_PAGE_OVERHEAD = 60_000
_ELEMENT_OVERHEAD = 120  # a record's <script> tags and its index row


def _fit(
    order: list[str], needs: dict[str, list[str]], spool: Spool, max_bytes: int
) -> tuple[list[str], list[str], int]:
    """The trajectories the page takes, in `order`, while it stays under max_bytes
    (0: no limit); a trajectory too big to fit is passed over for the next ones."""
    shown: list[str] = []
    sections: list[str] = []
    have: set[str] = set()
    size = _PAGE_OVERHEAD
    for tid in order:
        if tid not in needs:
            continue
        new = [s for s in needs[tid] if s not in have]
        cost = spool.size("t:" + tid) + 2 * _ELEMENT_OVERHEAD
        cost += sum(spool.size("s:" + s) + _ELEMENT_OVERHEAD for s in new)
        if max_bytes and size + cost > max_bytes:
            continue
        size += cost
        shown.append(tid)
        sections += new
        have.update(new)
    return shown, sections, size


def _index(
    project: str,
    planned: Plan,
    shown: list[str],
    rows: dict[str, dict[str, Any]],
    keys: dict[str, tuple[str, int, str]],
    questions: dict[str, str],
    not_exported: int,
    max_bytes: int,
) -> dict[str, Any]:
    shown_counts = Counter(keys[tid] for tid in shown)
    # listed in the log's order: the order a person finds them in the files
    taken = set(shown)
    listed = [tid for tid in rows if tid in taken]
    return {
        "project": project,
        "trajectories": planned.trajectories,
        "not_exported": not_exported,
        "max_bytes": max_bytes,
        "shown": len(shown),
        "strata": [
            {"exit": k[0], "r_format": k[1], "aborted": k[2], "corpus": n, "shown": shown_counts[k]}
            for k, n in sorted(planned.counts.items())
        ],
        "questions": questions,
        "rows": [{"el": f"t{i}", **rows[tid]} for i, tid in enumerate(listed)],
    }


def asset(name: str) -> str:
    """A file shipped beside this module (the page's script and style)."""
    return (files("grumem.report") / name).read_text(encoding="utf-8")


def csp_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def _write_page(
    f: IO[bytes],
    project: str,
    index: dict[str, Any],
    shown: list[str],
    sections: list[str],
    spool: Spool,
) -> int:
    script, style = asset("viewer.js"), asset("viewer.css")
    csp = (
        f"default-src 'none'; script-src {csp_hash(script)}; style-src {csp_hash(style)};"
        " img-src data:; base-uri 'none'; form-action 'none'"
    )
    title = html.escape(f"grumem: trajectories of {project}")
    n = 0

    def w(text: str | bytes) -> None:
        nonlocal n
        data = text.encode("utf-8") if isinstance(text, str) else text
        n += len(data)
        f.write(data)

    w(
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f"<title>{title}</title>\n<style>{style}</style>\n</head>\n<body>\n"
        '<div id="app"><noscript>The trajectory viewer needs JavaScript.</noscript></div>\n'
    )
    rows = {row["id"]: row["el"] for row in index["rows"]}
    for tid in shown:
        w(f'<script type="application/json" id="{rows[tid]}">')
        w(spool.get("t:" + tid))
        w("</script>\n")
    for sha in sections:
        w(f'<script type="application/json" id="s{sha}">')
        w(spool.get("s:" + sha))
        w("</script>\n")
    w('<script type="application/json" id="grumem-index">')
    w(script_json(index))
    w(f"</script>\n<script>{script}</script>\n</body>\n</html>\n")
    return n


__all__ = ["MAX_BYTES", "VIEWER", "ViewerStats", "write_viewer"]
