"""How a user's config drives the real `snakemake`: only the user's projects,
paths with `~` and variables, any file name, one copy of a session, and no
rerun for a connection setting."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grumem.core.units import unit_name
from grumem.transcripts import sanitize_session_id
from support.workflow import (
    REPO,
    assert_no_secret,
    demo_project,
    env,
    files_under,
    jobs,
    read_lines,
    snakemake,
    write_config,
    write_queries,
    write_session,
)

FAKE_DEMO = REPO / "fixtures" / "fake" / "demo.yaml"


def grumem(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "grumem", *args], capture_output=True, text=True, env=env()
    )


def user_checkout(tmp_path: Path) -> Path:
    """A working directory like the repository's: the demo config.yaml and its fixtures."""
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(REPO / "config.yaml", work / "config.yaml")
    (work / "fixtures").symlink_to(REPO / "fixtures")
    return work


# ------------------------------------------- a config of one's own replaces the demo's


def test_a_user_configfile_runs_only_the_user_projects(tmp_path) -> None:
    work = user_checkout(tmp_path)
    chunks = tmp_path / "mine"
    chunks.mkdir()
    write_session(chunks / "s.jsonl", "s", ["an error", "fixed"])
    write_queries(tmp_path / "q.yaml")
    mine = demo_project(chunks=str(chunks / "*.jsonl"), queries=str(tmp_path / "q.yaml"))
    config = {"projects": {"mine": mine}, "llm": {"base_url": "http://127.0.0.1:9/v1"}}
    (tmp_path / "my.yaml").write_text(yaml.safe_dump(config))
    out = snakemake(work, "-n", "all", "--configfile", str(tmp_path / "my.yaml")).stdout
    # the demo's requests would go to the user's (paid) server: no demo job at all
    assert "results/mine/" in out and "results/demo/" not in out, out
    assert jobs(out)["responses"] == 1
    # without a config of one's own: the demo, as `make run` runs it
    out = snakemake(work, "-n", "all").stdout
    assert "results/demo/" in out and "results/mine/" not in out
    assert jobs(out)["responses"] == 2


def test_a_user_configfile_without_projects_fails_saying_so(tmp_path) -> None:
    work = user_checkout(tmp_path)
    (tmp_path / "my.yaml").write_text(yaml.safe_dump({"llm": {"base_url": "http://x/v1"}}))
    proc = snakemake(work, "-n", "--configfile", str(tmp_path / "my.yaml"), check=False)
    assert proc.returncode != 0
    assert "no projects in the config" in proc.stdout + proc.stderr
    assert "results/demo/" not in proc.stdout


def test_a_config_given_only_as_overrides_replaces_the_demo_too(tmp_path) -> None:
    """`--config` alone is a config of one's own as a file is: the demo is not read under
    it (its requests would go to the server the override names); naming config.yaml
    with --configfile is how to change one of the demo's values."""
    work = user_checkout(tmp_path)
    proc = snakemake(work, "-n", "all", "--config", "shard_size=2", check=False)
    assert proc.returncode != 0
    said = proc.stdout + proc.stderr
    assert "no projects in the config" in said and "--configfile config.yaml --config" in said
    assert "results/demo/" not in proc.stdout
    overrides = ("shard_size=2", "shard_rule=sorted")
    out = snakemake(work, "-n", "all", "--configfile", "config.yaml", "--config", *overrides)
    # the demo's 5 sessions, exactly 2 to a shard instead of 3: 3 shards, not 2
    assert jobs(out.stdout)["responses"] == 3


# --------------------------------------------------- `~` and variables in path settings


