"""config.py's YAML loading: UTF-8 only, unique keys, an empty file said as such;
every error names the file and line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grumem.config.settings import (
    check_config_files,
    load_config,
    load_queries,
    load_yaml,
    validate_config,
)
from grumem.errors import RecordError
from grumem.io.jsonl import _validator, validate, validate_fast
from support.workflow import demo_project, snakemake, write_config

QUERIES = "queries:\n  - id: q1\n    question: Où est le café ?\n"


def test_latin1_queries_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "queries.yaml"
    path.write_bytes(QUERIES.encode("latin-1"))
    with pytest.raises(RecordError) as e:
        load_queries(path)
    assert e.value.line == 3
    assert str(e.value).startswith(f"{path}:3: not UTF-8")
    assert "save the file as UTF-8" in str(e.value)
    path.write_bytes(QUERIES.encode("utf-8"))
    assert load_queries(path) == [{"id": "q1", "question": "Où est le café ?"}]


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n"])
def test_empty_queries_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "queries.yaml"
    path.write_text(text)
    with pytest.raises(RecordError, match=r"queries\.yaml: empty queries file: expected"):
        load_queries(path)


def test_empty_config_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("")
    with pytest.raises(RecordError, match=r"config\.yaml: empty config file"):
        load_config(path)


DUPLICATE_LLM = """\
projects:
  p: {chunks: c/*.jsonl, queries: q.yaml}
llm:
  model: a
loop:
  samples: 1
llm:
  model: b
"""


def test_duplicate_top_level_key_names_key_and_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(DUPLICATE_LLM)
    with pytest.raises(RecordError) as e:
        load_config(path)
    assert e.value.line == 7
    assert "duplicate key 'llm' (first on line 3)" in str(e.value)
    with pytest.raises(RecordError, match="duplicate key 'llm'"):
        check_config_files([path])


def test_duplicate_nested_key_and_duplicate_query_fields(tmp_path: Path) -> None:
    path = tmp_path / "queries.yaml"
    path.write_text("queries:\n  - id: q1\n    question: a?\n    id: q2\n")
    with pytest.raises(RecordError, match=r"queries\.yaml:4: bad YAML: duplicate key 'id'"):
        load_queries(path)


def test_merge_keys_may_still_override(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("base: &b {a: 1, b: 2}\nderived:\n  <<: *b\n  b: 3\n")
    assert load_yaml(path)["derived"] == {"a": 1, "b": 3}


def test_check_config_files_accepts_the_bundled_config() -> None:
    check_config_files([Path(__file__).parents[2] / "config.yaml"])
    check_config_files(None)


def test_snakemake_refuses_a_config_file_with_duplicate_keys(tmp_path: Path) -> None:
    """Snakemake's own configfile loader keeps the last key; the workflow re-reads
    its config files through grumem's loader before it plans anything."""
    path = write_config(tmp_path, "http://127.0.0.1:9/v1")
    path.write_text(path.read_text(encoding="utf-8") + "shard_size: 5\n", encoding="utf-8")
    proc = snakemake(tmp_path, "-n", "all", check=False)
    assert proc.returncode != 0
    assert "duplicate key 'shard_size'" in proc.stdout + proc.stderr


def config_with_base_url(base_url: object) -> dict:
    return {"projects": {"p": {"chunks": "c", "queries": "q"}}, "llm": {"base_url": base_url}}


@pytest.mark.parametrize(
    "base_url,field,why",
    [
        (
            ["http://a/v1", {"url": "http://b/v1", "concurrency": 0}],
            "llm.base_url[1].concurrency",
            "0 is less than the minimum of 1",
        ),
        (
            ["http://a/v1", {"url": "http://b/v1", "concurrency": 2.0}],
            "llm.base_url[1].concurrency",
            "2.0 is not of type 'integer'",
        ),
        ([{"concurrency": 2}], "llm.base_url[0]", "'url' is a required property"),
        (
            ["http://a/v1", {"url": "http://b/v1", "cap": 2}],
            "llm.base_url[1]",
            "'cap' was unexpected",
        ),
        (["http://a/v1", ""], "llm.base_url[1]", "should be non-empty"),
        ([], "llm.base_url", "should be non-empty"),
        (8000, "llm.base_url", "is not of type 'string', 'null', 'array'"),
    ],
)
def test_a_list_of_endpoints_names_the_bad_item(base_url: object, field: str, why: str) -> None:
    with pytest.raises(RecordError) as e:
        validate_config(config_with_base_url(base_url))
    assert e.value.field == field
    assert why in e.value.why


def test_a_list_of_endpoints_is_a_valid_base_url() -> None:
    listed = ["http://gpu01:8000/v1", {"url": "http://gpu02:8000/v1", "concurrency": 256}]
    for base_url in (listed, "http://gpu01:8000/v1", None):
        assert validate_config(config_with_base_url(base_url))["llm"]["base_url"] == base_url


# a base_url's secret: no character that ends userinfo or starts a query, and a
# marker no message's prose holds, so "not in the message" means not shown
_SECRETS = st.text(
    st.characters(codec="utf-8", exclude_characters="/?#@", exclude_categories=("Cs",)),
    max_size=12,
).map(lambda text: "Zq" + text)
_HOSTS = st.sampled_from(["127.0.0.1:8000", "gpu-node:8000", "[::1]:8000", "api.example.com"])
_PATHS = st.sampled_from(["/v1", "", "/openai/v1/", "/v1/x%20y"])


@given(
    scheme=st.sampled_from(["http", "https", "HTTPS"]),
    host=_HOSTS,
    path=_PATHS,
    user=st.one_of(st.none(), _SECRETS, _SECRETS.map(lambda u: u + ":" + "pw")),
    password=st.one_of(st.none(), _SECRETS),
    query=st.one_of(st.none(), _SECRETS.map(lambda q: "?api-key=" + q)),
    fragment=st.one_of(st.none(), _SECRETS.map(lambda f: "#" + f)),
    where=st.sampled_from(["llm", "item", "url", "judge"]),
)
@settings(max_examples=150, deadline=None)
def test_a_base_url_with_a_secret_is_refused_showing_it_without(
    scheme, host, path, user, password, query, fragment, where
) -> None:
    """Userinfo, a query string or a fragment in any base_url is refused; the message
    names the field, shows scheme, host and path, none of the secret, and points at
    llm.api_key_env. The same URL without them is accepted."""
    userinfo = "" if user is None else user + ("" if password is None else ":" + password) + "@"
    url = f"{scheme}://{userinfo}{host}{path}{query or ''}{fragment or ''}"
    clean = f"{scheme}://{host}{path}"
    llm: dict = {}
    project: dict = {"chunks": "c", "queries": "q"}
    field = {"llm": "llm.base_url", "item": "llm.base_url[1]", "url": "llm.base_url[0].url"}
    field["judge"] = "projects.p.labels.judge.base_url"

    def config(u: str) -> dict:
        if where == "llm":
            llm["base_url"] = u
        elif where == "item":
            llm["base_url"] = ["http://other:1/v1", u]
        elif where == "url":
            llm["base_url"] = [{"url": u, "concurrency": 2}]
        else:
            project["labels"] = {"source": "judge", "judge": {"base_url": u}}
        return {"projects": {"p": dict(project)}, "llm": dict(llm)}

    assert validate_config(config(clean))
    if url == clean:
        return
    with pytest.raises(RecordError) as e:
        validate_config(config(url))
    message = str(e.value)
    assert e.value.field == field[where]
    assert f"{clean} is given with" in message and "llm.api_key_env" in message
    for secret in (user, password, query, fragment):
        assert secret is None or secret not in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "url", ["alice:PASSWORD@host:8000/v1", "ftp://h/v1", "http://h /v1", "http://h/v1\n"]
)
def test_a_base_url_that_is_no_http_url_is_refused_without_showing_it(url: str) -> None:
    with pytest.raises(RecordError, match="the value is not shown") as e:
        validate_config(config_with_base_url(url))
    assert e.value.field == "llm.base_url" and url.strip() not in str(e.value)


def test_an_ambiguous_secret_shows_no_host() -> None:
    # a `?` or `/` before the last `@`: where userinfo ends is not certain, so no
    # part of what follows `//` is shown
    for url in ("http://alice:p?w@host/v1", "http://host/v1?key=abc@def", "http://a:1/b@h/v1"):
        with pytest.raises(RecordError) as e:
            validate_config(config_with_base_url(url))
        assert "http://… is given with credentials" in str(e.value)
        assert not re.search(r"alice|abc|def|host|\bh/", str(e.value))


def test_endpoints_refuse_a_secret_in_a_url_without_a_config() -> None:
    from grumem.errors import EndpointError
    from grumem.llm.endpoints import endpoints

    with pytest.raises(EndpointError, match=r"llm.base_url\[1\]: http://h/v1 is given") as e:
        endpoints(["http://ok/v1", "http://alice:PASSWORD@h/v1"], 4)
    assert "PASSWORD" not in str(e.value) and "alice" not in str(e.value)


def test_snakemake_names_the_endpoint_field_and_asks_for_the_sum_of_the_caps(
    tmp_path: Path,
) -> None:
    bad = [
        {"url": "http://127.0.0.1:9/v1", "concurrency": 4},
        {"url": "http://127.0.0.1:8/v1", "concurrency": 0},
    ]
    write_config(tmp_path, bad)
    proc = snakemake(tmp_path, "-n", "all", check=False)
    assert proc.returncode != 0
    assert (
        "field 'llm.base_url[1].concurrency' 0 is less than the minimum"
        in proc.stdout + proc.stderr
    )
    write_config(tmp_path, ["http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1/"])
    proc = snakemake(tmp_path, "-n", "all", check=False)
    assert proc.returncode != 0
    assert "llm.base_url[1]: http://127.0.0.1:9/v1/ is listed twice" in proc.stdout + proc.stderr
    # 4 (llm.concurrency, write_config's) + 7: each responses job asks for 11 llm_slots
    write_config(
        tmp_path, ["http://127.0.0.1:9/v1", {"url": "http://127.0.0.1:8/v1", "concurrency": 7}]
    )
    proc = snakemake(tmp_path, "-n", "all", "--resources", "llm_slots=100")
    assert proc.stdout.count("llm_slots=11,") == 2  # the demo's two responses jobs
    # a global cap below a job's ask scales it down: --concurrency 5, the total of that job
    proc = snakemake(tmp_path, "-n", "all", "--resources", "llm_slots=5")
    assert proc.stdout.count("llm_slots=5,") == 2 and "llm_slots=11" not in proc.stdout


def test_the_judge_asks_for_its_own_endpoints_slots(tmp_path: Path) -> None:
    judge = {
        "base_url": [{"url": "http://127.0.0.1:9/v1", "concurrency": 3}, "http://127.0.0.1:8/v1"]
    }
    project = demo_project(labels={"source": "judge", "judge": judge})
    write_config(tmp_path, "http://127.0.0.1:7/v1", projects={"demo": project})
    proc = snakemake(tmp_path, "-n", "all", "--resources", "llm_slots=100")
    # each job's block: `rule X:` then its indented fields (a grouped job's further
    # indented under its group); read line by line, a regex over blocks backtracks
    slots, rule = set(), None
    for line in proc.stdout.splitlines():
        if m := re.fullmatch(r"\s*rule (\w+):", line):
            rule = m.group(1)
        elif (m := re.match(r"\s+resources: .*llm_slots=(\d+)", line)) and rule:
            slots.add((rule, int(m.group(1))))
    # judge: 3 + llm.concurrency (4); responses: llm.concurrency, its one URL
    assert slots == {("judge", 7), ("responses", 4)}


_QUERY_VALUES = st.sampled_from([None, True, 1, 2.0, "", "q", "q 1", "q\n", "-q", "Why?", [], {}])


@given(st.data())
@settings(max_examples=400, deadline=None)
def test_queries_are_checked_by_compiled_code_that_agrees_with_the_reference(data) -> None:
    """load_queries checks by compiled code: it accepts exactly what
    jsonschema accepts, and a rejected file still names the reference's field."""
    queries = [{"id": "q1", "question": "Which errors?"}, {"id": "q2", "question": "And?"}]
    doc: dict = {"queries": [dict(q) for q in queries]}
    target = data.draw(st.sampled_from(["doc", "list", "query"]))
    if target == "doc":
        doc[data.draw(st.sampled_from(["queries", "extra"]))] = data.draw(_QUERY_VALUES)
    elif target == "list":
        doc["queries"] = data.draw(st.sampled_from([[], [1], ["q"], [None]]))
    else:
        q = doc["queries"][data.draw(st.integers(0, 1))]
        key = data.draw(st.sampled_from(["id", "question", "extra"]))
        if data.draw(st.booleans()):
            q.pop(key, None)
        else:
            q[key] = data.draw(_QUERY_VALUES)
    reference = _validator("queries").is_valid(doc)
    try:
        validate_fast(doc, "queries", "q.yaml")
        fast = True
    except RecordError as e:
        fast = False
        with pytest.raises(RecordError) as ref:
            validate(doc, "queries", "q.yaml")
        assert (e.field, e.why) == (ref.value.field, ref.value.why)
    assert fast == reference, doc


# ---------------------------------------------------------------- split


def _with_split(top: dict | None = None, project: dict | None = None) -> dict:
    demo = {"chunks": "c/*.jsonl", "queries": "q.yaml"}
    if project is not None:
        demo["split"] = project
    return {"projects": {"demo": demo}, **({} if top is None else {"split": top})}


@pytest.mark.parametrize(
    ("config", "field", "why"),
    [
        (
            _with_split({"train": 0.9}),
            "split",
            "the fractions train 0.9 + val 0.1 + test 0.1 sum to 1.1, not 1",
        ),
        (
            _with_split(project={"train": 0.5, "val": 0.2, "test": 0.2}),
            "projects.demo.split",
            "the fractions train 0.5 + val 0.2 + test 0.2 sum to 0.9, not 1",
        ),
        (_with_split({"train": 1.5}), "split.train", "1.5 is greater than the maximum of 1"),
        (_with_split(project={"test": -0.1}), "projects.demo.split.test", "less than the minimum"),
        (_with_split({"seed": 1.5}), "split.seed", "1.5 is not of type 'integer'"),
        (_with_split({"dev": 0.1}), "split", "'dev' was unexpected"),
    ],
)
def test_a_bad_split_is_refused_naming_the_field(config: dict, field: str, why: str) -> None:
    with pytest.raises(RecordError, match=re.escape(why)) as e:
        validate_config(config, "config.yaml")
    assert e.value.field == field


def test_a_projects_split_replaces_the_top_levels() -> None:
    from grumem.config.settings import project_split

    config = validate_config(
        _with_split({"train": 0.5, "val": 0.5, "test": 0, "seed": 9}, {"seed": 3}), "c"
    )
    # what the project leaves out takes the schema's default, not the top level's value
    assert project_split(config, "demo") == {"train": 0.8, "val": 0.1, "test": 0.1, "seed": 3}
    config = validate_config(_with_split({"train": 0.5, "val": 0.5, "test": 0}), "c")
    assert project_split(config, "demo") == {"train": 0.5, "val": 0.5, "test": 0, "seed": 0}
    assert validate_config(_with_split(), "c")["split"] == {
        "train": 0.8,
        "val": 0.1,
        "test": 0.1,
        "seed": 0,
    }


def test_a_rules_settings_with_a_bad_split_are_refused() -> None:
    from grumem.config.settings import settings_from_json

    with pytest.raises(RecordError, match=r"--settings: field 'split' the fractions"):
        settings_from_json('{"split": {"val": 0.3}}')
    assert settings_from_json('{"split": {"train": 0.7, "val": 0.2, "test": 0.1}}')["split"][
        "train"
    ] == pytest.approx(0.7)
