"""The corpus's integrity through the real `snakemake` command against the fake server:
a refused export leaves its inputs alone, an over-long candidate is a format
failure of its turn, and re-asks count against r_format."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import yaml

from support.workflow import REPO, read_lines, snakemake, write_config

FAKE_DEMO = REPO / "fixtures" / "fake" / "demo.yaml"
LOG = "results/demo/log.jsonl"
CORPUS = "results/demo/corpus"


def fake_demo_script(*rules: dict) -> dict:
    """The demo script with `rules` tried before its own."""
    script = yaml.safe_load(FAKE_DEMO.read_text(encoding="utf-8"))
    return {**script, "replies": [*rules, *script["replies"]]}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def gate_answer(check: str, update: str, nxt: str = "continue") -> str:
    return (
        f"<think>scripted</think>\n<check>{check}</check>\n<update>{update}</update>\n"
        f"<next>{nxt}</next>"
    )


def test_refused_export_leaves_its_inputs_alone(tmp_path, fake_server) -> None:
    """The user's path. A κ threshold the labels do not meet refuses the
    export; log.jsonl (and every other input) keeps its bytes, and once the
    setting is corrected a plain rerun builds the corpus, without --forcerun."""
    server = fake_server(FAKE_DEMO)
    write_config(tmp_path, server.base_url)
    snakemake(tmp_path, LOG, "results/demo/kappa.json")
    inputs = [tmp_path / LOG, tmp_path / "results/demo/kappa.json"]
    kappa = json.loads(inputs[1].read_text(encoding="utf-8"))["kappa"]
    assert kappa < 1
    before = {p: sha256(p) for p in inputs}

    write_config(tmp_path, server.base_url, export={"min_kappa": 1.0})
    proc = snakemake(tmp_path, "all", check=False)
    assert proc.returncode != 0
    err = (tmp_path / "logs/export/demo.log").read_text(encoding="utf-8")
    assert "below export.min_kappa 1.0" in err
    assert {p: sha256(p) for p in inputs} == before
    assert all(json.loads(line) for line in inputs[0].read_text(encoding="utf-8").splitlines())

    write_config(tmp_path, server.base_url)
    snakemake(tmp_path, "all")
    summary = json.loads((tmp_path / CORPUS / "summary.json").read_text(encoding="utf-8"))
    assert summary["inputs"]["log_sha256"] == before[inputs[0]]
    assert {p: sha256(p) for p in inputs} == before


def test_over_long_candidate_is_a_format_failure_of_its_turn(tmp_path, fake_server) -> None:
    """At t=2 of 5 the model writes a candidate over budget.memory. The turn
    is unparsed (tag update, the budget and the count in the reason), the memory
    stays M_1, t=3's request carries M_1, and all 5 turns run; the gates stage
    re-applies the rule (it recomputes the memory chain and would fail otherwise)."""
    long_memory = " ".join(f"fact{i}" for i in range(400))  # ~800 tokens
    server = fake_server(
        {
            "replies": [
                {"match": "CHUNK-TWO", "content": gate_answer("yes", long_memory)},
                {"match": "<section>", "gate": {"check_if": "KEEP"}},
            ]
        }
    )
    chunks = tmp_path / "chunks"
    chunks.mkdir()
    texts = ["KEEP the port is 8080", "CHUNK-TWO", "three", "KEEP four", "five"]
    lines = [
        {"session": "s", "index": i, "records": [{"role": "user", "text": t}]}
        for i, t in enumerate(texts)
    ]
    (chunks / "s.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (tmp_path / "q.yaml").write_text(
        yaml.safe_dump({"queries": [{"id": "q", "question": "Which port?"}]})
    )
    project = {"chunks": str(chunks / "*.jsonl"), "queries": str(tmp_path / "q.yaml")}
    write_config(tmp_path, server.base_url, projects={"p": project}, budget={"memory": 300})
    snakemake(tmp_path, "results/p/log.jsonl")
    log = read_lines(tmp_path / "results/p/log.jsonl")
    assert [(x["t"], x["status"]) for x in log] == [(t, "ok") for t in range(1, 6)]
    assert server.stats()["answered"] == 5
    m1 = log[0]["memory_after"]
    assert m1 == "- [User] KEEP the port is 8080"
    t2 = log[1]
    assert t2["parsed"] is False and t2["update_gate"] is None and t2["candidate"] is None
    assert t2["parse_error"]["tag"] == "update"
    reason = t2["parse_error"]["reason"]
    assert "budget.memory 300" in reason and "tokens" in reason
    tokens = int(reason.split("candidate memory is ")[1].split(" tokens")[0])
    assert tokens > 300
    assert t2["content"] == gate_answer("yes", long_memory)  # the answer is kept as recorded
    assert t2["memory_after"] == m1
    assert log[2]["memory_before"] == m1
    user = json.loads(log[2]["request"]["body"])["messages"][-1]["content"]
    assert f"<memory> {m1} </memory>" in user
    assert log[3]["memory_after"] == m1 + "\n- [User] KEEP four"


def test_reasks_count_against_r_format(tmp_path, fake_server) -> None:
    """With loop.parse_retries 1, one turn's first answer is malformed and
    its re-ask parses. The failed ask stays in the log and in the corpus under
    its turn, r_format is 0, and the summary counts the re-ask."""
    question = "Which errors did the agent hit"
    chunk = "npm install fails since I bumped react"
    malformed = "Sure! The section shows an npm error. <check>yes</check>"
    server = fake_server(
        fake_demo_script(
            {
                "match": f"(?s)<problem> {question}.*{chunk}",
                "sequence": [malformed, gate_answer("yes", "npm ERESOLVE after react 18.3")],
            }
        )
    )
    write_config(tmp_path, server.base_url, loop={"parse_retries": 1})
    snakemake(tmp_path, "all")
    log = read_lines(tmp_path / LOG)
    reasked = [x for x in log if x["asks"] > 1]
    assert len(reasked) == 1
    turn = reasked[0]
    assert turn["asks"] == 2 and turn["parsed"] is True
    [first] = turn["earlier_asks"]
    assert first["ask"] == 0 and first["parsed"] is False and first["content"] == malformed
    assert first["request"]["sha256"] != turn["request"]["sha256"]  # a distinct request (seed)

    trajectories = read_lines(tmp_path / CORPUS / "trajectories.jsonl")
    traj = next(t for t in trajectories if t["trajectory_id"] == turn["trajectory_id"])
    corpus_turn = next(x for x in traj["turns"] if x["t"] == turn["t"])
    assert corpus_turn["parsed"] is True
    assert [(a["ask"], a["response"], a["parsed"]) for a in corpus_turn["earlier_asks"]] == [
        (0, malformed, False)
    ]
    assert all(x["parsed"] for x in traj["turns"])  # every last ask parsed, yet:
    assert traj["r_format"] == 0
    others = [t for t in trajectories if t is not traj]
    assert {t["r_format"] for t in others} == {1}
    summary = json.loads((tmp_path / CORPUS / "summary.json").read_text(encoding="utf-8"))
    assert summary["reasks"] == {"turns": 1, "asks": 1}
    assert summary["r_format"]["fail"] == 1
    # verl's reward function sees the failed ask too: no answer to any turn of
    # this trajectory earns r_format, as in the corpus
    import pyarrow.parquet as pq

    from grumem.verl.reward import compute_score

    rows = pq.read_table(tmp_path / CORPUS / "turns.parquet").to_pylist()
    mine = [r for r in rows if r["extra_info"]["trajectory_id"] == turn["trajectory_id"]]
    assert {r["extra_info"]["other_asks_parsed"] for r in mine} == {False}
    for r in mine:
        e = r["extra_info"]
        score = compute_score(r["data_source"], e["response"], r["reward_model"]["ground_truth"], e)
        assert (score["parsed"], score["r_format"]) == (True, 0)
