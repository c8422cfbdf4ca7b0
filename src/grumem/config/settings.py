"""Load config.yaml, validate it against workflow/schemas/config.schema.yaml, fill defaults."""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from grumem.config.sections import ENDPOINT_URL_PATTERN, ENV_VAR_NAME_PATTERN, filled_sections
from grumem.core.json_text import MAX_JSON_DEPTH, nesting_why, stdlib_loads
from grumem.core.split import Split
from grumem.errors import GrumemError, RecordError, SplitError
from grumem.io.jsonl import open_input, schema, strict_validator_class

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

ENV_VAR_NAME = re.compile(ENV_VAR_NAME_PATTERN)
ENDPOINT_URL = re.compile(ENDPOINT_URL_PATTERN)
# A placeholder project: the sections a rule passes are checked with the config
# schema, which requires `projects`
PLACEHOLDER_PROJECTS = {"x": {"chunks": "", "queries": ""}}


def _is_env_var_name(value: object) -> bool:
    return not isinstance(value, str) or ENV_VAR_NAME.match(value) is not None


def _is_endpoint_url(value: object) -> bool:
    return not isinstance(value, str) or ENDPOINT_URL.match(value) is not None


def endpoint_url_problem(url: str) -> str | None:
    """Why `url` cannot be an LLM endpoint (None: it can), in words that never show
    a secret. Userinfo (`user:password@`), a query string or a fragment would be
    written out with the URL, which is on every LLM rule's command line (so in
    .snakemake/ and the logs), and the SDK refuses credentials in a URL next to
    its API key. The message shows the URL without them, where that is certain."""
    if ENDPOINT_URL.match(url):
        return None
    fix = "put the API key in the environment variable named by llm.api_key_env"
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        return (
            "must be an http:// or https:// URL (…/v1); the value is not shown, in case it "
            f"holds a secret (a key belongs in no URL: {fix})"
        )
    what = []
    if "@" in rest:
        what.append("credentials (`user:password@`)")
    if "?" in rest or "#" in rest:
        what.append("a query string or fragment (`?…`, `#…`)")
    if not what:
        return "holds a space or a control character; the value is not shown"
    before, at, after = rest.rpartition("@")
    # what precedes the last `@` is userinfo only if no path, query or fragment
    # starts there; otherwise where the secret ends is not certain: show no host
    shown = "…" if at and any(c in before for c in "/?#") else after
    for mark in "?#":
        shown = shown.split(mark, 1)[0]
    them = "them" if len(what) > 1 else "it"
    return (
        f"{scheme}://{shown} is given with {' and '.join(what)}, not shown here. A URL "
        "is written to .snakemake/ and the logs (it is on the LLM rules' command lines): "
        f"take {them} out and {fix}"
    )


@cache
def _formats() -> Any:
    """The config schema's own formats. Snakemake's validation ignores formats, so a
    value it must not echo (a key pasted as a variable name) is checked only here,
    where the message leaves the value out."""
    # imported only when a whole config is validated: its import costs ~80 ms,
    # which a job checking its --settings by compiled code never pays
    import jsonschema

    checker = jsonschema.FormatChecker(formats=())
    checker.checks("env-var-name")(_is_env_var_name)
    checker.checks("endpoint-url")(_is_endpoint_url)
    return checker


def _with_defaults(validator_cls: type[Validator]) -> type[Validator]:
    """A validator that fills `default`s as it validates (the jsonschema FAQ recipe),
    also inside `additionalProperties` (each project's entry)."""
    import jsonschema

    validate_properties = validator_cls.VALIDATORS["properties"]
    validate_additional = validator_cls.VALIDATORS["additionalProperties"]

    def set_defaults(
        validator: Validator, properties: dict[str, Any], instance: Any, schema_: dict[str, Any]
    ) -> Iterator[ValidationError]:
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if "default" in sub and prop not in instance:
                    instance[prop] = _copy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema_)

    # Any: Validator, jsonschema's protocol, leaves out the descend() its classes have
    def additional(
        validator: Any, aP: Any, instance: Any, schema_: dict[str, Any]
    ) -> Iterator[ValidationError]:
        if isinstance(instance, dict) and isinstance(aP, dict):
            extras = set(instance) - set(schema_.get("properties", {}))
            for key in sorted(extras):
                yield from validator.descend(instance[key], aP, path=key)
            return
        yield from validate_additional(validator, aP, instance, schema_)

    return jsonschema.validators.extend(
        validator_cls, {"properties": set_defaults, "additionalProperties": additional}
    )


