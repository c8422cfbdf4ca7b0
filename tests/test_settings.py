"""Config plumbing (grumem.config): path settings expanded, and the llm
connection settings passed apart from the settings that change requests."""

from __future__ import annotations

import argparse
import json

import pytest

from grumem.config import (
    CONNECTION_KEYS,
    add_settings_arguments,
    expand_path,
    settings_from_args,
    split_connection,
    validate_config,
)
from grumem.jsonl import RecordError

ENV = {"HOME": "/home/ana", "DATA": "/srv/data"}


@pytest.mark.parametrize(
    ("value", "expanded"),
    [
        ("~/.claude/projects/myproj/*.jsonl", "/home/ana/.claude/projects/myproj/*.jsonl"),
        ("~", "/home/ana"),
        ("$DATA/chunks/*.jsonl", "/srv/data/chunks/*.jsonl"),
        ("${DATA}/q.yaml", "/srv/data/q.yaml"),
        ("rel/~/x", "rel/~/x"),  # only a leading ~ is the home directory
        ("plain/*.jsonl", "plain/*.jsonl"),
    ],
)
def test_expand_path(value: str, expanded: str) -> None:
    assert expand_path(value, ENV, "config.yaml", "projects.p.chunks") == expanded


def test_an_unset_variable_names_the_field() -> None:
    with pytest.raises(RecordError, match=r"projects\.p\.queries.*\$NOPE is not set"):
        expand_path("$NOPE/q.yaml", ENV, "config.yaml", "projects.p.queries")


def test_validate_config_expands_every_path_setting(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GRUMEM_TEST_DIR", "/srv")
    config = {
        "projects": {
            "a": {
                "transcripts": {"glob": "~/.claude/projects/a/*.jsonl"},
                "queries": "$GRUMEM_TEST_DIR/q.yaml",
                "labels": {"source": "file", "path": "~/labels.jsonl"},
                "calibration": "${GRUMEM_TEST_DIR}/cal.jsonl",
            },
            "b": {"chunks": "~/chunks/*.jsonl", "queries": "q.yaml"},
        },
        "llm": {"cache_dir": "~/cache"},
    }
    validate_config(config)
    a, b = config["projects"]["a"], config["projects"]["b"]
    assert a["transcripts"]["glob"] == f"{tmp_path}/.claude/projects/a/*.jsonl"
    assert a["queries"] == "/srv/q.yaml" and a["calibration"] == "/srv/cal.jsonl"
    assert a["labels"]["path"] == f"{tmp_path}/labels.jsonl"
    assert b["chunks"] == f"{tmp_path}/chunks/*.jsonl" and b["queries"] == "q.yaml"
    assert config["llm"]["cache_dir"] == f"{tmp_path}/cache"


def test_connection_keys_are_split_from_the_request_settings() -> None:
    llm = validate_config({"projects": {"x": {"chunks": "", "queries": ""}}})["llm"]
    rest, connection = split_connection(llm)
    assert set(connection) == set(CONNECTION_KEYS)
    assert {"model", "temperature", "top_p", "max_tokens", "grammar", "system"} <= set(rest)
    assert not set(rest) & set(CONNECTION_KEYS)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_settings_arguments(parser)
    return parser.parse_args(argv)


def test_connection_reaches_the_llm_section() -> None:
    settings = json.dumps({"llm": {"model": "m", "temperature": 0.1}})
    connection = json.dumps({"timeout": 7, "concurrency": 3, "base_url": "http://h/v1"})
    s = settings_from_args(parse("--settings", settings, "--connection", connection))
    assert s["llm"]["timeout"] == 7 and s["llm"]["concurrency"] == 3
    assert s["llm"]["base_url"] == "http://h/v1" and s["llm"]["model"] == "m"
    assert s["llm"]["retries"] == 5  # the schema's default for what neither gives


def test_connection_takes_only_connection_settings() -> None:
    with pytest.raises(RecordError, match="'model'.*not a connection setting"):
        settings_from_args(parse("--settings", "{}", "--connection", '{"model": "m"}'))
    with pytest.raises(RecordError, match="timeout"):
        settings_from_args(parse("--settings", "{}", "--connection", '{"timeout": -1}'))


def test_the_judge_takes_the_connection_too() -> None:
    from grumem.stages.judge import settings_from_args as judge_settings

    parser = argparse.ArgumentParser()
    add_settings_arguments(parser)
    parser.add_argument("--project")
    settings = json.dumps({"llm": {"model": "m"}, "labels": {"source": "judge"}})
    connection = '{"base_url": "http://j/v1", "retries": 1}'
    args = parser.parse_args(["--settings", settings, "--connection", connection, "--project", "p"])
    s = judge_settings(args)
    assert s["llm"]["base_url"] == "http://j/v1" and s["llm"]["retries"] == 1
    assert s["labels"]["source"] == "judge"
