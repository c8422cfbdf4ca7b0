"""Config plumbing (grumem.config.settings): path settings expanded, and the llm
connection settings passed apart from the settings that change requests."""

from __future__ import annotations

import argparse
import copy
import json
import os

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from grumem.config.sections import filled_sections, sections_schema
from grumem.config.settings import (
    CONNECTION_KEYS,
    add_settings_arguments,
    expand_path,
    expand_paths,
    settings_from_args,
    split_connection,
    train_settings_from_args,
    validate_config,
    validate_sections,
)
from grumem.errors import RecordError

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
    parser = argparse.ArgumentParser()
    add_settings_arguments(parser)
    parser.add_argument("--project")
    settings = json.dumps({"llm": {"model": "m"}, "labels": {"source": "judge"}})
    connection = '{"base_url": "http://j/v1", "retries": 1}'
    args = parser.parse_args(["--settings", settings, "--connection", connection, "--project", "p"])
    s = settings_from_args(args, labels_of=args.project)
    assert s["llm"]["base_url"] == "http://j/v1" and s["llm"]["retries"] == 1
    assert s["labels"]["source"] == "judge"


# ---------------------------------------------------------------- compiled sections check

_VALUES = [None, True, False, 0, 1, -1, 2, 0.5, 2.0, 1.5, 512, "", "x", "GRUMEM_KEY"]
_VALUES += ["bad name", "~/c", "L2", "vllm", "openai", "replay", [], ["m"], [1], {}, {"z": 1}]
# endpoints (llm.base_url): good, and with a secret the format check refuses
_VALUES += ["http://h:1/v1", ["http://h/v1", {"url": "https://g/v1"}], "http://u:p@h/v1"]
_VALUES += ["http://h/v1?api-key=k", ["http://h/v1#f"], [{"url": "http://u@h/v1"}]]


def _section_values(s: dict) -> st.SearchStrategy:
    """Values for one property of the sections schema: its default, its enum, odd ones."""
    own = [s["default"]] if "default" in s else []
    own += list(s.get("enum", []))
    if s.get("type") == "object" and "properties" in s:
        return _objects(s) | st.sampled_from(_VALUES)
    # half the time a value of its own, so that many generated sections are valid
    return st.sampled_from(own) | st.sampled_from(_VALUES) if own else st.sampled_from(_VALUES)


def _objects(s: dict) -> st.SearchStrategy:
    props = {k: _section_values(v) for k, v in s["properties"].items()}
    unknown = st.sampled_from([None, None, None, 1])  # an unknown key now and then
    return st.tuples(st.fixed_dictionaries({}, optional=props), unknown).map(
        lambda d_u: d_u[0] if d_u[1] is None else {**d_u[0], "unknown": d_u[1]}
    )


@given(st.deferred(lambda: _objects(sections_schema())))
@settings(max_examples=800, deadline=None)
def test_the_compiled_sections_check_agrees_with_the_reference(sections: dict) -> None:
    """Jobs check their settings by compiled code: it may only accept what the
    reference (jsonschema and its default-filling recipe) accepts, filled alike."""
    fast = filled_sections(copy.deepcopy(sections))
    placeholder = {"x": {"chunks": "", "queries": ""}}
    try:
        reference = validate_config({"projects": placeholder, **copy.deepcopy(sections)}, "s")
    except RecordError:
        assert fast is None
        return
    reference.pop("projects")
    assert fast is None or expand_paths(fast, os.environ, "s") == reference


@pytest.mark.parametrize("sections", [{}, {"llm": {"model": "m", "max_tokens": 64}, "loop": {}}])
def test_a_rule_s_usual_settings_take_the_compiled_path(sections: dict) -> None:
    # otherwise every job imports jsonschema again (~80 ms), silently
    filled = filled_sections(sections)
    assert filled is not None and filled["budget"]["memory"] == 1024
    assert validate_sections(sections, "s") == filled


def test_settings_the_compiled_check_rejects_get_the_reference_s_message() -> None:
    with pytest.raises(RecordError, match="field 'budget.memory'"):
        validate_sections({"budget": {"memory": 0}}, "--settings")


def test_a_train_section_gets_its_defaults_and_a_bad_value_is_named(tmp_path) -> None:
    project = {"chunks": "c/*.jsonl", "queries": "q.yaml", "train": {"batch": 4}}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"projects": {"p": project}}))
    args = argparse.Namespace(settings=None, config=str(config))
    train = train_settings_from_args(args, "p")
    assert (train["batch"], train["backend"], train["rollouts"], train["kl"]) == (
        4,
        "embedded",
        4,
        0,
    )
    assert (train["logger"], train["resume"], train["overrides"]) == (["console"], True, [])
    bad = argparse.Namespace(settings=json.dumps({"train": {"backend": "tpu"}}), config=None)
    with pytest.raises(RecordError, match="projects.p.train.backend"):
        train_settings_from_args(bad, "p")