def _copy(value: Any) -> Any:
    return yaml.safe_load(yaml.safe_dump(value))


def _with_plugin_formats(s: dict[str, Any]) -> dict[str, Any]:
    """The schema with installed plugins' format names added to `transcripts.format`."""
    from grumem.transcripts import plugin_formats

    names = list(plugin_formats())
    if not names:
        return s
    s = json.loads(json.dumps(s))  # the cached schema stays as the file says
    project = s["properties"]["projects"]["additionalProperties"]
    project["properties"]["transcripts"]["properties"]["format"]["enum"] += names
    return s


def validate_config(config: dict[str, Any], source: str = "config") -> dict[str, Any]:
    """Validate in place, filling defaults; raise RecordError naming the field."""
    s = _with_plugin_formats(schema("config"))
    cls = _with_defaults(strict_validator_class(s))
    errors = list(cls(s, format_checker=_formats()).iter_errors(config))
    if errors:
        from jsonschema.exceptions import best_match

        e = best_match(errors)
        field = config_field(e.absolute_path)
        message = e.message
        if e.validator == "format" and e.validator_value == "env-var-name":
            # a value that is not a variable name may be a key pasted in its place
            message = (
                "must be the NAME of an environment variable (^[A-Za-z_][A-Za-z0-9_]*$), "
                "not the key itself; the value is not shown"
            )
        if e.validator == "format" and e.validator_value == "endpoint-url":
            message = endpoint_url_problem(e.instance) or message
        raise RecordError(source, None, field, message)
    check_splits(config, source)
    return expand_paths(config, os.environ, source)


def check_splits(config: Mapping[str, Any], source: str) -> None:
    """Every `split:` (top level, each project's) sums to 1, which a schema cannot say;
    a RecordError naming the setting otherwise."""
    found = [("split", config.get("split"))]
    found += [
        (f"projects.{n}.split", p.get("split")) for n, p in config.get("projects", {}).items()
    ]
    for field, section in found:
        if section is None:
            continue
        try:
            Split.from_config(section)
        except SplitError as e:
            where = f"{field}.{e.field}" if e.field else field
            raise RecordError(source, None, where, e.why) from None


def project_split(config: Mapping[str, Any], project: str) -> dict[str, Any]:
    """The split section of `project` in a validated config: its own, else the top level's."""
    own = config["projects"][project].get("split")
    return dict(own if own is not None else config["split"])