def test_home_and_environment_variables_in_paths(tmp_path, monkeypatch) -> None:
    home = tmp_path / "home"
    transcripts = home / ".claude" / "projects" / "myproj"
    transcripts.mkdir(parents=True)
    (transcripts / "s1.jsonl").write_text('{"role": "user", "text": "hello"}\n')
    write_queries(tmp_path / "q.yaml")
    project = {
        "transcripts": {"glob": "~/.claude/projects/myproj/*.jsonl", "format": "records"},
        "queries": "$GRUMEM_TEST_QUERIES_DIR/q.yaml",
    }
    write_config(tmp_path, "http://127.0.0.1:9/v1", projects={"mine": project})
    # the snakemake subprocess gets this process's environment
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GRUMEM_TEST_QUERIES_DIR", str(tmp_path))
    out = snakemake(tmp_path, "-n", "-p", "results/mine/log.jsonl").stdout
    assert jobs(out)["chunk"] == 1
    assert str(transcripts / "s1.jsonl") in out and str(tmp_path / "q.yaml") in out
    monkeypatch.delenv("GRUMEM_TEST_QUERIES_DIR")
    proc = snakemake(tmp_path, "-n", "results/mine/log.jsonl", check=False)
    assert proc.returncode != 0
    said = proc.stdout + proc.stderr
    assert "projects.mine.queries" in said and "GRUMEM_TEST_QUERIES_DIR is not set" in said


# ------------------------------------------------------ transcript files of any name


def test_transcript_file_names_with_spaces_underscores_and_other_scripts(
    tmp_path, fake_server
) -> None:
    server = fake_server(FAKE_DEMO)
    transcripts = tmp_path / "transcripts"
    transcripts.mkdir()
    names = ["_draft notes.jsonl", "é-notes.jsonl", "会话.jsonl", "会议.jsonl", "plain.jsonl"]
    for i, name in enumerate(names):
        (transcripts / name).write_text(
            json.dumps({"role": "user", "text": f"error number {i}"}) + "\n", encoding="utf-8"
        )
    write_queries(tmp_path / "q.yaml")
    project = {
        "transcripts": {"glob": str(transcripts / "*.jsonl"), "format": "records"},
        "queries": str(tmp_path / "q.yaml"),
    }
    # shards named by position (s000, s001, ...): the test reads them by name
    write_config(
        tmp_path, server.base_url, projects={"p": project}, shard_size=2, shard_rule="sorted"
    )
    # one chunk job per shard: 5 transcripts, 2 to a shard
    assert jobs(snakemake(tmp_path, "-n", "results/p/log.jsonl").stdout)["chunk"] == 3
    snakemake(tmp_path, "results/p/log.jsonl")
    # each transcript keeps its own directory, named by grumem.core.units
    units = sorted(p.name for p in (tmp_path / "results/p/chunks").iterdir())
    assert units == sorted(unit_name(n) for n in names)
    log = read_lines(tmp_path / "results/p/log.jsonl")
    assert len(log) == 5 and all(x["status"] == "ok" for x in log)
    sessions = {x["session"] for x in log}
    assert len(sessions) == 5
    assert sessions == {sanitize_session_id(Path(n).stem) for n in names}


# ------------------------------------------------------ one copy of a session per project


def test_a_session_in_two_shards_fails_before_any_request(tmp_path, fake_server) -> None:
    server = fake_server(FAKE_DEMO)
    chunks = tmp_path / "chunks"
    chunks.mkdir()
    write_session(chunks / "a.jsonl", "shared", ["an error", "fixed"])
    write_session(chunks / "b.jsonl", "other", ["all good"])
    write_session(chunks / "c.jsonl", "shared", ["an error", "fixed"])  # a copy, another shard
    write_queries(tmp_path / "q.yaml")
    project = {"chunks": str(chunks / "*.jsonl"), "queries": str(tmp_path / "q.yaml")}
    write_config(tmp_path, server.base_url, projects={"p": project}, shard_size=1)
    proc = snakemake(tmp_path, "results/p/log.jsonl", check=False)
    assert proc.returncode != 0
    assert server.stats()["requests"] == 0
    logs = "".join(p.read_text() for p in (tmp_path / "logs").rglob("*.log"))
    assert str(chunks / "a.jsonl") in logs and str(chunks / "c.jsonl") in logs
    assert "session 'shared'" in logs


