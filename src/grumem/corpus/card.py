"""README.md of an export: a dataset card in the Hugging Face convention.

A YAML header (license placeholder, task categories, tags, and `configs`
naming each parquet file by split, so `datasets.load_dataset(<corpus directory>)`
and the Hub read turns-train.parquet as `train`, not every file of the directory
as one), then the body:
what a row is, every column of the parquet file with its type (taken from the
schema the file is written with; a column without a description here is an
error, so the card cannot fall behind the file), how the rewards and
advantages are defined, the splits with their counts, the model, the template's
sha256, κ with its n, and the summary's counts. Deterministic: the same export gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import yaml

from grumem.core.split import SPLITS, SplitName, split_file
from grumem.errors import GrumemError
from grumem.records.summary import Advantages, CorpusSummary, Inputs

CARD = "README.md"
# the Hub's names of the splits (its convention says `validation`)
HUB_SPLITS: dict[SplitName, str] = {"train": "train", "val": "validation", "test": "test"}


@dataclass(frozen=True)
class SplitTable:
    """The project's split (its fractions and seed, as words) and what each split holds:
    split -> {what: count}, the same keys for every split."""

    description: str
    counts: Mapping[SplitName, Mapping[str, int]]


# every column of turns.parquet, nested fields by their dotted path
COLUMNS: dict[str, str] = {
    "data_source": "verl's data source name (`export.data_source`)",
    "prompt": "the chat messages of the recorded request, byte for byte as sent",
    "prompt.role": "`system` or `user`",
    "prompt.content": "the message text; the user message is the filled template",
    "ability": "verl's ability tag (`memory_gating`)",
    "reward_model": "verl's reward field",
    "reward_model.style": "`rule`: grumem's compute_score scores a new answer",
    "reward_model.ground_truth": "the turn's evidence label as text (`yes` or `no`)",
    "extra_info": "grumem's record of the turn",
    "extra_info.split": "the session's split: `train`, `val` or `test`",
    "extra_info.index": "the row's place in turns.parquet (unique in a split's file too)",
    "extra_info.trajectory_id": "project/query/session/sample",
    "extra_info.t": "the turn, from 1",
    "extra_info.chunk_sha": "sha256 of the section (the rendered chunk)",
    "extra_info.label": "the evidence label of (query, chunk), joined by chunk_sha",
    "extra_info.response": "the assistant text of the recorded response body",
    "extra_info.r_update": "+1 when the recorded update gate equals the label, else -1",
    "extra_info.r_exit": "the trajectory's r_exit (0, -0.75, -0.5) or null",
    "extra_info.r_exit_reason": "why r_exit is null: no_evidence, aborted, no_exit_gate",
    "extra_info.r_format": "1 only if every ask of every turn of the trajectory parsed",
    "extra_info.r_outcome": "always null: extraction has no answer-correctness signal",
    "extra_info.t_exit": "the first turn whose exit gate said end, else the last turn",
    "extra_info.t_last_evidence": "the last turn whose chunk is evidence, or null",
    "extra_info.parsed": "the turn's last ask parsed under the strict gate format",
    "extra_info.update_gate": "the recorded update gate (`<check>`), null when unparsed",
    "extra_info.exit_gate": "the recorded exit gate (`<next>end`), null when unparsed",
    "extra_info.attempt": "the final HTTP attempt's number",
    "extra_info.asks": "how many asks the turn took (re-asks after parse failures)",
    "extra_info.request_sha256": "sha256 of the recorded request body",
    "extra_info.response_model": "the model the answer names (the server's)",
    "extra_info.project": "the project",
    "extra_info.query_id": "the standing question's id",
    "extra_info.session": "the transcript session",
    "extra_info.sample": "the sample k of (query, session), from 0",
    "extra_info.level": "L1 (exit gate recorded, not obeyed) or L2 (the loop stops at end)",
    "extra_info.model": "the model the request asked for",
    "extra_info.aborted": "the trajectory was cut short (budget, failed request)",
    "extra_info.exit_gates": "the trajectory's recorded exit gates, in t order",
    "extra_info.other_asks_parsed": "every other ask of the trajectory parsed",
    "extra_info.advantage": "alpha * advantage_traj + (1 - alpha) * advantage_turn, or null",
    "extra_info.advantage_traj": "the trajectory's return normalised in its group, or null",
    "extra_info.advantage_turn": "r_update normalised over the group's turns at t, or null",
}


def type_name(t: pa.DataType) -> str:
    """An arrow type as the card shows it: a struct's fields are rows of their own."""
    if pa.types.is_struct(t):
        return "struct"
    if pa.types.is_list(t):
        return f"list<{type_name(t.value_type)}>"
    return str(t)