def config_field(path: Iterable[str | int]) -> str | None:
    """A config setting's name as a user writes it: `llm.base_url[1].concurrency`."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or None


# Path settings in which `~` and environment variables are expanded (a user's
# transcripts are in ~/.claude/projects/...): per project, and in llm and each
# evaluated policy's llm block.
PROJECT_PATHS = (
    ("chunks",),
    ("transcripts", "glob"),
    ("queries",),
    ("labels", "path"),
    ("calibration",),
)
LLM_PATHS = ("cache_dir",)
_ENV_VAR = re.compile(r"\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([^}]*)\})")


def expand_path(value: str, env: Mapping[str, str], source: str, field: str) -> str:
    """`$VAR`, `${VAR}` and a leading `~` (from env's HOME) expanded; an unset
    variable is an error naming the field, not a glob that silently matches nothing."""

    def var(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in env:
            raise RecordError(
                source, None, field, f"environment variable ${name} is not set (in {value!r})"
            )
        return env[name]

    value = _ENV_VAR.sub(var, value)
    if value == "~" or value.startswith("~/"):
        if "HOME" not in env:
            raise RecordError(source, None, field, f"HOME is not set: cannot expand {value!r}")
        value = env["HOME"] + value[1:]
    return value


def expand_paths(config: dict[str, Any], env: Mapping[str, str], source: str) -> dict[str, Any]:
    """Expand the path settings of a validated config in place (see expand_path)."""
    for name, project in config.get("projects", {}).items():
        for keys in PROJECT_PATHS:
            parent = project
            for key in keys[:-1]:
                parent = parent.get(key, {})
            if isinstance(parent.get(keys[-1]), str):
                field = ".".join(("projects", name, *keys))
                parent[keys[-1]] = expand_path(parent[keys[-1]], env, source, field)
    blocks = [("llm", config.get("llm", {}))]
    policies = config.get("evaluate", {}).get("policies", {})
    blocks += [(f"evaluate.policies.{name}", llm) for name, llm in policies.items()]
    for where, llm in blocks:
        for key in LLM_PATHS:
            if isinstance(llm.get(key), str):
                llm[key] = expand_path(llm[key], env, source, f"{where}.{key}")
    return config


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that rejects a key repeated in one mapping, and a document
    nested deeper than MAX_JSON_DEPTH.

    PyYAML keeps the last of two `llm:` blocks without a word, so half of a
    config would be ignored silently. Keys brought in by a merge (`<<: *base`)
    may still be overridden: that is what merging is for.

    PyYAML's composer recurses once a level (RecursionError at ~490), its parser
    does not: the depth is counted on the parser's events, aliases included (an
    alias is as deep as its anchor's value; one inside its own anchor makes a
    value that holds itself), and refused before the composer goes that deep."""

    def __init__(self, stream: Any):
        super().__init__(stream)
        # per open collection: its anchor and the height of its highest child so far
        self._open: list[list[Any]] = []
        self._heights: dict[str, int | None] = {}  # anchor -> height; None while open

    def get_event(self) -> yaml.Event:
        event = super().get_event()
        if isinstance(event, yaml.CollectionStartEvent):
            self._open.append([event.anchor, 0])
            if event.anchor is not None:
                self._heights[event.anchor] = None
            if len(self._open) > MAX_JSON_DEPTH:
                raise _too_deep(nesting_why(None, "YAML"), event)
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, highest = self._open.pop()
            self._child(anchor, 1 + highest)
        elif isinstance(event, yaml.AliasEvent) and event.anchor in self._heights:
            height = self._heights[event.anchor]
            if height is None:
                why = (
                    f"the alias *{event.anchor} is inside its own anchor: a value that holds"
                    " itself, nested without end; remove that alias"
                )
                raise _too_deep(why, event)
            if len(self._open) + height > MAX_JSON_DEPTH:
                raise _too_deep(nesting_why(None, "YAML"), event)
            self._child(None, height)
        elif isinstance(event, yaml.ScalarEvent) and event.anchor is not None:
            self._child(event.anchor, 0)
        return event

    def _child(self, anchor: str | None, height: int) -> None:
        if anchor is not None:
            self._heights[anchor] = height
        if self._open:
            self._open[-1][1] = max(self._open[-1][1], height)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):  # `!!map` on a scalar gets here: super() refuses it
            first: dict[Any, yaml.Node] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    seen = first.get(key)
                except TypeError:  # an unhashable key: the base class says so
                    break
                if seen is not None:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"duplicate key {key!r} (first on line {seen.start_mark.line + 1});"
                        " keep one",
                        key_node.start_mark,
                    )
                first[key] = key_node
        return super().construct_mapping(node, deep)


def _too_deep(why: str, event: yaml.Event) -> yaml.YAMLError:
    # a pure-Python loader's events carry yaml.error.Mark, the stub also allows the C one
    return yaml.composer.ComposerError(None, None, why, event.start_mark)  # type: ignore[arg-type]


def parse_yaml(text: str, path: str | os.PathLike[str]) -> Any:
    """YAML text (from `path`, for messages) with unique keys; errors name file and line."""
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        why = getattr(e, "problem", None) or str(e)
        line = mark.line + 1 if mark else None
        raise RecordError(path, line, None, f"bad YAML: {why}") from None


