"""grumem.io.startup_cache: compiled validators kept across jobs, never stale."""

from __future__ import annotations

from pathlib import Path

import fastjsonschema
import pytest

from grumem.io import jsonl
from grumem.io.startup_cache import cache_dir, cached_validator


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GRUMEM_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def schemas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: Path) -> Path:
    """A schemas directory of our own; the in-process caches of jsonl forgotten."""
    d = tmp_path / "schemas"
    d.mkdir()
    monkeypatch.setattr(jsonl, "SCHEMAS_DIR", d)
    jsonl.schema.cache_clear()
    jsonl.fast_validator.cache_clear()
    yield d
    jsonl.schema.cache_clear()
    jsonl.fast_validator.cache_clear()


def _write_schema(d: Path, required: str) -> None:
    (d / "thing.schema.yaml").write_text(
        f"type: object\nrequired: [{required}]\nproperties:\n  n: {{type: integer}}\n",
        encoding="utf-8",
    )


def _rejects(check, record: dict) -> bool:
    try:
        check(record)
    except fastjsonschema.JsonSchemaValueException:
        return True
    return False


def test_the_cache_dir_is_the_env_var_s(cache: Path) -> None:
    assert cache_dir() == cache


def test_a_changed_schema_file_is_never_served_its_old_validator(schemas: Path) -> None:
    _write_schema(schemas, "a")
    check = jsonl.fast_validator("thing")
    assert not _rejects(check, {"a": 1}) and _rejects(check, {"b": 1})
    # a later job (fresh in-process caches) after the schema was edited
    _write_schema(schemas, "b")
    jsonl.schema.cache_clear()
    jsonl.fast_validator.cache_clear()
    check = jsonl.fast_validator("thing")
    assert _rejects(check, {"a": 1}) and not _rejects(check, {"b": 1})


def test_a_cached_validator_is_read_not_generated_and_checks_the_same(
    schemas: Path, cache: Path
) -> None:
    _write_schema(schemas, "a")
    first = jsonl.fast_validator("thing")
    [entry] = list((cache / "validators").iterdir())
    jsonl.fast_validator.cache_clear()
    jsonl.schema.cache_clear()
    # a job that finds the entry does not parse the schema's YAML at all
    second = jsonl.fast_validator("thing")
    assert jsonl.schema.cache_info().currsize == 0
    assert list((cache / "validators").iterdir()) == [entry]
    for record in ({"a": 1}, {"b": 1}, {"a": 1, "n": 2.0}, {"a": 1, "n": True}, {"a": 1, "n": 3}):
        assert _rejects(first, record) == _rejects(second, record)
    assert _rejects(second, {"a": 1, "n": 2.0})  # `integer` stays strict when cached


def test_compile_fast_keys_on_the_schema_itself(cache: Path) -> None:
    a = jsonl.compile_fast({"type": "object", "required": ["a"]})
    b = jsonl.compile_fast({"type": "object", "required": ["b"]})
    assert not _rejects(a, {"a": 1}) and _rejects(b, {"a": 1})
    assert len(list((cache / "validators").iterdir())) == 2


def test_a_broken_entry_is_made_again(cache: Path) -> None:
    code = "def validate(data):\n    return 'made'\n"
    assert cached_validator({"x": 1}, lambda: code)(None) == "made"
    [entry] = list((cache / "validators").iterdir())
    entry.write_bytes(b"not marshal data")
    assert cached_validator({"x": 1}, lambda: code)(None) == "made"
    assert cached_validator({"x": 1}, lambda: pytest.fail("generated again"))(None) == "made"


def test_an_unwritable_cache_still_gives_the_validator(tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("GRUMEM_CACHE_DIR", str(blocker / "cache"))  # under a file: no mkdir
    code = "def validate(data):\n    return data * 2\n"
    assert cached_validator({"x": 2}, lambda: code)(21) == 42
    assert list(tmp_path.iterdir()) == [blocker]


def test_an_edited_code_generator_is_a_new_entry(schemas: Path, cache: Path, monkeypatch) -> None:
    _write_schema(schemas, "a")
    jsonl.fast_validator("thing")
    jsonl.fast_validator.cache_clear()
    # jsonl.py's own sha256 stands for the generator: an edit to it is another key
    monkeypatch.setattr(jsonl, "_generator_version", lambda: "edited")
    jsonl.fast_validator("thing")
    assert len(list((cache / "validators").iterdir())) == 2
