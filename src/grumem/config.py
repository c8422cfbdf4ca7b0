"""Load config.yaml, validate it against workflow/schemas/config.schema.yaml, fill defaults."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from grumem.paths import SCHEMAS_DIR
from grumem.records import RecordError, schema

CONFIG_SCHEMA = SCHEMAS_DIR / "config.schema.yaml"
ENV_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# The config schema's own formats. Snakemake's validation ignores formats, so a
# value it must not echo (a key pasted as a variable name) is checked only here,
# where the message leaves the value out.
FORMATS = jsonschema.FormatChecker(formats=())


@FORMATS.checks("env-var-name")
def _is_env_var_name(value: object) -> bool:
    return not isinstance(value, str) or ENV_VAR_NAME.match(value) is not None


def _with_defaults(validator_cls: type) -> type:
    """A validator that fills `default`s as it validates (the jsonschema FAQ recipe),
    also inside `additionalProperties` (each project's entry)."""
    validate_properties = validator_cls.VALIDATORS["properties"]
    validate_additional = validator_cls.VALIDATORS["additionalProperties"]

    def set_defaults(validator, properties, instance, schema_):
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if "default" in sub and prop not in instance:
                    instance[prop] = _copy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema_)

    def additional(validator, aP, instance, schema_):
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


def validate_config(config: dict[str, Any], source: str = "config") -> dict[str, Any]:
    """Validate in place, filling defaults; raise RecordError naming the field."""
    s = schema("config")
    cls = _with_defaults(jsonschema.validators.validator_for(s))
    errors = list(cls(s, format_checker=FORMATS).iter_errors(config))
    if errors:
        e = jsonschema.exceptions.best_match(errors)
        field = ".".join(str(p) for p in e.absolute_path) or None
        message = e.message
        if e.validator == "format" and e.validator_value == "env-var-name":
            # a value that is not a variable name may be a key pasted in its place
            message = (
                "must be the NAME of an environment variable (^[A-Za-z_][A-Za-z0-9_]*$), "
                "not the key itself; the value is not shown"
            )
        raise RecordError(source, None, field, message)
    return config


def load_yaml(path: str | os.PathLike[str]) -> Any:
    """A YAML file; a syntax error names the file and line."""
    with open(path, encoding="utf-8") as f:
        try:
            return yaml.safe_load(f)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            why = getattr(e, "problem", None) or str(e)
            line = mark.line + 1 if mark else None
            raise RecordError(path, line, None, f"bad YAML: {why}") from None


def load_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    return validate_config(load_yaml(path) or {}, str(path))


def load_queries(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    """The project's standing questions, validated; ids must be unique."""
    from grumem.records import validate

    data = load_yaml(path)
    validate(data, "queries", path)
    seen: set[str] = set()
    for i, q in enumerate(data["queries"]):
        if q["id"] in seen:
            raise RecordError(path, None, f"queries.{i}.id", f"duplicate query id {q['id']!r}")
        seen.add(q["id"])
    return data["queries"]


def resolve(path: str, base: str | os.PathLike[str] = ".") -> Path:
    p = Path(path)
    return p if p.is_absolute() else Path(base) / p


def settings_from_json(text: str, source: str = "--settings") -> dict[str, Any]:
    """The llm/loop/budget/export sections a rule passes to a subcommand, defaults filled.

    Rules pass their settings as JSON (so Snakemake reruns a job whose settings
    changed, and `--config` overrides reach every job) instead of the path of a
    config file the job would re-read."""
    import json

    try:
        settings = json.loads(text)
    except json.JSONDecodeError as e:
        raise RecordError(source, None, None, f"bad JSON: {e}") from None
    if not isinstance(settings, dict) or "projects" in settings:
        raise RecordError(source, None, None, "expected an object of config sections (no projects)")
    # validate the sections with the config schema; a placeholder project
    # satisfies the schema's required `projects`
    full = validate_config({"projects": {"x": {"chunks": "", "queries": ""}}, **settings}, source)
    full.pop("projects")
    return full


def add_settings_arguments(parser: Any) -> None:
    g = parser.add_mutually_exclusive_group(required=True)
    g.add_argument("--settings", help="config sections as JSON (what the workflow's rules pass)")
    g.add_argument("--config", help="a config.yaml to read the sections from")


def settings_from_args(args: Any) -> dict[str, Any]:
    if args.settings is not None:
        return settings_from_json(args.settings)
    config = load_config(args.config)
    config.pop("projects")
    return config
