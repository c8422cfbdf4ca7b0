"""The LLM judge: the judge prompt's golden file, judging every (query, chunk)
once against the fake server over real HTTP, replay byte for byte, unparsed and failed
judgements listed and never guessed, κ against the demo's calibration, merging shard
outputs, and the calibration sample. One slow test runs the embedded real model."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import start_fake_server

from grumem.config.settings import load_queries, settings_from_args
from grumem.core.chunk_text import distinct_chunks
from grumem.core.json_text import sha256_bytes, sha256_text
from grumem.core.judge_counts import format_judge_counts
from grumem.core.judge_parser import parse_judge_response
from grumem.core.recording import stored_body
from grumem.errors import (
    CorruptEntry,
    GrumemError,
    RecordError,
    ReplayMiss,
)
from grumem.io.chunk_files import iter_sessions, read_chunk_file
from grumem.io.jsonl import read_jsonl
from grumem.io.labels import load_labels
from grumem.llm.cache import ResponseCache
from grumem.stages.judge import run
from grumem.stages.kappa import run_kappa
from grumem.tools.calibrate import draw_sample, finalize, write_sample
from support.checkout import FIXTURES_DIR, REPO_ROOT
from support.judge import make_settings

DEMO = FIXTURES_DIR / "demo"
QUERIES = DEMO / "queries.yaml"
JUDGE_SCRIPT = FIXTURES_DIR / "fake" / "judge.yaml"
GOLDEN = FIXTURES_DIR / "expected" / "judge-prompt.txt"
GRUMEM = [sys.executable, "-m", "grumem"]


def judge_script(**extra: Any) -> dict[str, Any]:
    return {**yaml.safe_load(JUDGE_SCRIPT.read_text(encoding="utf-8")), **extra}


def demo_chunks_with_a_shared_session(workdir: Path) -> Path:
    """The demo chunk files plus a copy of one session under another name: its chunks
    have the same shas, so they must not be judged again."""
    chunks = workdir / "chunks"
    shutil.copytree(DEMO / "chunks", chunks)
    copy = [
        {**json.loads(line), "session": "demo-01-copy"}
        for line in (chunks / "demo-01-k8s-namespace.jsonl").read_text().splitlines()
    ]
    (chunks / "demo-06-copy.jsonl").write_text("".join(json.dumps(c) + "\n" for c in copy))
    return chunks


def all_pairs(chunks: Path) -> set[tuple[str, str]]:
    shas = {c.sha for c in distinct_chunks(iter_sessions([chunks]))}
    return {(q["id"], sha) for q in load_queries(QUERIES) for sha in shas}


# --- settings -----------------------------------------------------------------------------


def test_settings_errors_name_the_field(tmp_path):
    args = argparse.Namespace(settings=json.dumps({"llm": {}}), config=None, project="demo")
    with pytest.raises(RecordError, match="labels"):
        settings_from_args(args, labels_of=args.project)
    bad = {"llm": {}, "labels": {"source": "judge", "judge": {"temperature": -1}}}
    args = argparse.Namespace(settings=json.dumps(bad), config=None, project="demo")
    with pytest.raises(RecordError, match=r"projects\.demo\.labels\.judge\.temperature"):
        settings_from_args(args, labels_of=args.project)
    args = argparse.Namespace(settings=None, config=str(REPO_ROOT / "config.yaml"), project="x")
    with pytest.raises(GrumemError, match="no project 'x'"):
        settings_from_args(args, labels_of=args.project)
    args.project = "demo"
    assert settings_from_args(args, labels_of=args.project)["labels"]["judge"]["max_tokens"] == 256


# --- judging the demo against the fake server ----------------------------------------------


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> dict[str, Any]:
    """One live judge run of the demo (plus a shared session) against its own fake
    server, which is stopped before any test looks: later runs can only replay."""
    work = tmp_path_factory.mktemp("judged")
    chunks = demo_chunks_with_a_shared_session(work)
    server = start_fake_server(judge_script(), work)
    try:
        settings = make_settings(server.base_url, work / "cache")
        stats = run(
            [chunks],
            QUERIES,
            work / "labels.jsonl",
            work / "unjudged.jsonl",
            settings,
            log_path=work / "judge.log",
        )
        server_stats = server.stats()
    finally:
        server.stop()
    return {"work": work, "chunks": chunks, "stats": stats, "server": server_stats}


def test_every_pair_is_labelled_and_judged_once(judged):
    labels_path = judged["work"] / "labels.jsonl"
    lines = list(read_jsonl(labels_path, "label"))
    pairs = [(r["query_id"], r["chunk_sha"]) for r in lines]
    assert set(pairs) == all_pairs(judged["chunks"])
    assert len(pairs) == len(set(pairs)) == 2 * 36  # the copied session adds no pair
    assert pairs == sorted(pairs)
    assert {r["annotator"] for r in lines} == {"fake-judge"}
    # each distinct request reached the server exactly once, one per pair
    server = judged["server"]
    assert server["requests"] == len(server["by_sha"]) == len(pairs)
    assert set(server["by_sha"].values()) == {1}
    assert judged["stats"] == {
        "pairs": 72,
        "labelled": 72,
        "yes": judged["stats"]["yes"],
        "no": 72 - judged["stats"]["yes"],
        "unparsed": 0,
        "request_failed": 0,
        "budget": 0,
        "from_cache": 0,
        "sent": 72,
    }
    assert 0 < judged["stats"]["yes"] < 72
    assert (judged["work"] / "unjudged.jsonl").read_bytes() == b""
    log = (judged["work"] / "judge.log").read_text()
    assert (
        "judge: pairs 72/72 (100%), parse rate 1.00, in flight 0, cache hits 0, unlabelled 0" in log
    )


def test_replay_reproduces_labels_byte_for_byte(judged, tmp_path):
    work = judged["work"]
    # the server is gone; replay serves every request from the cache
    settings = make_settings(None, work / "cache", mode="replay")
    stats = run([judged["chunks"]], QUERIES, tmp_path / "l.jsonl", tmp_path / "u.jsonl", settings)
    assert (tmp_path / "l.jsonl").read_bytes() == (work / "labels.jsonl").read_bytes()
    assert (stats["from_cache"], stats["sent"]) == (72, 0)
    # a replay without the answers is an error naming the request, and writes nothing
    settings = make_settings(None, tmp_path / "empty-cache", mode="replay")
    with pytest.raises(ReplayMiss, match="replay: no cached response for request"):
        run([judged["chunks"]], QUERIES, tmp_path / "m.jsonl", tmp_path / "v.jsonl", settings)
    assert not (tmp_path / "m.jsonl").exists() and not (tmp_path / "v.jsonl").exists()


@pytest.mark.parametrize("where", ["llm", "judge"])
def test_a_list_of_endpoints_judges_as_one_server_does(judged, fake_server, tmp_path, where):
    """llm.base_url (or labels.judge.base_url) as a list: the judge's client sends to
    both endpoints, each under its cap, and the labels are the one-server labels."""
    a = fake_server(judge_script(latency_s=0.02))
    b = fake_server(judge_script(latency_s=0.02))
    listed = [{"url": a.base_url, "concurrency": 2}, b.base_url]
    if where == "llm":
        settings = make_settings(listed, tmp_path / "cache")
    else:
        settings = make_settings(
            "http://127.0.0.1:9/v1", tmp_path / "cache", judge={"base_url": listed}
        )
    out, side = tmp_path / "labels.jsonl", tmp_path / "unjudged.jsonl"
    stats = run([judged["chunks"]], QUERIES, out, side, settings, max_in_flight=5)
    assert out.read_bytes() == (judged["work"] / "labels.jsonl").read_bytes()
    assert (stats["labelled"], stats["sent"]) == (72, 72)
    sa, sb = a.stats(), b.stats()
    assert sa["answered"] + sb["answered"] == 72 and sa["answered"] > 0 and sb["answered"] > 0
    assert sa["in_flight_max"] <= 2 and sa["in_flight_max"] + sb["in_flight_max"] <= 5


def test_kappa_against_the_demo_calibration(judged, tmp_path):
    record = run_kappa(
        str(judged["work"] / "labels.jsonl"),
        str(DEMO / "calibration.jsonl"),
        20,
        str(tmp_path / "kappa.json"),
        queries_path=QUERIES,
        chunk_paths=[judged["chunks"]],
    )
    # fixtures/fake/judge.yaml's rules against the demo's 24 calibration pairs
    assert record["n"] == 24
    assert record["kappa"] == pytest.approx(0.7534, abs=1e-4)
    assert record["kappa"] >= 0.6  # export.min_kappa: the export would run


def test_a_parse_failure_is_listed_and_never_labelled(module_fake_server, tmp_path):
    chunks = DEMO / "chunks"
    marker = "Every object failed with `namespaces"
    target = [c for c in distinct_chunks(iter_sessions([chunks])) if marker in c.text]
    assert len(target) == 1
    script = judge_script()
    # one pair (errors-and-fixes x that chunk) gets prose instead of the tag format
    bad = {"match": f"(?s)<question> Which errors.*{marker}", "content": "Yes, it does."}
    script["replies"].insert(0, bad)
    server = module_fake_server.use(script)
    settings = make_settings(server.base_url, tmp_path / "cache")
    out, side = tmp_path / "labels.jsonl", tmp_path / "unjudged.jsonl"
    stats = run([chunks], QUERIES, out, side, settings)
    assert (stats["labelled"], stats["unparsed"]) == (71, 1)
    [u] = list(read_jsonl(side, "unjudged"))
    assert (u["query_id"], u["chunk_sha"], u["reason"]) == (
        "errors-and-fixes",
        target[0].sha,
        "unparsed",
    )
    assert u["parse_error"] == {
        "tag": "evidence",
        "reason": "missing <evidence>",
        "raw": "Yes, it does.",
    }
    assert ResponseCache(tmp_path / "cache").get(u["request_sha256"]) is not None
    labelled = {(r["query_id"], r["chunk_sha"]) for r in read_jsonl(out, "label")}
    assert ("errors-and-fixes", target[0].sha) not in labelled
    assert ("environment", target[0].sha) in labelled
    text = format_judge_counts(stats, str(out), str(side))
    assert "71/72 pairs labelled" in text and "unparsed 1" in text
    assert "1 pair(s) have no label: the export will refuse to run" in text


def test_failed_requests_fail_the_job_and_a_rerun_resends_only_them(module_fake_server, tmp_path):
    chunks = [DEMO / "chunks" / "demo-01-k8s-namespace.jsonl"]
    faults = {"rate": 0.4, "kinds": ["500"], "seed": 3}
    server = module_fake_server.use(judge_script(faults=faults))
    settings = make_settings(server.base_url, tmp_path / "cache")
    out, side = tmp_path / "labels.jsonl", tmp_path / "unjudged.jsonl"
    # a failed request is no result: nothing written, so the rerun has to happen
    with pytest.raises(GrumemError) as info:
        run(chunks, QUERIES, out, side, settings)
    failed = server.stats()["faults"]["500"]
    assert 0 < failed < 14
    message = str(info.value)
    assert f"{failed} of 14 judge requests failed after their retries" in message
    assert "failed after 1 attempt(s): status 500: HTTP 500: internal server error" in message
    assert "a rerun sends only the failed requests" in message
    assert not out.exists() and not side.exists()
    server.use(judge_script())  # the server recovers
    stats = run(chunks, QUERIES, out, side, settings)
    assert (stats["labelled"], stats["from_cache"], stats["sent"]) == (14, 14 - failed, failed)
    assert server.stats()["requests"] == failed
    assert side.read_bytes() == b""


def test_every_request_failing_is_an_error(module_fake_server, tmp_path):
    server = module_fake_server.use(judge_script(outage=True))
    settings = make_settings(server.base_url, tmp_path / "cache")
    chunks = [DEMO / "chunks" / "demo-03-npm-peer-deps.jsonl"]
    with pytest.raises(GrumemError, match=r"every judge request failed: 6 of 6"):
        run(chunks, QUERIES, tmp_path / "l.jsonl", tmp_path / "u.jsonl", settings)
    assert not (tmp_path / "l.jsonl").exists()


def test_over_budget_pairs_are_listed_and_not_sent(module_fake_server, tmp_path):
    server = module_fake_server.use(judge_script())
    chunks = [DEMO / "chunks" / "demo-05-ci-postgres.jsonl"]
    settings = make_settings(server.base_url, tmp_path / "cache", budget={"section": 80})
    stats = run(chunks, QUERIES, tmp_path / "l.jsonl", tmp_path / "u.jsonl", settings)
    over = list(read_jsonl(tmp_path / "u.jsonl", "unjudged"))
    assert 0 < stats["budget"] == len(over) < 24
    assert all(u["request_sha256"] is None and "section" in u["detail"] for u in over)
    assert server.stats()["requests"] == stats["labelled"] == 24 - len(over)


# --- the command line: shards and their merge ----------------------------------------------


def grumem(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GRUMEM, *args], capture_output=True, text=True, timeout=120)


def test_cli_shards_merge_to_the_whole_projects_labels(judged, tmp_path):
    """Two shards sharing a session, judged by `grumem judge` (replaying the module's
    cache), merge into exactly the labels of one run over everything."""
    work, chunks = judged["work"], judged["chunks"]
    settings = json.dumps(
        {
            "llm": {
                "base_url": None,
                "model": "rollout-model",
                "mode": "replay",
                "cache_dir": str(work / "cache"),
            },
            "loop": {},  # accepted and ignored: the judge has no loop
            "budget": {},
            "labels": {"source": "judge", "judge": {"model": "fake-judge"}},
        }
    )
    files = sorted(str(p) for p in chunks.glob("*.jsonl"))
    shards = {"s000": files[:4], "s001": files[3:]}  # demo-04 in both; demo-06 copies demo-01
    for shard, shard_files in shards.items():
        p = grumem(
            "judge",
            "--settings",
            settings,
            "--project",
            "demo",
            "--queries",
            str(QUERIES),
            "--out",
            str(tmp_path / f"{shard}.jsonl"),
            "--unparsed",
            str(tmp_path / f"{shard}.unparsed.jsonl"),
            "--log",
            str(tmp_path / f"{shard}.log"),
            "--concurrency",
            "2",
            *shard_files,
        )
        assert p.returncode == 0, p.stderr
        assert "pairs labelled" in p.stderr and "from cache" in p.stderr
        assert "parse rate 1.00" in (tmp_path / f"{shard}.log").read_text()
    p = grumem(
        "labels",
        "--labels",
        str(tmp_path / "s000.jsonl"),
        str(tmp_path / "s001.jsonl"),
        "--unparsed",
        str(tmp_path / "s000.unparsed.jsonl"),
        str(tmp_path / "s001.unparsed.jsonl"),
        "--out",
        str(tmp_path / "labels.jsonl"),
        "--unparsed-out",
        str(tmp_path / "unparsed.jsonl"),
    )
    assert p.returncode == 0, p.stderr
    assert "judge: 72/72 pairs labelled" in p.stderr
    assert (tmp_path / "labels.jsonl").read_bytes() == (work / "labels.jsonl").read_bytes()
    assert (tmp_path / "unparsed.jsonl").read_bytes() == b""


# --- the calibration sample ------------------------------------------------------------------


def test_calibrate_sample_is_stratified_blind_and_deterministic(judged, tmp_path):
    labels, chunks = judged["work"] / "labels.jsonl", judged["chunks"]
    lines, stats = draw_sample(QUERIES, labels, [chunks], 24, seed=7)
    again, _ = draw_sample(QUERIES, labels, [chunks], 24, seed=7)
    other, _ = draw_sample(QUERIES, labels, [chunks], 24, seed=8)
    assert lines == again and lines != other
    assert len(lines) == stats.drawn == 24
    judge = load_labels(labels)
    strata = Counter((x["query_id"], judge.get(x["query_id"], x["chunk_sha"])) for x in lines)
    assert len(strata) == 4 and all(n >= 4 for n in strata.values()), strata
    assert {k: v[0] for k, v in stats.strata.items()} == dict(strata)
    texts = {c.sha: c for c in distinct_chunks(iter_sessions([chunks]))}
    questions = {q["id"]: q["question"] for q in load_queries(QUERIES)}
    for x in lines:
        assert list(x) == [
            "query_id",
            "question",
            "chunk_sha",
            "session",
            "index",
            "chunk",
            "evidence",
        ]
        assert x["evidence"] is None  # blind: the judge's label is nowhere in the line
        assert (
            x["chunk"] == texts[x["chunk_sha"]].text and sha256_text(x["chunk"]) == x["chunk_sha"]
        )
        assert (x["session"], x["index"]) == (
            texts[x["chunk_sha"]].session,
            texts[x["chunk_sha"]].index,
        )
        assert x["question"] == questions[x["query_id"]]
    # the order is shuffled, not grouped by the judge's label
    said = [judge.get(x["query_id"], x["chunk_sha"]) for x in lines]
    runs = sum(1 for a, b in zip(said, said[1:], strict=False) if a != b)
    assert runs > 4
    # asking for more than there is draws everything once
    everything, stats = draw_sample(QUERIES, labels, [chunks], 500, seed=1)
    assert len(everything) == 72 == len({(x["query_id"], x["chunk_sha"]) for x in everything})


def test_calibrate_sample_cli_then_finalize_gives_a_calibration_file(judged, tmp_path):
    labels = judged["work"] / "labels.jsonl"
    sample = tmp_path / "sample.jsonl"
    p = grumem(
        "calibrate-sample",
        "--queries",
        str(QUERIES),
        "--labels",
        str(labels),
        "--n",
        "20",
        "--seed",
        "1",
        "--out",
        str(sample),
        str(judged["chunks"]),
    )
    assert p.returncode == 0, p.stderr
    assert "calibrate-sample: 20 pairs (environment/no 5 of" in p.stderr
    stats = write_sample(QUERIES, labels, [judged["chunks"]], 20, 1, tmp_path / "again.jsonl")
    assert stats.drawn == 20 and (tmp_path / "again.jsonl").read_bytes() == sample.read_bytes()
    lines = [json.loads(x) for x in sample.read_text().splitlines()]

    def save(path: Path, rows: list[dict]) -> Path:
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        return path

    with pytest.raises(RecordError, match=r"sample\.jsonl:1: field 'evidence' not filled"):
        finalize(sample, "alice", tmp_path / "cal.jsonl")
    # a person labels: here, every environment pair yes, every other pair no
    filled = [{**x, "evidence": x["query_id"] == "environment"} for x in lines]
    edited = [dict(r) for r in filled]
    edited[3]["chunk"] += " (my note)"
    with pytest.raises(
        RecordError, match=r"edited\.jsonl:4: field 'chunk' the chunk text was edited"
    ):
        finalize(save(tmp_path / "edited.jsonl", edited), "alice", tmp_path / "cal.jsonl")
    wrong = [dict(r) for r in filled]
    wrong[0]["evidence"] = "yes"
    with pytest.raises(RecordError, match=r"wrong\.jsonl:1: field 'evidence'"):
        finalize(save(tmp_path / "wrong.jsonl", wrong), "alice", tmp_path / "cal.jsonl")
    assert not (tmp_path / "cal.jsonl").exists()
    p = grumem(
        "calibrate-finalize",
        "--sample",
        str(save(tmp_path / "filled.jsonl", filled)),
        "--annotator",
        "alice",
        "--out",
        str(tmp_path / "cal.jsonl"),
    )
    assert p.returncode == 0, p.stderr
    cal = list(read_jsonl(tmp_path / "cal.jsonl", "label"))
    assert len(cal) == 20 and {c["annotator"] for c in cal} == {"alice"}
    assert [(c["query_id"], c["chunk_sha"]) for c in cal] == sorted(
        (c["query_id"], c["chunk_sha"]) for c in cal
    )
    record = run_kappa(
        str(labels),
        str(tmp_path / "cal.jsonl"),
        20,
        str(tmp_path / "k.json"),
        queries_path=QUERIES,
        chunk_paths=[judged["chunks"]],
    )
    assert record["n"] == 20 and -1 <= record["kappa"] <= 1


# --- the embedded real model ------------------------------------------------------------------


@pytest.mark.slow
def test_embedded_model_judges_with_the_grammar(tmp_path):
    """SmolLM2-135M in the embedded llama.cpp server, started by `grumem judge` itself
    (base_url null, live): two chunks x two questions, 64 tokens an answer. The grammar
    fixes the shape and bounds the think text to fit max_tokens: every answer opens with
    <think>, every answer the model finished parses into a label, and one cut at
    max_tokens anyway is listed as unparsed, saying so, never guessed. Measured on these
    chunks: four labels (on tool output such as `npm ERR!` lines the model can still run
    past the bound's token estimate). The labels' quality is not judged here. A replay
    with no server reproduces the labels."""
    pytest.importorskip("llama_cpp")
    chunks = tmp_path / "chunks.jsonl"
    picked = [
        read_chunk_file(DEMO / "chunks" / "demo-01-k8s-namespace.jsonl")[1],
        read_chunk_file(DEMO / "chunks" / "demo-03-npm-peer-deps.jsonl")[2],
    ]
    lines = [{"session": c.session, "index": 0, "records": list(c.records)} for c in picked]
    chunks.write_text("".join(json.dumps(x) + "\n" for x in lines))
    sections = {
        "judge": {"model": None, "max_tokens": 64, "grammar": True},
        "llm": {"model": "SmolLM2-135M-Instruct", "concurrency": 1, "timeout": 600},
    }
    settings = make_settings(None, tmp_path / "cache", **sections)
    out, side = tmp_path / "labels.jsonl", tmp_path / "unjudged.jsonl"
    stats = run([chunks], QUERIES, out, side, settings, log_path=tmp_path / "judge.log")
    assert stats["pairs"] == 4 and stats["sent"] == 4
    assert stats["labelled"] + stats["unparsed"] == 4, side.read_text()
    assert stats["labelled"] >= 1, side.read_text()
    assert {r["annotator"] for r in read_jsonl(out, "label")} == {"SmolLM2-135M-Instruct"}
    for u in read_jsonl(side, "unjudged"):
        assert u["detail"] and "cut at max_tokens 64" in u["detail"], u
    cache = ResponseCache(tmp_path / "cache")
    finished = 0
    for sha in cache.shas():
        choice = json.loads(cache.get(sha)[-1]["body"])["choices"][0]
        assert choice["message"]["content"].startswith("<think>")
        if choice["finish_reason"] == "stop":
            parse_judge_response(choice["message"]["content"])  # raises if the grammar failed
            finished += 1
    assert finished == stats["labelled"]
    replay = make_settings(None, tmp_path / "cache", mode="replay", **sections)
    run([chunks], QUERIES, tmp_path / "again.jsonl", tmp_path / "u2.jsonl", replay)
    assert (tmp_path / "again.jsonl").read_bytes() == out.read_bytes()
    assert (tmp_path / "u2.jsonl").read_bytes() == side.read_bytes()


# --- the recording check shared with gates and export --------------------------------------


def _cache_with_one_answer_replaced(judged, tmp_path, replace) -> tuple[Path, dict[str, Any]]:
    """A copy of the judged cache with one answer rewritten by `replace`."""
    cache = tmp_path / "cache"
    shutil.copytree(judged["work"] / "cache", cache)
    path = sorted(cache.glob("*/*.json"))[0]
    entry = json.loads(path.read_text(encoding="utf-8"))
    entry["attempts"][-1] = replace(entry["attempts"][-1])
    path.write_text(json.dumps(entry), encoding="utf-8")
    return cache, entry


def test_an_answer_that_is_not_utf8_is_no_label(judged, tmp_path):
    """recording.py: the judge reads an answer from its raw bytes, as gates and the export
    do. Before, it parsed the U+FFFD text of a body that is not UTF-8 and labelled it."""

    def not_utf8(attempt):
        text = attempt["body"].replace("<think>", "<think>\udcff", 1)
        raw = text.encode("utf-8", errors="surrogateescape")
        return {**attempt, **stored_body(raw), "sha256": sha256_bytes(raw)}

    cache, entry = _cache_with_one_answer_replaced(judged, tmp_path, not_utf8)
    assert "\ufffd" in entry["attempts"][-1]["body"] and "body_b64" in entry["attempts"][-1]
    # the U+FFFD text alone is still a well-formed judge answer
    content = json.loads(entry["attempts"][-1]["body"])["choices"][0]["message"]["content"]
    assert parse_judge_response(content).evidence in (True, False)
    settings = make_settings(None, cache, mode="replay")
    out, side = tmp_path / "l.jsonl", tmp_path / "u.jsonl"
    stats = run([judged["chunks"]], QUERIES, out, side, settings)
    assert (stats["labelled"], stats["unparsed"]) == (71, 1)
    [u] = list(read_jsonl(side, "unjudged"))
    assert u["request_sha256"] == entry["request_sha256"]
    assert u["parse_error"]["tag"] == "response"
    assert u["parse_error"]["reason"].startswith("not a chat completion")


FLIP_EVIDENCE = {"<evidence>yes": "<evidence>no", "<evidence>no": "<evidence>yes"}


@pytest.mark.parametrize("change", ["flips the label", "keeps the label"])
def test_a_cached_answer_that_differs_from_its_sha_is_never_served(
    judged, module_fake_server, tmp_path, change
):
    """An edited answer in the judge's cache: replay fails naming the cache file and the
    pair's request, writing nothing; live fails the same way having set the entry aside,
    and its rerun sends that one request and writes the original labels."""

    def edited(attempt):
        body = attempt["body"]
        if change == "keeps the label":
            return {**attempt, "body": body.replace("<think>", "<think> ", 1)}
        old = next(tag for tag in FLIP_EVIDENCE if tag in body)
        return {**attempt, "body": body.replace(old, FLIP_EVIDENCE[old], 1)}

    cache, entry = _cache_with_one_answer_replaced(judged, tmp_path, edited)
    sha = entry["request_sha256"]
    path = ResponseCache(cache).path(sha)
    bad = path.read_bytes()
    out, side = tmp_path / "l.jsonl", tmp_path / "u.jsonl"
    with pytest.raises(CorruptEntry) as e:
        run([judged["chunks"]], QUERIES, out, side, make_settings(None, cache, mode="replay"))
    message = str(e.value)
    assert re.search(rf"request {sha} \(judge [\w-]+ [0-9a-f]{{12}}\) is corrupt", message)
    assert str(path) in message and "attempts.0.sha256" in message
    assert "restore the entry from a good copy" in message
    assert not out.exists() and not side.exists() and path.read_bytes() == bad

    server = module_fake_server.use(judge_script())
    live = make_settings(server.base_url, cache)
    with pytest.raises(CorruptEntry, match="Rerun to send this request again"):
        run([judged["chunks"]], QUERIES, out, side, live)
    assert not out.exists() and not side.exists()
    assert path.with_name(path.name + ".corrupt").read_bytes() == bad
    stats = run([judged["chunks"]], QUERIES, out, side, live)
    assert server.stats()["by_sha"] == {sha: 1}
    assert (stats["sent"], stats["from_cache"]) == (1, 71)
    assert out.read_bytes() == (judged["work"] / "labels.jsonl").read_bytes()