def columns(schema: pa.Schema) -> list[tuple[str, str]]:
    """(dotted path, type) of every column and nested field, in schema order; a list
    of structs is described by its struct's fields."""
    out: list[tuple[str, str]] = []

    def walk(prefix: str, t: pa.DataType) -> None:
        out.append((prefix, type_name(t)))
        if pa.types.is_list(t):
            t = t.value_type
        if pa.types.is_struct(t):
            for f in t:
                walk(f"{prefix}.{f.name}", f.type)

    for f in schema:
        walk(f.name, f.type)
    return out


def _column_table(schema: pa.Schema, described: Mapping[str, str] | None) -> list[str]:
    rows = ["| column | type | what |", "|---|---|---|"]
    for path, type_name in columns(schema):
        what = ""
        if described is not None:
            if path not in described:
                raise GrumemError(
                    f"internal error: column {path!r} of the parquet file has no description"
                    " in grumem.corpus.card.COLUMNS"
                )
            what = described[path]
        rows.append(f"| `{path}` | `{type_name}` | {what} |")
    return rows


def card_text(
    summary: CorpusSummary,
    turns_schema: pa.Schema,
    models: Mapping[str, int],
    response_models: Mapping[str, int],
    template: tuple[str, str] | None,
    sessions_schema: pa.Schema | None = None,
    *,
    splits: SplitTable,
) -> str:
    """The card of an export: its summary, the schema its turns.parquet is written with,
    the models (requested; as answered) with their counts, (template name, sha256), and
    its splits."""
    lines = [
        *_header(summary, sessions_schema is not None, splits),
        *_introduction(summary.inputs),
        *_splits(splits, sessions_schema is not None),
        *_turns_columns(turns_schema),
        *_sessions_columns(sessions_schema),
        *_rewards(summary.advantages),
        *_provenance(summary.inputs, models, response_models, template),
        *_count_table(summary),
    ]
    return "\n".join(lines)


def _header(summary: CorpusSummary, with_sessions: bool, splits: SplitTable) -> list[str]:
    """The YAML front matter: the Hub reads the license, tags and each parquet's config."""
    turns = _split_files("turns.parquet", splits, "turns")
    configs: list[dict[str, Any]] = [{"config_name": "turns", "data_files": turns, "default": True}]
    if with_sessions:
        sessions = _split_files("sessions.parquet", splits, "sessions rows")
        configs.append({"config_name": "sessions", "data_files": sessions})
    header = {
        "license": "other",
        "license_name": "unset",
        "pretty_name": f"{summary.inputs.data_source}: GRU-Mem turns from agent transcripts",
        "task_categories": ["reinforcement-learning", "text-generation"],
        "tags": ["grumem", "gru-mem", "memory-agent", "verl", "agent-transcripts"],
        "size_categories": [_size_category(summary.turns)],
        "configs": configs,
    }
    return [
        "---",
        yaml.safe_dump(header, sort_keys=False, allow_unicode=True).rstrip("\n"),
        "---",
        "",
    ]


def _split_files(name: str, splits: SplitTable, rows: str) -> list[dict[str, str]]:
    """A config's data_files by split, as the Hub reads them: the splits with rows
    (`datasets` refuses to load a split of no rows, so an empty split is left out)."""
    return [
        {"split": HUB_SPLITS[s], "path": split_file(name, s)}
        for s in SPLITS
        if splits.counts[s][rows]
    ]


