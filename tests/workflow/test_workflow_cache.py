"""A corrupt entry of the response cache, through the real `snakemake` against the fake
server: never served, the job fails naming the cache file and the request, and a live
rerun sends that one request again and rebuilds the original corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from grumem.llm.cache import ResponseCache
from support.workflow import REPO, files_under, read_lines, snakemake, write_config

FAKE_DEMO = REPO / "fixtures" / "fake" / "demo.yaml"
CACHE = "results/cache/llm"
DERIVED = ("responses", "gates", "corpus")


def corpus(work: Path) -> dict[str, object]:
    """The corpus as a reader sees it: trajectories byte for byte, the verl rows, and
    the summary but for the log's sha256 (the log holds every attempt's latency)."""
    out = work / "results/demo/corpus"
    summary = json.loads((out / "summary.json").read_bytes())
    del summary["inputs"]["log_sha256"]
    return {
        "trajectories.jsonl": (out / "trajectories.jsonl").read_bytes(),
        "turns.parquet": pq.read_table(out / "turns.parquet").to_pylist(),
        "summary.json": summary,
    }


def exchanges(work: Path) -> dict[str, tuple[Path, dict]]:
    """Each recorded exchange by request sha: (its responses file, the record)."""
    out = {}
    for path in sorted((work / "results/demo/responses").glob("*.jsonl")):
        for record in read_lines(path):
            if record["kind"] == "exchange":
                out[record["request"]["sha256"]] = (path, record)
    return out


def pick_and_corrupt(work: Path, change: str) -> tuple[str, Path, str, str]:
    """Edit the answer of one exchange followed by another turn of its trajectory in
    the cache, leaving its sha256: (request sha, cache file, shard, request label)."""
    records = exchanges(work)
    later = {(r["trajectory_id"], r["t"] - 1) for _, r in records.values()}
    old, new = ("<check>yes</check>", "<check>no</check>")
    if change == "keeps the gates":
        old, new = "<think>", "<think>!"
    sha, (path, r) = next(
        (sha, (path, r))
        for sha, (path, r) in records.items()
        if (r["trajectory_id"], r["t"]) in later and old in r["response"]["body"]
    )
    entry_path = ResponseCache(work / CACHE).path(sha)
    entry = json.loads(entry_path.read_text(encoding="utf-8"))
    entry["attempts"][-1]["body"] = entry["attempts"][-1]["body"].replace(old, new, 1)
    entry_path.write_text(json.dumps(entry), encoding="utf-8")
    label = f"{r['trajectory_id']} t={r['t']} ask={r['ask']}"
    return sha, entry_path, path.stem, label


def remove_derived(work: Path) -> None:
    for sub in DERIVED:
        for f in files_under(work / "results/demo" / sub):
            f.unlink()
    (work / "results/demo/log.jsonl").unlink()


@pytest.mark.parametrize("change", ["flips a gate", "keeps the gates"])
def test_a_corrupt_cache_entry_fails_the_job_and_a_live_rerun_resends_only_it(
    tmp_path, fake_server, change
) -> None:
    server = fake_server(FAKE_DEMO)
    write_config(tmp_path, server.base_url)
    snakemake(tmp_path, "all")
    original = corpus(tmp_path)
    sha, entry, shard, label = pick_and_corrupt(tmp_path, change)
    bad = entry.read_bytes()
    log = tmp_path / f"logs/responses/demo/{shard}.log"

    # replay: the job fails on the entry itself, naming it and the request, writes nothing
    remove_derived(tmp_path)
    write_config(tmp_path, server.base_url, llm={"mode": "replay"})
    proc = snakemake(tmp_path, "--keep-going", "all", check=False)
    assert proc.returncode != 0
    text = log.read_text(encoding="utf-8")
    where = entry.relative_to(tmp_path)  # llm.cache_dir as the config names it
    assert f"{where}: the cache entry of request {sha} ({label}) is corrupt" in text
    assert "attempts.0.sha256" in text and "restore the entry from a good copy" in text
    assert "no cached response" not in text
    assert not (tmp_path / f"results/demo/responses/{shard}.jsonl").exists()
    assert entry.read_bytes() == bad  # replay moves nothing

    # live: the same failure, the entry set aside; its rerun sends that one request
    server.reset()
    write_config(tmp_path, server.base_url)
    proc = snakemake(tmp_path, "--keep-going", "all", check=False)
    assert proc.returncode != 0
    text = log.read_text(encoding="utf-8")
    aside = entry.with_name(entry.name + ".corrupt")
    assert f"({label}) is corrupt" in text
    assert f"it was moved to {aside.relative_to(tmp_path)}" in text
    assert not (tmp_path / f"results/demo/responses/{shard}.jsonl").exists()
    assert aside.read_bytes() == bad and server.stats()["requests"] == 0
    snakemake(tmp_path, "all")
    assert server.stats()["by_sha"] == {sha: 1}
    assert corpus(tmp_path) == original
