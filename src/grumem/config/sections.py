"""The config sections a rule passes to its job, checked by compiled code.

Every stage job validates the sections it is given (`--settings`,
`--connection`) against workflow/schemas/config.schema.yaml, filling defaults.
The reference is grumem.config.settings.validate_config (jsonschema and the FAQ's
default-filling recipe), whose import alone would be a large part of a small
job's start-up. Here the same defaults are filled by a walk of the schema and the result is
checked by fastjsonschema (cached, grumem.io.startup_cache). Anything this
path cannot decide, or rejects, goes to the reference, whose error names the
field: so this path only ever accepts, with the reference's result
(tests/config/test_settings.py compares the two on generated sections).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import cache
from typing import Any

import fastjsonschema

from grumem.core.split import Split
from grumem.errors import SplitError
from grumem.io.jsonl import compile_fast, schema

# keywords under which the recipe would fill defaults in ways the walk below does
# not follow (and oneOf fills them even in branches that fail): the reference decides
_UNSUPPORTED = frozenset(
    {"oneOf", "anyOf", "allOf", "not", "if", "$ref", "$dynamicRef", "dependentSchemas"}
    | {"patternProperties", "prefixItems", "unevaluatedProperties", "unevaluatedItems"}
)
# the config schema's own formats (grumem.config.settings), as fastjsonschema checks them
ENV_VAR_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
# an LLM endpoint: http(s), with no `@` (userinfo), `?` or `#` (a query string or
# fragment) anywhere, where a secret would be written out with the URL; no space
# or control character
ENDPOINT_URL_PATTERN = r"^[Hh][Tt][Tt][Pp][Ss]?://[^/?#@\x00-\x20\x7f]+(/[^?#@\x00-\x20\x7f]*)?\Z"


@cache
def sections_schema() -> dict[str, Any]:
    """The config schema without `projects`: the sections a rule passes."""
    s = copy.deepcopy(schema("config"))
    del s["properties"]["projects"]
    s["required"] = [r for r in s.get("required", []) if r != "projects"]
    return s


@cache
def _check() -> Callable[[Any], Any]:
    formats = {"env-var-name": ENV_VAR_NAME_PATTERN, "endpoint-url": ENDPOINT_URL_PATTERN}
    return compile_fast(sections_schema(), formats)


def filled_sections(sections: dict[str, Any]) -> dict[str, Any] | None:
    """A copy of `sections` with the schema's defaults filled, when it is valid; None
    when it is not, or when this path cannot tell (then ask the reference)."""
    filled = copy.deepcopy(sections)
    if not fill_defaults(filled, sections_schema()):
        return None
    try:
        _check()(filled)
        Split.from_config(filled["split"])  # its sum, which no schema says
    except (fastjsonschema.JsonSchemaValueException, SplitError):
        return None
    return filled


def fill_defaults(instance: Any, s: Any) -> bool:
    """Fill `default`s into `instance` in place as the recipe does: a missing property
    gets a copy of its default, then every present property (and every extra one,
    under a schema `additionalProperties`, and every item) is walked in turn.
    False when `s` holds a keyword the walk does not follow."""
    if not isinstance(s, dict):
        return True
    if any(_holds_default({k: s[k]}) for k in _UNSUPPORTED & s.keys()):
        return False
    properties = s.get("properties", {})
    if isinstance(instance, dict):
        for name, sub in properties.items():
            if isinstance(sub, dict) and "default" in sub and name not in instance:
                instance[name] = copy.deepcopy(sub["default"])
        for name, value in instance.items():
            sub = properties.get(name, s.get("additionalProperties"))
            if not fill_defaults(value, sub):
                return False
    items = s.get("items")
    if isinstance(instance, list) and items is not None:
        return all(fill_defaults(item, items) for item in instance)
    return True


def _holds_default(node: Any, seen: frozenset[str] = frozenset()) -> bool:
    """Whether a default sits anywhere under `node` (local `$ref`s followed): only
    then can the recipe fill something the walk would miss; a `$ref` to a schema
    without defaults (llm.base_url's list of endpoints) is checked, not filled."""
    if isinstance(node, list):
        return any(_holds_default(n, seen) for n in node)
    if not isinstance(node, dict):
        return False
    if "default" in node:
        return True
    ref = node.get("$ref")
    if isinstance(ref, str) and ref not in seen:
        target = sections_schema().get("$defs", {}).get(ref.removeprefix("#/$defs/"))
        # a reference the walk cannot follow: let the reference decide
        if not ref.startswith("#/$defs/") or target is None:
            return True
        if _holds_default(target, seen | {ref}):
            return True
    return any(_holds_default(v, seen) for k, v in node.items() if k != "$ref")