def _splits(splits: SplitTable, with_sessions: bool) -> list[str]:
    """Which split a session is in, the files of each split, and what each holds."""
    names = ["turns.parquet", *(["sessions.parquet"] if with_sessions else [])]
    whats = list(splits.counts[SPLITS[0]])
    rows = [
        f"| `{s}` (`{HUB_SPLITS[s]}`) | "
        + ", ".join(f"`{split_file(n, s)}`" for n in names)
        + " | "
        + " | ".join(str(splits.counts[s][w]) for w in whats)
        + " |"
        for s in SPLITS
    ]
    return [
        "## Splits",
        "",
        "Every session is in one split, and all its rows with it (`extra_info.split`): its",
        'split is drawn from sha256 of `"{seed}:{session}"`, so adding sessions moves no other',
        f"({splits.description}). {' and '.join(f'`{n}`' for n in names)} hold every",
        "row; each split's rows are also a file of their own, the files the trainer reads",
        "(`grumem verl-config` names train and val) and the Hub's configs name (but for",
        "a split of no rows, which `datasets` would refuse to load).",
        "",
        "| split (Hub) | files | " + " | ".join(whats) + " |",
        "|---|---|" + "---|" * len(whats),
        *rows,
        "",
    ]


def _introduction(inputs: Inputs) -> list[str]:
    """The title, the license warning, how to load it, and what a row is."""
    return [
        f"# {inputs.data_source}: GRU-Mem turns from agent transcripts",
        "",
        "GRU-Mem gated-memory turns (arXiv 2602.10560) exported by grumem from recorded",
        "agent-transcript rollouts. **License: unset.** Set `license` in the header above to",
        "the license of the transcripts before sharing this dataset.",
        "",
        "```python",
        "import datasets",
        'turns = datasets.load_dataset("path/to/corpus", "turns")  # this directory',
        "```",
        "",
        "## What a row is",
        "",
        "One row of `turns.parquet` is one turn t of one trajectory (a project, a standing",
        "question, a transcript session, a sample k): the model read chunk t of the session",
        "with its memory from turn t-1 and answered `<think>`, `<check>yes|no</check>` (the",
        "update gate), `<update>` (the new memory) and `<next>continue|end</next>` (the exit",
        "gate). `prompt` holds the exact recorded request messages, `extra_info.response` the",
        "exact recorded answer. The same trajectories, one JSON line each with all their",
        "turns, are in `trajectories.jsonl`; `summary.json` holds the counts below.",
        "",
    ]


def _turns_columns(turns_schema: pa.Schema) -> list[str]:
    return [
        "## Columns of turns.parquet",
        "",
        *_column_table(turns_schema, COLUMNS),
        "",
    ]


def _sessions_columns(sessions_schema: pa.Schema | None) -> list[str]:
    if sessions_schema is None:
        return []
    return [
        "## Columns of sessions.parquet",
        "",
        "One row per (query, session): what the online GRU-Mem loop is trained from.",
        "",
        *_column_table(sessions_schema, None),
        "",
    ]


def _rewards(adv: Advantages) -> list[str]:
    """The reward rules, with the export's alpha and return weights filled in."""
    weights = adv.return_weights
    return [
        "## Rewards and advantages",
        "",
        "- `r_update` per turn: +1 when the recorded update gate equals the chunk's evidence",
        "  label, -1 otherwise (an unparsed turn has no gate and gets -1).",
        "- `r_exit` per trajectory, from the recorded exit gates: t_exit is the first turn",
        "  whose exit gate said `end`, else the last turn; 0 when t_exit is the last evidence",
        "  turn (on time), -0.75 before it (early), -0.5 after it (late); null, with",
        "  `r_exit_reason`, without evidence (`no_evidence`), when the run was cut short",
        "  before a recorded `end` (`aborted`), or when no turn parsed (`no_exit_gate`).",
        "- `r_format` per trajectory: 1 only if every ask of every turn parsed.",
        "- `r_outcome`: always null (no answer-correctness signal).",
        "- advantages (paper Eq. 12-13):",
        f"  `advantage` = {adv.alpha}·`advantage_traj` +"
        f" {round(1 - adv.alpha, 12)}·`advantage_turn`.",
        "  `advantage_traj` is the trajectory's return",
        f"  R = {weights.r_update}·mean(r_update) + {weights.r_exit}·r_exit +"
        f" {weights.r_format}·r_format",
        "  (r_exit only when it is a value) normalised over the samples of one (project,",
        "  query, session): (R - mean) / (std + 1e-6); `advantage_turn` normalises r_update",
        "  over the group's turns at the same t. Null, never 0, for a group of one sample",
        "  or without variance.",
        "",
    ]