# ----------------------------------------------------- which settings rerun which jobs


def test_connection_settings_rerun_nothing_and_export_settings_rerun_the_export(
    tmp_path, fake_server
) -> None:
    server = fake_server(FAKE_DEMO)
    write_config(tmp_path, server.base_url)
    snakemake(tmp_path, "all")
    for llm in (
        {"timeout": 99, "concurrency": 7},
        {
            "timeout": 3,
            "concurrency": 2,
            "retries": 0,
            "backoff": 2.5,
            "base_url": "http://127.0.0.1:9/v1",
            "api_key_env": "OTHER_KEY",
            "mode": "replay",
        },
    ):
        write_config(tmp_path, server.base_url, llm=llm)
        out = snakemake(tmp_path, "-n", "all").stdout
        assert jobs(out) == {} and "Nothing to be done" in out, (llm, out[-2000:])
    # every export setting reaches its jobs through --settings, a param: a change
    # reruns the export (and the plots drawn from it), min_calibration the kappa job
    # too, and nothing upstream
    downstream = {"export_project": 1, "report_plots": 1, "report_viewer": 1, "all": 1}
    for export in (
        {"min_kappa": 0.5},
        {"data_source": "other"},
        {"alpha": 0.5},
        {"return_weights": {"r_update": 2.0}},
        {"return_weights": {"r_exit": 2.0}},
        {"return_weights": {"r_format": 2.0}},
        {"turn_weighting": "trajectory"},
        {"min_calibration": 10},
    ):
        write_config(tmp_path, server.base_url, export=export)
        expected = {**downstream, "kappa": 1} if "min_calibration" in export else downstream
        assert jobs(snakemake(tmp_path, "-n", "all").stdout) == expected, export
    # the project's split reaches the export as a param (and nothing upstream: every
    # session is run whatever its split); the top level's is not the demo's, which
    # has its own
    write_config(tmp_path, server.base_url, projects={"demo": demo_project(split={"seed": 1})})
    assert jobs(snakemake(tmp_path, "-n", "all").stdout) == downstream
    write_config(tmp_path, server.base_url, split={"seed": 1})
    assert jobs(snakemake(tmp_path, "-n", "all").stdout) == {}
    # a setting that changes the requests' bytes does rerun them
    write_config(tmp_path, server.base_url, llm={"temperature": 0.1})
    assert jobs(snakemake(tmp_path, "-n", "all").stdout)["responses"] == 2


@pytest.mark.parametrize(
    ("top", "project", "field"),
    [({"train": 0.9}, None, "split"), (None, {"val": 0.5}, "projects.demo.split")],
)
def test_a_split_that_does_not_sum_to_one_stops_the_run(tmp_path, top, project, field) -> None:
    demo = demo_project() if project is None else demo_project(split=project)
    write_config(tmp_path, "http://127.0.0.1:9/v1", projects={"demo": demo}, split=top or {})
    proc = snakemake(tmp_path, "-n", "all", check=False)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert f"invalid config: config: field '{field}' the fractions" in out, out[-3000:]
    assert "not 1: change them so that they do" in out


def test_demo_dry_run_lists_the_project_session_index(tmp_path) -> None:
    write_config(tmp_path, "http://127.0.0.1:9/v1", projects={"demo": demo_project()})
    assert jobs(snakemake(tmp_path, "-n", "all").stdout)["sessions"] == 1


# -------------------------------------------------------------- credentials in a base_url

# each form of a base_url a config can hold, with a secret in its userinfo or query
SECRET_URLS = {
    "userinfo": ("http://alice:PASSWORD@127.0.0.1:{port}/v1", ("alice", "PASSWORD")),
    "query": ("http://127.0.0.1:{port}/v1?api-key=SECRET", ("api-key", "SECRET")),
}


