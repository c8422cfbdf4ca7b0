"""The workflow through the real `snakemake` command, against real servers on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.workflow import (
    DEMO,
    FAKE_DEMO,
    LOG,
    PINNED_DEMO_CORPUS,
    REPO,
    corpus_bytes,
    corpus_digests,
    demo_project,
    env,
    fake_demo_script,
    files_under,
    read_lines,
    snakemake,
    write_config,
    write_queries,
    write_session,
)


def without_timings(lines: list[dict]) -> list[dict]:
    for line in lines:
        if line["response"] is not None:
            line["response"] = {k: v for k, v in line["response"].items() if k != "latency_s"}
    return lines


def test_dry_run_lists_rules_and_job_counts(tmp_path) -> None:
    write_config(tmp_path, "http://127.0.0.1:9/v1")
    out = snakemake(tmp_path, "-n", "all").stdout
    table = out.split("Job stats:")[1].split("\n\n")[0].splitlines()[3:]
    counts = dict(line.split() for line in table)
    # 5 demo sessions in shards of 3: two shards, and one session index
    assert counts == {
        "sessions": "1",
        "prompts": "2",
        "responses": "2",
        "gates": "2",
        "log": "1",
        "kappa": "1",
        "export_project": "1",
        "report_plots": "1",
        "report_viewer": "1",
        "all": "1",
        "total": "13",
    }
    # the card's `snakemake export`: every project's corpus, without the plots
    out = snakemake(tmp_path, "-n", "export").stdout
    table = out.split("Job stats:")[1].split("\n\n")[0].splitlines()[3:]
    counts = dict(line.split() for line in table)
    assert counts["export_project"] == "1" and counts["export"] == "1"
    assert "report_plots" not in counts and counts["total"] == "11"


def test_rulegraph_follows_the_data_flow(tmp_path) -> None:
    write_config(tmp_path, "http://127.0.0.1:9/v1")
    graph = snakemake(tmp_path, "--rulegraph", "mermaid-js", "all").stdout
    ids = {}
    for line in graph.splitlines():
        line = line.strip()
        if "[" in line and "]" in line and "-->" not in line:
            ids[line.split("[")[0].strip()] = line.split("[")[1].split("]")[0].strip("'\"")
    edges = {
        (ids[a.strip()], ids[b.strip()])
        for a, b in (ln.strip().split("-->") for ln in graph.splitlines() if "-->" in ln)
    }
    for edge in [
        ("prompts", "responses"),
        ("responses", "gates"),
        ("gates", "log"),
        ("prompts", "gates"),
        ("log", "export_project"),
        ("kappa", "export_project"),
        ("export_project", "all"),
    ]:
        assert edge in edges, (edge, edges)


def test_demo_end_to_end_with_fake_server(tmp_path, fake_server) -> None:
    server = fake_server(FAKE_DEMO)
    # shards named by position (s000, s001, ...): the test reads them by name
    write_config(tmp_path, server.base_url, shard_rule="sorted")
    snakemake(tmp_path, "results/demo/log.jsonl")
    log = read_lines(tmp_path / LOG)
    # 36 chunks x 2 questions, L1: every turn is sent
    assert len(log) == 72
    assert server.stats()["answered"] == 72
    assert all(line["status"] == "ok" and line["parsed"] for line in log)
    # the recorded request is the bytes sent, the prompt holds the memory of t-1
    for prev, line in zip(log, log[1:], strict=False):
        body = json.loads(line["request"]["body"])
        if prev["trajectory_id"] == line["trajectory_id"]:
            assert line["memory_before"] == prev["memory_after"]
            shown = prev["memory_after"] or "No previous memory"
            assert f"<memory> {shown} </memory>" in body["messages"][-1]["content"]
    assert any(line["update_gate"] for line in log) and not all(line["update_gate"] for line in log)
    progress = (tmp_path / "logs/responses/demo/s000.log").read_text()
    assert "turns 30/30 (100%), parse rate 1.00" in progress


def test_levels_l1_and_l2_differ_only_in_obeying_the_exit_gate(tmp_path, fake_server) -> None:
    server = fake_server(
        {"replies": [{"match": "<section>", "gate": {"check_if": "error", "next_if": "SIGNOFF"}}]}
    )
    chunks = tmp_path / "chunks"
    chunks.mkdir()
    write_session(chunks / "s.jsonl", "s", ["an error", "fixed it. SIGNOFF", "more", "error again"])
    write_queries(tmp_path / "q.yaml")
    project = {"chunks": str(chunks / "*.jsonl"), "queries": str(tmp_path / "q.yaml")}
    runs = {}
    for level in ("L1", "L2"):
        work = tmp_path / level
        work.mkdir()
        server.reset()
        write_config(work, server.base_url, projects={"p": project}, loop={"level": level})
        snakemake(work, "results/p/log.jsonl")
        runs[level] = (read_lines(work / "results/p/log.jsonl"), server.stats()["requests"])
    (l1, sent1), (l2, sent2) = runs["L1"], runs["L2"]
    assert [x["t"] for x in l2] == [1, 2] and sent2 == 2  # no t=3 request at L2
    assert [x["t"] for x in l1] == [1, 2, 3, 4] and sent1 == 4
    assert l1[1]["exit_gate"] is True and l2[1]["exit_gate"] is True
    assert [x.pop("level") for x in l1[:2] + l2[:2]] == ["L1", "L1", "L2", "L2"]
    assert without_timings(l1[:2]) == without_timings(l2[:2])


def test_kill_during_responses_then_rerun_sends_nothing_twice(tmp_path, fake_server) -> None:
    server = fake_server(fake_demo_script(latency_s=0.15))
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    for work in (killed, clean):
        work.mkdir()
        write_config(work, server.base_url, llm={"concurrency": 2})
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(killed),
        "--cores",
        "2",
        LOG,
    ]
    proc = subprocess.Popen(
        cmd, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    cache = killed / "results/cache/llm"
    deadline = time.monotonic() + 60
    while len(list(cache.rglob("*.json"))) < 12:
        assert time.monotonic() < deadline and proc.poll() is None, "run ended before the kill"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    answered = {p.stem for p in cache.rglob("*.json")}
    assert 12 <= len(answered) < 72
    assert not (killed / "results/demo/responses/s000.jsonl").exists()  # nothing half-written
    server.reset()
    snakemake(killed, "--unlock")
    snakemake(killed, "--rerun-incomplete", LOG)
    resent = set(server.stats()["by_sha"]) & answered
    assert resent == set(), f"{len(resent)} answered requests were sent again"
    assert server.stats()["requests"] == 72 - len(answered)
    snakemake(clean, LOG)
    assert without_timings(read_lines(killed / LOG)) == without_timings(read_lines(clean / LOG))


def test_replay_without_server_reproduces_the_log(tmp_path, fake_server) -> None:
    server = fake_server(FAKE_DEMO)
    write_config(tmp_path, server.base_url)
    snakemake(tmp_path, LOG)
    live = (tmp_path / LOG).read_bytes()
    server.stop()
    for sub in ("prompts", "responses", "gates"):
        for f in (tmp_path / "results/demo" / sub).iterdir():
            f.unlink()
    (tmp_path / LOG).unlink()
    write_config(tmp_path, server.base_url, llm={"mode": "replay"})
    snakemake(tmp_path, LOG)
    assert (tmp_path / LOG).read_bytes() == live


def test_replay_miss_fails_naming_the_request(tmp_path) -> None:
    # shards named by position (s000, s001, ...): the test reads them by name
    write_config(tmp_path, None, llm={"mode": "replay"}, shard_rule="sorted")
    # --keep-going: s000's job runs even when s001's fails first (a loaded machine)
    proc = snakemake(tmp_path, LOG, "--keep-going", check=False)
    assert proc.returncode != 0
    text = (tmp_path / "logs/responses/demo/s000.log").read_text()
    assert "replay" in text and "demo/errors-and-fixes/demo-01-k8s-namespace/0 t=1" in text


def test_corrupted_response_record_fails_gates_naming_file_and_line(tmp_path, fake_server) -> None:
    server = fake_server(FAKE_DEMO)
    # shards named by position (s000, s001, ...): the test reads them by name
    write_config(tmp_path, server.base_url, shard_rule="sorted")
    snakemake(tmp_path, LOG)
    responses = tmp_path / "results/demo/responses/s001.jsonl"
    lines = responses.read_text(encoding="utf-8").splitlines(keepends=True)
    # change one byte inside the recorded answer of line 5
    head, sep, tail = lines[4].partition('"response":')
    lines[4] = head + sep + tail.replace("<check>", "<chesk>", 1)
    responses.write_text("".join(lines), encoding="utf-8")
    proc = snakemake(tmp_path, "--forcerun", "gates", LOG, check=False)
    assert proc.returncode != 0
    text = (tmp_path / "logs/gates/demo/s001.log").read_text()
    assert "responses/s001.jsonl:5:" in text and "response.sha256" in text


MALFORMED = {
    "bad-json": b'{"session": "a", "index": 0, "records": [}\n',
    "unknown-role": b'{"session":"a","index":0,"records":[{"role":"robot","text":"x"}]}\n',
    "missing-text": b'{"session":"a","index":0,"records":[{"role":"user"}]}\n',
    "not-utf8": b'{"session":"a","index":0,"records":[{"role":"user","text":"caf\xe9"}]}\n',
    "empty": b"",
}
EXPECTED_ERROR = {
    "bad-json": ":1: bad JSON",
    "unknown-role": ":1: field 'records.0.role'",
    "missing-text": ":1: field 'records.0.text'",
    "not-utf8": ":1: not UTF-8",
    "empty": "empty chunk file",
}


def test_malformed_chunk_files_fail_naming_file_line_field(tmp_path) -> None:
    projects = {}
    for name, data in MALFORMED.items():
        d = tmp_path / "in" / name
        d.mkdir(parents=True)
        (d / f"{name}.jsonl").write_bytes(data)
        projects[name] = demo_project(chunks=str(d / "*.jsonl"))
    # shards named by position (s000, s001, ...): the test reads them by name
    write_config(tmp_path, "http://127.0.0.1:9/v1", projects=projects, shard_rule="sorted")
    targets = [f"results/{name}/log.jsonl" for name in MALFORMED]
    proc = snakemake(tmp_path, "--keep-going", *targets, check=False)
    assert proc.returncode != 0
    for name, expected in EXPECTED_ERROR.items():
        text = (tmp_path / f"logs/prompts/{name}/s000.log").read_text()
        assert f"{tmp_path / 'in' / name / name}.jsonl" in text, text
        assert expected in text, (name, text)
    # only the session indexes, which read no more than each line's session, were made
    made = files_under(tmp_path / "results")
    assert made == [tmp_path / f"results/{name}/sessions.jsonl" for name in sorted(MALFORMED)]


def test_memory_over_budget_is_a_format_failure_and_the_others_go_on(tmp_path, fake_server) -> None:
    # the update grows memory by one line per evidence chunk (15, 31, 47 tokens);
    # a candidate over budget.memory is that turn's format failure:
    # the memory stays, the trajectory goes on, and nothing is aborted. (The
    # prompts stage reserves budget.memory in every prompt, so a memory that
    # fits can never push a later prompt over the context.)
    server = fake_server({"replies": [{"match": "<section>", "gate": {"check_if": "error"}}]})
    chunks = tmp_path / "chunks"
    chunks.mkdir()
    write_session(chunks / "a.jsonl", "a", [f"error number {i} " + "x" * 40 for i in range(5)])
    write_session(chunks / "b.jsonl", "b", ["all quiet"] * 5)
    write_queries(tmp_path / "q.yaml")
    project = {"chunks": str(chunks / "*.jsonl"), "queries": str(tmp_path / "q.yaml")}
    write_config(tmp_path, server.base_url, projects={"p": project}, budget={"memory": 40})
    snakemake(tmp_path, "results/p/log.jsonl")
    log = read_lines(tmp_path / "results/p/log.jsonl")
    a = [x for x in log if x["session"] == "a"]
    b = [x for x in log if x["session"] == "b"]
    assert [x["t"] for x in b] == [1, 2, 3, 4, 5] and all(x["parsed"] for x in b)
    assert [x["status"] for x in a] == ["ok"] * 5
    assert [x["parsed"] for x in a] == [True, True, False, False, False]
    assert {x["parse_error"]["tag"] for x in a[2:]} == {"update"}
    assert all("over budget.memory 40" in x["parse_error"]["reason"] for x in a[2:])
    assert [x["memory_after"] for x in a[2:]] == [a[1]["memory_after"]] * 3


def test_parse_failure_is_recorded_and_reasked_with_a_new_seed(tmp_path, fake_server) -> None:
    bad = "I think the memory should change."
    good = "<think>ok</think><check>yes</check><update>m</update><next>continue</next>"
    server = fake_server({"replies": [{"match": "<section>", "sequence": [bad, bad, good]}]})
    chunks = tmp_path / "chunks"
    chunks.mkdir()
    write_session(chunks / "s.jsonl", "s", ["one", "two"])
    write_queries(tmp_path / "q.yaml")
    project = {"chunks": str(chunks / "*.jsonl"), "queries": str(tmp_path / "q.yaml")}
    # shards named by position (s000, s001, ...): the test reads them by name
    write_config(
        tmp_path,
        server.base_url,
        projects={"p": project},
        loop={"parse_retries": 1},
        shard_rule="sorted",
    )
    snakemake(tmp_path, "results/p/log.jsonl")
    log = read_lines(tmp_path / "results/p/log.jsonl")
    # t=1: two asks, both unparsed -> nulls, memory unchanged; t=2: parses
    assert log[0]["asks"] == 2 and log[0]["parsed"] is False
    assert log[0]["update_gate"] is None and log[0]["exit_gate"] is None
    assert log[0]["parse_error"]["tag"] == "think" and log[0]["memory_after"] is None
    assert log[1]["parsed"] is True and log[1]["memory_after"] == "m"
    responses = read_lines(tmp_path / "results/p/responses/s000.jsonl")
    seeds = [json.loads(r["request"]["body"])["seed"] for r in responses if r["t"] == 1]
    assert seeds == [0, 1]
    assert len(server.stats()["by_sha"]) == 3


def test_every_request_failing_is_a_clear_error(tmp_path, fake_server) -> None:
    server = fake_server({"outage": True, "replies": []})
    # shards named by position (s000, s001, ...): the test reads them by name
    write_config(tmp_path, server.base_url, llm={"retries": 1}, shard_rule="sorted")
    proc = snakemake(tmp_path, LOG, check=False)
    assert proc.returncode != 0
    text = (tmp_path / "logs/responses/demo/s000.log").read_text()
    assert "every request failed" in text


@pytest.mark.slow
def test_demo_session_end_to_end_with_the_embedded_model(tmp_path) -> None:
    """The real path: the responses job starts llama.cpp with SmolLM2-135M, the
    grammar makes every answer parse, and the server is gone afterwards."""
    write_queries(tmp_path / "q.yaml", "Which errors did the agent hit?")
    project = demo_project(
        chunks=str(DEMO / "chunks" / "demo-03-npm-peer-deps.jsonl"),
        queries=str(tmp_path / "q.yaml"),
    )
    write_config(
        tmp_path,
        None,
        projects={"p": project},
        llm={
            "model": "SmolLM2-135M-Instruct",
            "grammar": True,
            "max_tokens": 96,
            "concurrency": 1,
            "timeout": 120,
        },
    )
    snakemake(tmp_path, "results/p/log.jsonl")
    log = read_lines(tmp_path / "results/p/log.jsonl")
    assert [x["t"] for x in log] == [1, 2, 3]
    assert all(x["status"] == "ok" for x in log)
    parsed = [x for x in log if x["parsed"]]
    # max_tokens can cut an answer short; the grammar makes the rest parse
    assert len(parsed) >= 2, [x["parse_error"] for x in log]
    assert all(x["finish_reason"] == "length" for x in log if not x["parsed"])
    ps = subprocess.run(["pgrep", "-f", "llama_cpp.server"], capture_output=True, text=True)
    assert ps.stdout.strip() == ""


def test_transcripts_project_chunks_then_prompts(tmp_path, fake_server) -> None:
    """A project given as agent transcripts: chunk -> prompts -> ... in the DAG, and a run."""
    server = fake_server(FAKE_DEMO)
    project = demo_project(
        transcripts={
            "glob": str(REPO / "fixtures/transcripts/claude-code/*.jsonl"),
            "format": "auto",
        }
    )
    del project["chunks"]
    write_config(tmp_path, server.base_url, projects={"cc": project})
    dry = snakemake(tmp_path, "-n", "results/cc/log.jsonl").stdout
    assert "rule chunk:" in dry and "rule prompts:" in dry
    graph = snakemake(tmp_path, "--rulegraph", "mermaid-js", "results/cc/log.jsonl").stdout
    assert "chunk" in graph
    snakemake(tmp_path, "results/cc/log.jsonl")
    chunk_files = [p for p in files_under(tmp_path / "results/cc/chunks") if p.suffix == ".jsonl"]
    assert len(chunk_files) >= 2  # the main chain and its sidechains are separate sessions
    sessions = {x["session"] for x in read_lines(tmp_path / "results/cc/log.jsonl")}
    assert sessions == {p.stem for p in chunk_files}


def sessions_chunks_are_the_recorded_sections(corpus: Path) -> int:
    """Every chunk text of sessions.parquet is, byte for byte, what fills `{chunk}` in
    the recorded user message of its turn (trajectories.jsonl's prompts are the
    recorded requests); how many turns were checked. The template ends with the
    section slot: the user message ends with "<section> " + text + " </section>"."""
    import pyarrow.parquet as pq

    template = (REPO / "templates/gru-mem.txt").read_text(encoding="utf-8")
    before, after = template.split("{chunk}")
    opening = before.rsplit("\n", 1)[-1]
    assert (opening, after) == ("<section> ", " </section>")
    recorded = {}
    for traj in read_lines(corpus / "trajectories.jsonl"):
        _, query_id, session, _ = traj["trajectory_id"].split("/")
        for turn in traj["turns"]:
            (user,) = [m["content"] for m in turn["prompt"] if m["role"] == "user"]
            recorded.setdefault((query_id, session, turn["t"]), []).append(user)
    checked = 0
    for row in pq.read_table(corpus / "sessions.parquet").to_pylist():
        info = row["extra_info"]
        for t, chunk in enumerate(info["chunks"], start=1):
            for user in recorded[(info["query_id"], info["session"], t)]:
                assert user.endswith(opening + chunk["text"] + after), (info["session"], t)
                assert f"<problem> {info['question']} </problem>" in user
                checked += 1
    return checked


def test_export_live_then_replay_gives_the_same_bytes(tmp_path, fake_server) -> None:
    import pyarrow.parquet as pq

    server = fake_server(FAKE_DEMO)
    write_config(tmp_path, server.base_url)
    snakemake(tmp_path, "all")
    live = corpus_bytes(tmp_path)
    table = pq.read_table(tmp_path / "results/demo/corpus/turns.parquet")
    assert table.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    assert table.num_rows == 72
    assert corpus_digests(tmp_path) == PINNED_DEMO_CORPUS
    assert sessions_chunks_are_the_recorded_sections(tmp_path / "results/demo/corpus") == 72
    # statistics go to the jobs' logs (a rule captures stderr), not to stdout
    assert "kappa: " in (tmp_path / "logs/kappa/demo.log").read_text(encoding="utf-8")
    assert "trajectories" in (tmp_path / "logs/export/demo.log").read_text(encoding="utf-8")
    server.stop()
    for sub in ("prompts", "responses", "gates", "corpus"):
        for f in (tmp_path / "results/demo" / sub).iterdir():
            f.unlink()
    write_config(tmp_path, server.base_url, llm={"mode": "replay"})
    snakemake(tmp_path, "all")
    assert corpus_bytes(tmp_path) == live
    snakemake(tmp_path, "--forcerun", "export_project", "export")
    assert corpus_bytes(tmp_path) == live
    assert corpus_digests(tmp_path) == PINNED_DEMO_CORPUS


def test_export_without_calibration_file_fails_naming_it(tmp_path) -> None:
    missing = tmp_path / "no-such-calibration.jsonl"
    write_config(tmp_path, "http://127.0.0.1:9/v1", projects={"demo": demo_project(
        calibration=str(missing))})  # fmt: skip
    proc = snakemake(tmp_path, "all", check=False)
    assert proc.returncode != 0
    assert str(missing) in proc.stderr + proc.stdout
    assert files_under(tmp_path / "results") == []


def test_export_refuses_a_project_without_calibration(tmp_path) -> None:
    project = demo_project()
    del project["calibration"]
    write_config(tmp_path, "http://127.0.0.1:9/v1", projects={"demo": project})
    proc = snakemake(tmp_path, "-n", "all", check=False)
    assert proc.returncode != 0
    said = proc.stderr + proc.stdout
    assert "no calibration file (projects.demo.calibration)" in said
    assert "the export needs κ between the labels and a calibration labelling" in said


def test_judge_labels_feed_kappa_and_export(tmp_path, fake_server) -> None:
    server = fake_server(FAKE_DEMO)
    write_config(
        tmp_path, server.base_url, projects={"demo": demo_project(labels={"source": "judge"})}
    )
    snakemake(tmp_path, "all")
    labels = read_lines(tmp_path / "results/demo/labels.jsonl")
    assert len(labels) == 72 and len({(x["query_id"], x["chunk_sha"]) for x in labels}) == 72
    assert {x["annotator"] for x in labels} == {"fake-model"}
    assert read_lines(tmp_path / "results/demo/unjudged.jsonl") == []
    kappa = json.loads((tmp_path / "results/demo/kappa.json").read_text())
    assert kappa["n"] == 24 and kappa["kappa"] > 0.6
    # 72 judge requests + 72 rollout requests, each sent once
    assert server.stats()["requests"] == 144 and len(server.stats()["by_sha"]) == 144


def test_unparsed_judgement_blocks_the_export_naming_the_pair(tmp_path, fake_server) -> None:
    script = fake_demo_script()
    # one chunk's judgement comes back in prose
    script["replies"].insert(0, {"match": "(?s)<question> Which errors.*ImagePullBackOff",
                                 "content": "Probably yes."})  # fmt: skip
    server = fake_server(script)
    write_config(
        tmp_path, server.base_url, projects={"demo": demo_project(labels={"source": "judge"})}
    )
    proc = snakemake(tmp_path, "all", check=False)
    assert proc.returncode != 0
    unjudged = read_lines(tmp_path / "results/demo/unjudged.jsonl")
    assert len(unjudged) >= 1 and all(x["query_id"] == "errors-and-fixes" for x in unjudged)
    text = (tmp_path / "logs/export/demo.log").read_text()
    assert "have no label" in text and unjudged[0]["chunk_sha"][:12] in text
    assert not (tmp_path / "results/demo/corpus/trajectories.jsonl").exists()
    # the refusal is in the job's log only: log.jsonl, an input, is not written
    assert len(read_lines(tmp_path / LOG)) == 72