def _provenance(
    inputs: Inputs,
    models: Mapping[str, int],
    response_models: Mapping[str, int],
    template: tuple[str, str] | None,
) -> list[str]:
    """What the corpus was made from: models, template, labels, κ and the log's sha256."""
    return [
        "## Provenance",
        "",
        f"- model asked: {_counts(models, 'trajectories')}",
        f"- model that answered: {_counts(response_models, 'turns')}",
        f"- template: {_template(template)}",
        f"- evidence labels: `{_name(inputs.labels)}`, sha256 `{inputs.labels_sha256}`",
        f"- κ (Cohen's kappa of the labels against a person's calibration):"
        f" {inputs.kappa:.4f} over n = {inputs.kappa_n} pairs"
        f" (export.min_kappa {inputs.min_kappa})",
        f"- turn log: sha256 `{inputs.log_sha256}`",
        f"- t_last_evidence over: {inputs.t_last_evidence_over}",
        "",
    ]


def _count_table(summary: CorpusSummary) -> list[str]:
    """The summary's counts as a table, then t_last_evidence's histogram."""
    s = summary
    exits, aborted = s.r_exit, s.aborted
    return [
        "## Counts",
        "",
        "| what | count |",
        "|---|---|",
        f"| trajectories (exported / in the log) | {s.trajectories} / {s.trajectories_in_log} |",
        f"| levels L1 / L2 | {s.levels.L1} / {s.levels.L2} |",
        f"| turns | {s.turns} |",
        f"| r_update +1 / -1 | {s.r_update.positive} / {s.r_update.negative} |",
        f"| r_format pass / fail | {s.r_format.pass_} / {s.r_format.fail} |",
        f"| r_exit on time / early / late | {exits.on_time} / {exits.early} / {exits.late} |",
        "| r_exit null: no evidence / aborted / no exit gate | "
        f"{exits.no_evidence} / {exits.aborted} / {exits.no_exit_gate} |",
        f"| parsed / unparsed turns | {s.parsed.turns} / {s.parsed.unparsed} |",
        f"| re-asked turns (asks) | {s.reasks.turns} ({s.reasks.asks}) |",
        f"| aborted trajectories (budget / request failed) | {aborted.trajectories}"
        f" ({aborted.by_reason.budget} / {aborted.by_reason.request_failed}) |",
        f"| turns with / without an advantage | {s.advantages.turns_with_advantage} /"
        f" {s.advantages.turns_without_advantage} |",
        "",
        "t_last_evidence (trajectories per turn): "
        + (", ".join(f"{t}: {n}" for t, n in s.t_last_evidence.items()) or "none")
        + f"; no evidence: {s.no_evidence}.",
        "",
    ]


def _size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if n < limit:
            return name
    return "100K<n<1M" if n < 1_000_000 else "n>1M"


def _counts(counts: Mapping[str, int], what: str) -> str:
    if not counts:
        return "none recorded"
    return ", ".join(f"`{m}` ({n} {what})" for m, n in sorted(counts.items()))


def _template(template: tuple[str, str] | None) -> str:
    if template is None:
        return "not given to the export (`grumem export --template`)"
    name, sha = template
    return f"`{name}`, sha256 `{sha}` (the prompts are the recorded requests, not re-rendered)"


def _name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]