def place_url(url: str, where: str) -> tuple[dict, dict | None, str]:
    """(llm overrides, the project's labels or None, the field named) with `url` put
    in `where`: llm.base_url, an item of its list, or labels.judge.base_url."""
    if where == "llm.base_url":
        return {"base_url": url}, None, "llm.base_url"
    if where == "llm.base_url[1]":
        return {"base_url": ["http://127.0.0.1:9/v1", url]}, None, "llm.base_url[1]"
    if where == "llm.base_url[0].url":
        return {"base_url": [{"url": url, "concurrency": 2}]}, None, "llm.base_url[0].url"
    labels = {"source": "judge", "judge": {"base_url": url}}
    return {}, labels, "projects.demo.labels.judge.base_url"


@pytest.mark.parametrize("secret", sorted(SECRET_URLS))
@pytest.mark.parametrize(
    "where",
    ["llm.base_url", "llm.base_url[1]", "llm.base_url[0].url", "labels.judge.base_url"],
)
def test_a_secret_in_a_base_url_is_refused_before_anything_is_written(
    tmp_path, fake_server, secret, where
) -> None:
    """A dry run and a real run both stop at the config with one line that shows the
    URL without the secret and points at llm.api_key_env; no file of the work directory
    (.snakemake/ and logs/ included) nor the output holds any part of it."""
    server = fake_server(FAKE_DEMO)
    template, hidden = SECRET_URLS[secret]
    url = template.format(port=server.port)
    llm, labels, field = place_url(url, where)
    project = demo_project(labels=labels) if labels else demo_project()
    config = write_config(tmp_path, server.base_url, projects={"demo": project}, llm=llm)
    work = tmp_path / "work"  # the config file, which holds the secret, is outside it
    work.mkdir()
    for args in (["-n", "all"], ["all"]):
        proc = snakemake(work, *args, "--configfile", str(config), check=False)
        output = proc.stdout + proc.stderr
        assert proc.returncode != 0
        shown = f"http://127.0.0.1:{server.port}/v1 is given with"
        [line] = [x for x in output.splitlines() if shown in x]
        assert f"invalid config: config: field '{field}' {shown}" in line
        assert "llm.api_key_env" in line
        assert "Traceback" not in output and "AUTHORIZATION" not in output
        for part in hidden:
            assert_no_secret(work, part, proc.stdout, proc.stderr, under=(".",))
    assert files_under(work / "results") == [] and files_under(work / "logs") == []
    assert server.stats()["requests"] == 0


@pytest.mark.parametrize("secret", sorted(SECRET_URLS))
def test_a_secret_in_the_connection_of_a_grumem_command_is_refused(
    tmp_path, fake_server, secret
) -> None:
    """`grumem responses --connection` (what a rule passes) refuses it the same way:
    one line, no traceback, nothing written, no request."""
    server = fake_server(FAKE_DEMO)
    template, hidden = SECRET_URLS[secret]
    url = template.format(port=server.port)
    config = write_config(tmp_path, server.base_url)
    prompts = tmp_path / "prompts.jsonl"
    chunks = sorted((REPO / "fixtures/demo/chunks").glob("*.jsonl"))[:1]
    proc = grumem(
        "prompts", "--config", str(config), "--project", "demo", "--queries",
        str(REPO / "fixtures/demo/queries.yaml"), "--out", str(prompts), *map(str, chunks),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out, log = tmp_path / "work" / "responses.jsonl", tmp_path / "work" / "responses.log"
    out.parent.mkdir()
    connection = json.dumps({"base_url": url})
    proc = grumem(
        "responses", "--config", str(config), "--connection", connection,
        "--prompts", str(prompts), "--out", str(out), "--log", str(log),
    )  # fmt: skip
    assert proc.returncode != 0
    [line] = proc.stderr.splitlines()
    assert line.startswith("grumem responses: error: --connection: field 'llm.base_url' ")
    assert f"http://127.0.0.1:{server.port}/v1 is given with" in line
    assert "llm.api_key_env" in line and not out.exists()
    for part in hidden:
        assert_no_secret(out.parent, part, proc.stdout, proc.stderr, under=(".",))
    assert server.stats()["requests"] == 0
