"""The export's dataset card (grumem.corpus.card, corpus/README.md): Hugging Face's
convention, checked against the corpus it describes, and loaded by `datasets` itself
(in .venv-verl, which has it) through the card's configs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from grumem.corpus.card import CARD, SplitTable, card_text
from grumem.corpus.turn_rows import PARQUET_SCHEMA
from grumem.errors import GrumemError
from grumem.io.jsonl import sha256_file
from grumem.io.template_files import GRU_MEM_TEMPLATE
from grumem.records.summary import CorpusSummary
from grumem.stages.export import SESSIONS, SUMMARY, TURNS, export
from support.export import FILES, FIXTURE, calibrate, inputs
from support.verl_venv import VERL_PYTHON

CHECK = Path(__file__).parents[1] / "support" / "card_check.py"
SPLITS = SplitTable(
    "train 0.8 / val 0.1 / test 0.1, seed 0",
    {
        s: {"sessions": n, "turns": 2 * n, "sessions rows": n}
        for s, n in (("train", 3), ("val", 1), ("test", 0))
    },
)
# the fixture's sessions under the default split: s-beta train, s-alpha and s-gamma test
FIXTURE_SPLITS = ("train", "test")


def by_split(name: str, splits: tuple[str, ...] = FIXTURE_SPLITS) -> list[dict[str, str]]:
    """A config's data_files as the Hub reads them: each split with rows its own file."""
    hub = {"train": "train", "val": "validation", "test": "test"}
    return [{"split": hub[s], "path": f"{name}-{s}.parquet"} for s in splits]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """The export fixture's corpus (fixtures/export/), with the template named."""
    for name in FILES:
        shutil.copy(FIXTURE / name, tmp_path / name)
    calibrate(tmp_path)
    export(inputs(tmp_path, template=str(GRU_MEM_TEMPLATE)))
    return tmp_path / "corpus"


def header_and_body(card: str) -> tuple[dict[str, Any], str]:
    m = re.fullmatch(r"---\n(.*?)\n---\n(.*)", card, re.S)
    assert m, card[:200]
    return yaml.safe_load(m.group(1)), m.group(2)


def card_columns(body: str, heading: str) -> list[tuple[str, str]]:
    """(column, type) rows of the table under `heading`."""
    section = body.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", section, re.M)


def schema_columns(schema: pa.Schema) -> list[tuple[str, str]]:
    """Every column and nested field of a parquet schema, walked here, not by the card."""
    out = []

    def walk(path: str, t: pa.DataType) -> str:
        if isinstance(t, pa.ListType):
            inner = t.value_type
            out.append((path, "list<…>"))
            name = walk_fields(path, inner) if isinstance(inner, pa.StructType) else str(inner)
            out[out.index((path, "list<…>"))] = (path, f"list<{name}>")
            return "list"
        if isinstance(t, pa.StructType):
            out.append((path, "struct"))
            walk_fields(path, t)
            return "struct"
        out.append((path, str(t)))
        return str(t)

    def walk_fields(path: str, t: pa.StructType) -> str:
        for i in range(t.num_fields):
            walk(f"{path}.{t.field(i).name}", t.field(i).type)
        return "struct"

    for f in schema:
        walk(f.name, f.type)
    return out


def test_the_cards_columns_are_the_parquet_files(corpus: Path) -> None:
    header, body = header_and_body((corpus / CARD).read_text(encoding="utf-8"))
    schema = pq.read_schema(corpus / TURNS)
    listed = card_columns(body, "Columns of turns.parquet")
    assert listed == schema_columns(schema)
    assert len(listed) == 42 and ("extra_info.advantage_turn", "double") in listed
    assert ("prompt", "list<struct>") in listed and ("prompt.content", "string") in listed


@pytest.fixture
def corpus_with_sessions(tmp_path: Path) -> Path:
    """The export fixture's corpus with its sessions.parquet (queries and chunks given)."""
    for name in FILES:
        shutil.copy(FIXTURE / name, tmp_path / name)
    calibrate(tmp_path)
    export(
        inputs(
            tmp_path,
            template=str(GRU_MEM_TEMPLATE),
            chunks=(str(tmp_path / "chunks.jsonl"),),
            queries=str(FIXTURE / "queries.yaml"),
            project="demo",
        )
    )
    return tmp_path / "corpus"


def test_the_cards_sessions_columns_are_the_sessions_files(corpus_with_sessions: Path) -> None:
    header, body = header_and_body((corpus_with_sessions / CARD).read_text(encoding="utf-8"))
    assert header["configs"] == [
        {"config_name": "turns", "data_files": by_split("turns"), "default": True},
        {"config_name": "sessions", "data_files": by_split("sessions")},
    ]
    listed = card_columns(body, "Columns of sessions.parquet")
    assert listed == schema_columns(pq.read_schema(corpus_with_sessions / SESSIONS))
    assert ("extra_info.chunks", "list<struct>") in listed
    assert ("extra_info.chunks.text", "string") in listed
    assert ("reward_model.ground_truth", "list<string>") in listed
    # turns.parquet's table is the same as without sessions
    turns = card_columns(body, "Columns of turns.parquet")
    assert turns == schema_columns(pq.read_schema(corpus_with_sessions / TURNS))


def test_the_header_follows_the_hubs_convention(corpus: Path) -> None:
    header, body = header_and_body((corpus / CARD).read_text(encoding="utf-8"))
    assert header["license"] == "other" and "unset" in header["license_name"]
    assert "License: unset" in body
    assert header["task_categories"] == ["reinforcement-learning", "text-generation"]
    assert header["configs"] == [
        {"config_name": "turns", "data_files": by_split("turns"), "default": True}
    ]  # no sessions.parquet in this export: not named
    assert header["size_categories"] == ["n<1K"]