def read_text_file(path: str | os.PathLike[str]) -> str:
    """A text input, UTF-8; an unreadable or non-UTF-8 file is a RecordError naming the line."""
    with open_input(path) as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise RecordError(
            path,
            line,
            None,
            f"not UTF-8 ({e.reason} at byte {e.start}): save the file as UTF-8"
            " (e.g. iconv -f latin1 -t utf-8)",
        ) from None


def load_yaml(path: str | os.PathLike[str]) -> Any:
    """A YAML file: UTF-8, unique keys; an error names the file and line."""
    return parse_yaml(read_text_file(path), path)


def load_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    data = load_yaml(path)
    if data is None:
        raise RecordError(path, None, None, "empty config file: expected `projects:` and settings")
    return validate_config(data, str(path))


def check_config_files(paths: Any) -> None:
    """Re-read config files with grumem's loader: Snakemake's own keeps the last of two
    duplicate keys; this makes a duplicate an error naming the key and line."""
    for path in paths or ():
        load_yaml(path)


def load_queries(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    """The project's standing questions, validated; ids must be unique."""
    from grumem.io.jsonl import validate_fast

    data = load_yaml(path)
    if data is None:
        raise RecordError(
            path,
            None,
            None,
            "empty queries file: expected `queries:` with a list of {id, question}",
        )
    validate_fast(data, "queries", path)
    seen: set[str] = set()
    for i, q in enumerate(data["queries"]):
        if q["id"] in seen:
            raise RecordError(path, None, f"queries.{i}.id", f"duplicate query id {q['id']!r}")
        seen.add(q["id"])
    return data["queries"]


def resolve(path: str, base: str | os.PathLike[str] = ".") -> Path:
    p = Path(path)
    return p if p.is_absolute() else Path(base) / p


# llm settings that decide how a request reaches a server, never its bytes nor
# the corpus (the endpoint is not part of the cache key). Rules pass them apart
# from --settings, so that changing one reruns no job: the cache answers the
# same requests whichever server, timeout or mode is set.
CONNECTION_KEYS = (
    "base_url",
    "api_key_env",
    "concurrency",
    "timeout",
    "retries",
    "backoff",
    "mode",
)


def split_connection(llm: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the llm settings that change requests or the corpus, the connection settings)."""
    rest = {k: v for k, v in llm.items() if k not in CONNECTION_KEYS}
    return rest, {k: v for k, v in llm.items() if k in CONNECTION_KEYS}


def connection_from_json(text: str | None, source: str = "--connection") -> dict[str, Any]:
    """The llm connection settings a rule passes (CONNECTION_KEYS only), validated."""
    if text is None:
        return {}
    data = _json_object(text, source)
    extra = sorted(set(data) - set(CONNECTION_KEYS))
    if extra:
        raise RecordError(
            source,
            None,
            extra[0],
            f"not a connection setting (those are {', '.join(CONNECTION_KEYS)})",
        )
    validate_sections({"llm": dict(data)}, source)
    return data


def _json_object(text: str, source: str) -> dict[str, Any]:
    try:
        data = stdlib_loads(text)
    except json.JSONDecodeError as e:
        raise RecordError(source, None, None, f"bad JSON: {e}") from None
    if not isinstance(data, dict):
        raise RecordError(source, None, None, "expected a JSON object")
    return data


def settings_from_json(
    text: str, source: str = "--settings", connection: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The llm/loop/budget/export sections a rule passes to a subcommand, defaults filled.

    Rules pass their settings as JSON (so Snakemake reruns a job whose settings
    changed, and `--config` overrides reach every job) instead of the path of a
    config file the job would re-read; `connection` (from --connection) goes
    into the llm section over what `text` holds."""
    return _validated_sections(_json_object(text, source), source, connection)


def _validated_sections(
    settings: dict[str, Any], source: str, connection: Mapping[str, Any] | None
) -> dict[str, Any]:
    if "projects" in settings:
        raise RecordError(source, None, None, "expected an object of config sections (no projects)")
    if connection:
        settings["llm"] = {**settings.get("llm", {}), **connection}
    return validate_sections(settings, source)


def validate_sections(sections: dict[str, Any], source: str) -> dict[str, Any]:
    """Config sections (no projects) validated, defaults filled, paths expanded: what
    validate_config makes of them, by compiled code when it accepts them
    (grumem.config.sections), else by validate_config, whose error names the field."""
    filled = filled_sections(sections)
    if filled is not None:
        return expand_paths(filled, os.environ, source)
    full = validate_config({"projects": copy.deepcopy(PLACEHOLDER_PROJECTS), **sections}, source)
    full.pop("projects")
    return full


def add_settings_arguments(parser: Any, required: bool = True, connection: bool = True) -> None:
    """`--settings` (what the workflow's rules pass) or `--config`; without `required`,
    neither means the schema's defaults. `--connection` for the commands that send
    requests."""
    g = parser.add_mutually_exclusive_group(required=required)
    default = "" if required else "; neither: the schema's defaults"
    g.add_argument(
        "--settings",
        help=f"config sections as JSON (what the workflow's rules pass){default}",
    )
    g.add_argument("--config", help="a config.yaml to read the sections from")
    if connection:
        parser.add_argument(
            "--connection",
            default=None,
            help=f"llm connection settings as JSON ({', '.join(CONNECTION_KEYS)}); "
            "they override those of --settings or --config",
        )


def settings_from_args(args: Any, labels_of: str | None = None) -> dict[str, Any]:
    """The config sections a subcommand is given, validated, defaults filled.

    `--settings` is the JSON a rule passes (config sections, no projects);
    `--config` reads them from a config.yaml; `--connection` overrides the llm
    connection settings of either. With `labels_of` (the judge), the settings
    also hold that project's `labels` section: the `labels` key of `--settings`,
    checked as a project's, or the project's entry of the config file."""
    connection = connection_from_json(getattr(args, "connection", None))
    if args.settings is None and args.config is None:  # neither given: the defaults
        return _validated_sections({}, "--settings", connection)
    if args.settings is not None:
        sections = _json_object(args.settings, "--settings")
        if labels_of is None:
            return _validated_sections(sections, "--settings", connection)
        if "labels" not in sections:
            raise RecordError(
                "--settings", None, "labels", "missing: pass the project's labels section"
            )
        labels = sections.pop("labels")
        settings = _validated_sections(sections, "--settings", connection)
        project = {"chunks": "", "queries": "", "labels": labels}
        checked = validate_config({"projects": {labels_of: project}}, "--settings")
        settings["labels"] = checked["projects"][labels_of]["labels"]
        return settings
    config = load_config(args.config)
    projects = config.pop("projects")
    if labels_of is not None:
        if labels_of not in projects:
            raise GrumemError(
                f"{args.config}: no project {labels_of!r} (projects: {', '.join(sorted(projects))})"
            )
        config["labels"] = projects[labels_of]["labels"]
    config["llm"].update(connection)
    return config


def train_settings_from_args(args: Any, project: str) -> dict[str, Any]:
    """The project's `train:` section, validated, defaults filled: the `train` key of
    `--settings` (what rule `train` passes), or the project's entry of `--config`."""
    if args.settings is not None:
        source = "--settings"
        train = _json_object(args.settings, source).get("train")
    else:
        source = str(args.config)
        projects = load_config(args.config)["projects"]
        if project not in projects:
            raise GrumemError(f"{source}: no project {project!r} (projects: {', '.join(projects)})")
        train = projects[project].get("train")
    if not isinstance(train, dict):
        raise RecordError(
            source,
            None,
            f"projects.{project}.train",
            "missing: the project trains with a"
            " `train:` section (workflow/schemas/config.schema.yaml)",
        )
    stub = {"chunks": "", "queries": "", "train": train}
    return validate_config({"projects": {project: stub}}, source)["projects"][project]["train"]
