"""The fake server's script: what it answers, validated by fake_script.schema.yaml.

A script is a YAML/JSON file or a dict. The schema decides what is valid;
this module only turns a valid mapping into frozen dataclasses (regexes
compiled, defaults filled) and a schema violation into a ScriptError naming
the source and the field (`replies[0].gate.check_if`).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from grumem.config.settings import UniqueKeyLoader

SCHEMA_PATH = Path(__file__).with_name("fake_script.schema.yaml")
FAULT_KINDS = ("429", "500", "503", "hang", "reset", "truncated", "non_json", "length")
SHAPE_KINDS = (
    "empty_choices",
    "null_content",
    "sse",
    "echo_authorization",
    "not_found",
    "huge_body",
)


class ScriptError(ValueError):
    """A script that cannot be served, located by source, line and field."""

    def __init__(self, source: str, line: int | None, field: str | None, why: str):
        self.source, self.line, self.field, self.why = source, line, field, why
        where = source if line is None else f"{source}:{line}"
        super().__init__(f"{where}: field '{field}' {why}" if field else f"{where}: {why}")


@dataclass(frozen=True)
class Gate:
    check_if: re.Pattern[str]
    next_if: re.Pattern[str] | None


@dataclass(frozen=True)
class Judge:
    yes_if: re.Pattern[str]


@dataclass(frozen=True)
class Rule:
    """One reply rule; exactly one of content, sequence, gate, judge is set."""

    index: int  # position in `replies`; -1 for `default`
    match: re.Pattern[str] | None
    seed: int | None = None  # answers only a request with this `seed`; None: any
    content: str | None = None
    sequence: tuple[str, ...] | None = None
    gate: Gate | None = None
    judge: Judge | None = None


@dataclass(frozen=True)
class Faults:
    rate: float
    kinds: tuple[str, ...] = FAULT_KINDS
    seed: int = 0
    retry_after: float = 0
    hang_s: float = 30
    only_first: bool = False


@dataclass(frozen=True)
class Shape:
    kind: str
    match: re.Pattern[str] | None  # None: every request
    bytes: int = 0  # huge_body: the body's size
    piece_bytes: int = 65536  # huge_body: bytes a write
    piece_delay_s: float = 0.0  # huge_body: a pause after each piece
    content_length: bool = True  # huge_body: announced, else chunked


@dataclass(frozen=True)
class TokenDist:
    """`fixed` tokens, or a lognormal draw seeded by the request sha."""

    fixed: int | None = None
    mu: float = 0.0
    sigma: float = 0.0
    cap: int | None = None
    seed: int = 0


@dataclass(frozen=True)
class Capacity:
    tokens_per_s: float = math.inf
    per_request_tps: float = math.inf
    completion_tokens: TokenDist | None = None  # None: the reply's own cl100k token count


@dataclass(frozen=True)
class Script:
    model: str = "fake-model"
    replies: tuple[Rule, ...] = ()
    default: Rule | None = None
    faults: Faults | None = None
    outage: bool = False
    capacity: Capacity | None = None
    latency_s: float = 0.0
    shapes: tuple[Shape, ...] = ()


# ------------------------------------------------------------------ validation


def _is_strict_integer(checker: Any, value: Any) -> bool:
    # jsonschema counts 3.0 as an integer; a seed of 3.0 would hash as "3.0", not "3"
    return isinstance(value, int) and not isinstance(value, bool)


_FORMATS = jsonschema.FormatChecker(formats=("regex",))


@_FORMATS.checks("finite")
def _is_finite(value: object) -> bool:
    # YAML has .inf and .nan; every comparison with nan is false, so minimum cannot catch it
    return not isinstance(value, float) or math.isfinite(value)


@cache
def _validator() -> jsonschema.protocols.Validator:
    schema = yaml.safe_load(SCHEMA_PATH.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    strict = cls.TYPE_CHECKER.redefine("integer", _is_strict_integer)
    return jsonschema.validators.extend(cls, type_checker=strict)(schema, format_checker=_FORMATS)


def _field(path: list[str | int]) -> str | None:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or None


def _located(e: jsonschema.ValidationError) -> tuple[str | None, str]:
    """(field, reason) of a schema violation, in the words of this script format."""
    path: list[str | int] = list(e.absolute_path)
    why = e.message
    if e.validator in ("oneOf", "anyOf", "not"):
        # jsonschema's text for these repeats the whole value; the schema says what it needs
        why = e.schema.get("errorMessage", why)
    elif e.validator == "required":
        missing = next(k for k in e.validator_value if k not in e.instance)
        path.append(missing)
        why = "is required"
    elif e.validator == "additionalProperties":
        allowed = list(e.schema.get("properties", {}))
        path.append(next(k for k in e.instance if k not in allowed))
        why = f"unknown field; allowed: {', '.join(allowed)}"
    elif e.validator == "format" and e.validator_value == "regex":
        try:
            re.compile(e.instance)
        except re.error as bad:
            why = f"bad regex {e.instance!r}: {bad}"
    elif e.validator == "format" and e.validator_value == "finite":
        why = f"must be a finite number, got {e.instance!r}"
    return _field(path), why


def parse_script(value: Any, source: str = "<script>") -> Script:
    """A valid script as dataclasses; ScriptError naming the first bad field otherwise."""
    error = next(_validator().iter_errors(value), None)
    if error is not None:
        field, why = _located(error)
        raise ScriptError(source, None, field, why)
    replies = value.get("replies", [])
    faults = value.get("faults")
    capacity = value.get("capacity")
    return Script(
        model=value.get("model", Script.model),
        replies=tuple(_rule(r, i) for i, r in enumerate(replies)),
        default=None if "default" not in value else _rule(value["default"], -1),
        faults=None if faults is None else _faults(faults),
        outage=value.get("outage", Script.outage),
        capacity=None if capacity is None else _capacity(capacity),
        latency_s=float(value.get("latency_s", Script.latency_s)),
        shapes=tuple(_shape(s) for s in value.get("shapes", [])),
    )


def load_script(source: str | os.PathLike[str] | Mapping[str, Any]) -> Script:
    """A script from a YAML or JSON file, or from a dict."""
    if not isinstance(source, str | os.PathLike):
        return parse_script(source)
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ScriptError(str(path), None, None, f"cannot read: {e}") from None
    try:
        value = yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 (safe); JSON is YAML
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = None if mark is None else mark.line + 1
        raise ScriptError(str(path), line, None, f"not YAML/JSON: {e}") from None
    return parse_script(value, str(path))


# ------------------------------------------------- from a valid mapping to dataclasses


def _regex(value: str | None) -> re.Pattern[str] | None:
    return None if value is None else re.compile(value)


def _rule(value: Mapping[str, Any], index: int) -> Rule:
    match, seed = _regex(value.get("match")), value.get("seed")
    if "content" in value:
        return Rule(index, match, seed, content=value["content"])
    if "sequence" in value:
        return Rule(index, match, seed, sequence=tuple(value["sequence"]))
    if "gate" in value:
        gate = value["gate"]
        return Rule(
            index, match, seed, gate=Gate(re.compile(gate["check_if"]), _regex(gate.get("next_if")))
        )
    return Rule(index, match, seed, judge=Judge(re.compile(value["judge"]["yes_if"])))


def _shape(value: Mapping[str, Any]) -> Shape:
    return Shape(
        value["kind"],
        _regex(value.get("match")),
        value.get("bytes", Shape.bytes),
        value.get("piece_bytes", Shape.piece_bytes),
        float(value.get("piece_delay_s", Shape.piece_delay_s)),
        value.get("content_length", Shape.content_length),
    )


def _faults(value: Mapping[str, Any]) -> Faults:
    # status codes may be written as numbers (`kinds: [429, 503]`)
    kinds = tuple(str(k) for k in value.get("kinds", FAULT_KINDS))
    return Faults(
        float(value["rate"]),
        kinds,
        value.get("seed", Faults.seed),
        float(value.get("retry_after", Faults.retry_after)),
        float(value.get("hang_s", Faults.hang_s)),
        value.get("only_first", Faults.only_first),
    )


def _capacity(value: Mapping[str, Any]) -> Capacity:
    dist = value.get("completion_tokens")
    return Capacity(
        float(value.get("tokens_per_s", Capacity.tokens_per_s)),
        float(value.get("per_request_tps", Capacity.per_request_tps)),
        None if dist is None else _token_dist(dist),
    )


def _token_dist(value: Mapping[str, Any]) -> TokenDist:
    if "fixed" in value:
        return TokenDist(fixed=value["fixed"])
    return TokenDist(
        None, float(value["mu"]), float(value["sigma"]), value.get("cap"), value.get("seed", 0)
    )