def test_the_card_says_what_the_export_holds(corpus: Path) -> None:
    card = (corpus / CARD).read_text(encoding="utf-8")
    summary = CorpusSummary.decode((corpus / SUMMARY).read_bytes())
    kappa = json.loads((corpus.parent / "kappa.json").read_text(encoding="utf-8"))
    assert f"{kappa['kappa']:.4f} over n = {kappa['n']} pairs" in card
    assert f"`gru-mem.txt`, sha256 `{sha256_file(GRU_MEM_TEMPLATE)}`" in card
    assert "model asked: `SmolLM2-135M-Instruct` (5 trajectories)" in card
    # the fixture's log predates the field naming the answering model
    assert f"model that answered: `(not recorded)` ({summary.turns} turns)" in card
    # the fixture's README hand count
    for row in (
        "| trajectories (exported / in the log) | 5 / 6 |",
        "| turns | 24 |",
        "| r_update +1 / -1 | 19 / 5 |",
        "| r_format pass / fail | 4 / 1 |",
        "| r_exit on time / early / late | 1 / 1 / 1 |",
        "| r_exit null: no evidence / aborted / no exit gate | 1 / 1 / 0 |",
        "| parsed / unparsed turns | 23 / 1 |",
        "| aborted trajectories (budget / request failed) | 2 (1 / 1) |",
    ):
        assert row in card
    assert "t_last_evidence (trajectories per turn): 1: 1, 2: 1, 5: 2; no evidence: 1." in card
    assert "`advantage` = 0.9·`advantage_traj` + 0.1·`advantage_turn`" in card
    assert str(corpus.parent) not in card  # file names and digests, no paths of this machine


def test_a_sessions_file_gets_a_config_and_its_columns(corpus: Path) -> None:
    summary = CorpusSummary.decode((corpus / SUMMARY).read_bytes())
    sessions = pa.schema([("query_id", pa.string()), ("chunks", pa.list_(pa.string()))])
    card = card_text(summary, PARQUET_SCHEMA, {"m": 1}, {"m": 2}, None, sessions, splits=SPLITS)
    header, body = header_and_body(card)
    # SPLITS has no test rows: a split of no rows is not named (datasets refuses one)
    assert header["configs"] == [
        {
            "config_name": "turns",
            "data_files": by_split("turns", ("train", "val")),
            "default": True,
        },
        {"config_name": "sessions", "data_files": by_split("sessions", ("train", "val"))},
    ]
    assert card_columns(body, "Columns of sessions.parquet") == [
        ("query_id", "string"),
        ("chunks", "list<string>"),
    ]
    assert "template: not given to the export" in body


def test_an_undescribed_column_is_an_error(corpus: Path) -> None:
    summary = CorpusSummary.decode((corpus / SUMMARY).read_bytes())
    wider = PARQUET_SCHEMA.append(pa.field("new_column", pa.string()))
    with pytest.raises(GrumemError, match="column 'new_column' .* has no description"):
        card_text(summary, wider, {}, {}, None, splits=SPLITS)


@pytest.mark.verl
def test_datasets_loads_the_corpus_directory(corpus_with_sessions: Path, tmp_path: Path) -> None:
    """What a `datasets` user and the Hub do with the directory: its card's configs."""
    assert VERL_PYTHON.exists(), (
        f"{VERL_PYTHON} does not exist: this test loads the corpus with Hugging Face's"
        " `datasets`, which .venv-verl has; make it with `make venv-verl`"
    )
    # sessions.parquet beside turns.parquet, and the card naming it: the two configs
    # load apart (without configs, `datasets` would read both files as one table)
    corpus = corpus_with_sessions
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    env["HF_HOME"] = str(tmp_path / "hf")  # its caches under the test's directory
    proc = subprocess.run(
        [str(VERL_PYTHON), str(CHECK), str(corpus), "turns", "sessions"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.splitlines()[-1])
    turns = pq.read_table(corpus / TURNS)
    assert seen["default"] == seen["turns"]
    # each split its own file; val has no rows, and is not named
    assert {s: d["rows"] for s, d in seen["turns"].items()} == {"train": 16, "test": 8}
    assert seen["turns"]["train"]["columns"] == turns.column_names
    assert turns.num_rows == 24
    sessions = pq.read_table(corpus / SESSIONS)
    assert {s: d["rows"] for s, d in seen["sessions"].items()} == {"train": 2, "test": 4}
    assert seen["sessions"]["test"]["columns"] == sessions.column_names


def test_the_card_counts_each_split(corpus_with_sessions: Path) -> None:
    """The fixture's hand count by split: s-beta (7 chunks) is train, with 3 trajectories
    of 16 turns; s-alpha and s-gamma are test, 2 trajectories of 8 turns; 2 queries a
    session make the sessions rows."""
    card = (corpus_with_sessions / CARD).read_text(encoding="utf-8")
    _, body = header_and_body(card)
    section = body.split("## Splits\n", 1)[1].split("\n## ", 1)[0]
    assert "(train 0.8 / val 0.1 / test 0.1, seed 0)" in " ".join(section.split())
    assert re.findall(r"^\| `.*$", section, re.M) == [
        "| `train` (`train`) | `turns-train.parquet`, `sessions-train.parquet` | 1 | 3 | 16 | 2 |",
        "| `val` (`validation`) | `turns-val.parquet`, `sessions-val.parquet` | 0 | 0 | 0 | 0 |",
        "| `test` (`test`) | `turns-test.parquet`, `sessions-test.parquet` | 2 | 2 | 8 | 4 |",
    ]
