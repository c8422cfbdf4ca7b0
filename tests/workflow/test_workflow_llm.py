"""The LLM stages through the real `snakemake` and `grumem` commands, against the fake server:
no secret in any file, a failed request is no result, the answering model is checked,
an unwritable output is found before any request is sent."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from grumem.llm.local_server import free_port
from support.workflow import (
    DEMO,
    REPO,
    assert_no_secret,
    demo_project,
    env,
    files_under,
    read_lines,
    snakemake,
    write_config,
)

FAKE_DEMO = REPO / "fixtures" / "fake" / "demo.yaml"
LOG = "results/demo/log.jsonl"
KEY_ENV = "GRUMEM_API_KEY"  # the default llm.api_key_env
SECRET = "sk-grumem-WORKFLOW-9d2c7b4e1f"


def fake_demo_script(**extra) -> dict:
    return {**yaml.safe_load(FAKE_DEMO.read_text(encoding="utf-8")), **extra}


def job_log(work: Path, stage: str = "responses") -> str:
    return "\n".join(p.read_text() for p in files_under(work / "logs" / stage / "demo"))


def test_the_key_is_in_no_file_after_a_successful_run(tmp_path, fake_server, monkeypatch) -> None:
    server = fake_server(FAKE_DEMO)
    monkeypatch.setenv(KEY_ENV, SECRET)
    write_config(tmp_path, server.base_url)
    proc = snakemake(tmp_path, LOG)
    assert len(read_lines(tmp_path / LOG)) == 72
    assert assert_no_secret(tmp_path, SECRET, proc.stdout, proc.stderr) > 10


@pytest.mark.parametrize("end", ["\n", "\r\n", "\t"])
def test_a_key_with_a_control_character_is_refused_and_written_nowhere(
    tmp_path, fake_server, monkeypatch, end
) -> None:
    # a key read from a file keeps its newline: refused at start-up, never shown
    server = fake_server(FAKE_DEMO)
    bad = SECRET + end
    monkeypatch.setenv(KEY_ENV, bad)
    write_config(tmp_path, server.base_url)
    proc = snakemake(tmp_path, LOG, check=False)
    assert proc.returncode != 0 and server.stats()["requests"] == 0
    assert f"the API key in ${KEY_ENV} has U+00" in job_log(tmp_path)
    assert_no_secret(tmp_path, bad, proc.stdout, proc.stderr)


def test_a_response_echoing_the_key_fails_the_job_and_is_written_nowhere(
    tmp_path, fake_server, monkeypatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    server = fake_server(fake_demo_script(shapes=[{"kind": "echo_authorization", "match": "npm"}]))
    write_config(tmp_path, server.base_url)
    proc = snakemake(tmp_path, "--keep-going", LOG, check=False)
    assert proc.returncode != 0 and server.stats()["faults"]["echo_authorization"] >= 1
    assert "contains the API key of $GRUMEM_API_KEY" in job_log(tmp_path)
    assert_no_secret(tmp_path, SECRET, proc.stdout, proc.stderr)


def test_a_key_pasted_as_api_key_env_is_refused_and_written_nowhere(tmp_path, fake_server) -> None:
    server = fake_server(FAKE_DEMO)
    write_config(tmp_path, server.base_url, llm={"api_key_env": SECRET})
    proc = snakemake(tmp_path, LOG, check=False)
    assert proc.returncode != 0 and server.stats()["requests"] == 0
    assert "llm.api_key_env' must be the NAME of an environment variable" in proc.stderr
    assert_no_secret(tmp_path, SECRET, proc.stdout, proc.stderr)


def test_the_key_is_in_no_file_after_a_connection_failure(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    write_config(tmp_path, f"http://127.0.0.1:{free_port()}/v1", llm={"retries": 0})
    proc = snakemake(tmp_path, LOG, check=False)
    assert proc.returncode != 0 and "connection error" in job_log(tmp_path)
    assert_no_secret(tmp_path, SECRET, proc.stdout, proc.stderr)


def test_failed_requests_fail_the_job_and_a_rerun_sends_only_them(tmp_path, fake_server) -> None:
    server = fake_server(fake_demo_script(faults={"rate": 0.15, "kinds": ["500"], "seed": 4}))
    write_config(tmp_path, server.base_url, llm={"retries": 0})
    proc = snakemake(tmp_path, "--keep-going", LOG, check=False)
    assert proc.returncode != 0
    failed = server.stats()["faults"]["500"]
    assert failed >= 2
    # no responses file holds a failed request: a shard with one wrote nothing
    text = job_log(tmp_path)
    shards = sorted((tmp_path / "results/demo/prompts").iterdir())
    written = {p.name for p in (tmp_path / "results/demo/responses").glob("*.jsonl")}
    assert len(written) < len(shards)
    assert "requests failed after their retries" in text and "HTTP 500" in text
    assert "internal server error (scripted fault)" in text
    assert "a rerun sends only the failed requests" in text
    cache = tmp_path / "results/cache/llm"
    answered = {p.stem for p in cache.rglob("*.json")}
    assert len(answered) == server.stats()["answered"]

    server.use(fake_demo_script())  # the server recovers
    snakemake(tmp_path, LOG)
    resent = set(server.stats()["by_sha"]) & answered
    assert resent == set(), f"{len(resent)} answered requests were sent again"
    log = read_lines(tmp_path / LOG)
    assert len(log) == 72 and all(line["status"] == "ok" for line in log)


def test_a_404_shows_the_servers_own_error_text(tmp_path, fake_server) -> None:
    server = fake_server(fake_demo_script(shapes=[{"kind": "not_found"}]))
    write_config(tmp_path, server.base_url)
    proc = snakemake(tmp_path, LOG, check=False)
    assert proc.returncode != 0
    text = job_log(tmp_path)
    assert "HTTP 404: The model `fake-model` does not exist" in text
    assert "Is the server" not in text


def test_a_wrong_answering_model_fails_unless_accepted_and_is_logged(tmp_path, fake_server) -> None:
    server = fake_server(fake_demo_script(model="gpt-4o-evil-substitute"))
    write_config(tmp_path, server.base_url)
    proc = snakemake(tmp_path, LOG, check=False)
    assert proc.returncode != 0
    text = job_log(tmp_path)
    assert "asked for model 'fake-model'" in text and "'gpt-4o-evil-substitute'" in text
    assert "llm.accept_models" in text
    assert not list((tmp_path / "results/demo/responses").glob("*.jsonl"))
    assert not list((tmp_path / "results/cache/llm").rglob("*.json"))

    write_config(tmp_path, server.base_url, llm={"accept_models": ["gpt-4o-*"]})
    snakemake(tmp_path, LOG)
    log = read_lines(tmp_path / LOG)
    assert {(x["model"], x["response_model"]) for x in log} == {
        ("fake-model", "gpt-4o-evil-substitute")
    }
    # the corpus says which model answered, per turn, not only which was asked for
    snakemake(tmp_path, "all")
    corpus = tmp_path / "results/demo/corpus"
    turns = [turn for traj in read_lines(corpus / "trajectories.jsonl") for turn in traj["turns"]]
    assert len(turns) == 72
    assert {turn["response_model"] for turn in turns} == {"gpt-4o-evil-substitute"}
    extra = pq.read_table(corpus / "turns.parquet").column("extra_info").to_pylist()
    assert {(row["model"], row["response_model"]) for row in extra} == {
        ("fake-model", "gpt-4o-evil-substitute")
    }


# ------------------------------------------------------------------- unwritable outputs


@contextlib.contextmanager
def tmpfs(path: Path, options: str) -> Iterator[Path]:
    """A tmpfs mounted at `path` for the test (root only), unmounted after it."""
    path.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "grumem-test", str(path)], capture_output=True
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {result.stderr.decode(errors='replace').strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@contextlib.contextmanager
def read_only_dir(path: Path) -> Iterator[Path]:
    """A directory this process cannot write: mode 0555, or (root ignores modes) a
    read-only tmpfs."""
    if os.geteuid() != 0:
        path.mkdir()
        path.chmod(0o555)
        try:
            yield path
        finally:
            path.chmod(0o755)
        return
    with tmpfs(path, "ro,size=64k") as p:
        yield p


def grumem(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "grumem", *args], capture_output=True, text=True, env=env()
    )


def demo_prompts(work: Path, base_url: str) -> tuple[Path, Path]:
    """A config and one shard's prompts (two demo sessions)."""
    config = write_config(work, base_url, llm={"cache_dir": str(work / "cache")})
    prompts = work / "prompts.jsonl"
    chunks = sorted((DEMO / "chunks").glob("*.jsonl"))[:2]
    proc = grumem(
        "prompts", "--config", str(config), "--project", "demo", "--queries",
        str(DEMO / "queries.yaml"), "--out", str(prompts), *map(str, chunks),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return config, prompts


def test_a_read_only_output_is_found_before_any_request(tmp_path, fake_server) -> None:
    server = fake_server(FAKE_DEMO)
    config, prompts = demo_prompts(tmp_path, server.base_url)
    with read_only_dir(tmp_path / "ro") as ro:
        out = ro / "responses.jsonl"
        proc = grumem("responses", "--config", str(config), "--prompts", str(prompts),
                      "--out", str(out))  # fmt: skip
        assert proc.returncode == 1, proc.stderr
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
        assert f"{ro}: cannot write there" in proc.stderr
        assert server.stats()["requests"] == 0
        # the cache directory too: every answer is written there as it arrives
        write_config(tmp_path, server.base_url, llm={"cache_dir": str(ro / "cache")})
        proc = grumem("responses", "--config", str(config), "--prompts", str(prompts),
                      "--out", str(tmp_path / "out.jsonl"))  # fmt: skip
        assert proc.returncode == 1 and f"{ro / 'cache'}: cannot write there" in proc.stderr
        assert server.stats()["requests"] == 0


def test_the_judge_finds_a_read_only_output_before_any_request(tmp_path, fake_server) -> None:
    server = fake_server(FAKE_DEMO)
    project = demo_project(labels={"source": "judge"})
    config = write_config(
        tmp_path, server.base_url, projects={"demo": project},
        llm={"cache_dir": str(tmp_path / "cache")},
    )  # fmt: skip
    with read_only_dir(tmp_path / "ro") as ro:
        proc = grumem(
            "judge", "--config", str(config), "--project", "demo", "--queries",
            str(DEMO / "queries.yaml"), "--out", str(ro / "labels.jsonl"), "--unparsed",
            str(ro / "unjudged.jsonl"), str(DEMO / "chunks" / "demo-01-k8s-namespace.jsonl"),
        )  # fmt: skip
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        assert f"{ro}: cannot write there" in proc.stderr
        assert server.stats()["requests"] == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs a small tmpfs (root) to fill")
def test_a_full_disk_is_a_one_line_error_naming_the_file(tmp_path, fake_server) -> None:
    server = fake_server(FAKE_DEMO)
    config, prompts = demo_prompts(tmp_path, server.base_url)
    with tmpfs(tmp_path / "full", "size=4m") as full:
        with contextlib.suppress(OSError), open(full / "filler", "wb") as f:
            while True:
                f.write(b"x" * 65536)
                f.flush()
        out = full / "responses.jsonl"
        proc = grumem("responses", "--config", str(config), "--prompts", str(prompts),
                      "--out", str(out))  # fmt: skip
        assert proc.returncode == 1, proc.stderr
        last = proc.stderr.strip().splitlines()[-1]
        assert "Traceback" not in proc.stderr
        assert last == (
            f"grumem responses: error: {out}: cannot write: No space left on device; "
            "free space or choose a writable place"
        )
        assert not out.exists() and not [p for p in full.iterdir() if p.name != "filler"]
        # the answers are in the cache: once there is room, nothing is sent again
        (full / "filler").unlink()
        sent = server.stats()["requests"]
        proc = grumem("responses", "--config", str(config), "--prompts", str(prompts),
                      "--out", str(out))  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert server.stats()["requests"] == sent and out.exists()
