"""Stage `log`: a shard's prompts, responses and gates joined into one line per turn,
the boundary the export reads: the turn's last ask, the asks before it, and the
memory chain the gates recomputed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grumem.core.json_text import dumps, sha256_text
from grumem.core.loop import user_message
from grumem.errors import RecordError
from grumem.io.jsonl import write_jsonl
from grumem.io.template_files import load_prompt_builder
from grumem.io.typed import write_records
from grumem.llm.attempt import Outcome, attempt_record
from grumem.records.gate import GateRecord
from grumem.records.prompt import PromptRecord
from grumem.stages.gates import regate
from grumem.stages.log import join
from grumem.stages.prompts import plan

ANSWERS = {
    (1, 0): "<think>prose</think> no tags",  # t=1 is asked again after this failure
    (1, 1): "<think>a</think><check>yes</check><update>M1</update><next>continue</next>",
    (2, 0): "<think>b</think><check>no</check><update>M1</update><next>end</next>",
}


def recorded_shard(tmp_path: Path) -> tuple[Path, Path, Path]:
    """One trajectory of two turns, recorded as the loop records it, then re-gated."""
    chunks = tmp_path / "s.jsonl"
    lines = [
        {"session": "s", "index": i, "records": [{"role": "user", "text": f"chunk {i}"}]}
        for i in range(2)
    ]
    chunks.write_text("".join(json.dumps(c) + "\n" for c in lines), encoding="utf-8")
    queries = [{"id": "q", "question": "What?"}]
    prompts = list(plan("p", [str(chunks)], queries, load_prompt_builder(), 1))
    memory, responses = None, []
    for (t, ask), content in ANSWERS.items():
        p = prompts[t - 1]
        body = dumps(
            {
                "model": "m",
                "messages": [
                    {"role": "user", "content": user_message(PromptRecord.convert(p), memory)}
                ],
            }
        )
        answer = {"choices": [{"message": {"content": content}, "finish_reason": "stop"}]}
        attempt = attempt_record(
            1, Outcome(200, json.dumps(answer).encode(), None), 0.1, None, "http://127.0.0.1:9/v1"
        )
        responses.append(
            {
                "kind": "exchange",
                "trajectory_id": p.trajectory_id,
                "t": t,
                "ask": ask,
                "chunk_sha": p.chunk_sha,
                "memory_before": memory,
                "request": {"body": body, "sha256": sha256_text(body)},
                "response": attempt,
                "attempts": [attempt],
                "response_model": "m",
            }
        )
        if (t, ask) == (1, 1):
            memory = "M1"
    paths = tmp_path / "prompts.jsonl", tmp_path / "responses.jsonl", tmp_path / "gates.jsonl"
    write_records(paths[0], prompts, PromptRecord)
    write_jsonl(paths[1], responses, "response")
    write_records(paths[2], regate(paths[0], paths[1]), GateRecord)
    return paths


def test_one_line_per_turn_with_its_earlier_asks_and_the_memory_chain(tmp_path: Path) -> None:
    shard = [tuple(map(str, recorded_shard(tmp_path)))]
    lines = list(join(shard, "L1", "m"))
    write_jsonl(tmp_path / "log.jsonl", [x.to_dict() for x in lines], "log")  # the schema holds
    assert [(x.t, x.asks, x.status) for x in lines] == [(1, 2, "ok"), (2, 1, "ok")]
    first, second = lines
    assert [a.ask for a in first.earlier_asks] == [0]
    assert first.earlier_asks[0].parsed is False
    assert (first.parsed, first.update_gate, first.memory_after) == (True, True, "M1")
    assert (second.memory_before, second.update_gate, second.exit_gate) == ("M1", False, True)
    assert second.memory_after == "M1"  # U=false keeps M_{t-1}


def test_a_missing_gate_record_is_an_error_naming_the_gates_file(tmp_path: Path) -> None:
    prompts, responses, gates = recorded_shard(tmp_path)
    kept = gates.read_text(encoding="utf-8").splitlines(keepends=True)[:-1]
    gates.write_text("".join(kept), encoding="utf-8")
    with pytest.raises(RecordError, match="no gate record for .* t=2 ask=0") as e:
        list(join([(str(prompts), str(responses), str(gates))], "L1", "m"))
    assert e.value.path == str(gates)
