"""Records made from a JSON Schema, and mutated one field at a time: the data the tests
of grumem.records hold each class against its schema with."""

from __future__ import annotations

import copy
from typing import Any

import fastjsonschema
from hypothesis import strategies as st

from grumem.errors import RecordError
from grumem.io.jsonl import fast_validator, strict_validator_class, validate

# values of every JSON type, the edges of the schemas' minimums and enums, a float
# equal to an integer, and a sha256 with a final newline (a pattern's `$` allows it)
VALUES: list[Any] = [None, True, False, 0, -1, 1, 1.0, 2.0, 1.5, "", "x", "L3", "a" * 64]
VALUES += ["a" * 64 + "\n", [], [1], {}, {"x": 1}]


def schema_accepts(record: Any, name: str) -> bool:
    """Whether the record passes its schema as grumem's readers and writers check it:
    the compiled check (grumem.io.jsonl.checked) and the reference, jsonschema."""
    try:
        fast_validator(name)(record)
    except fastjsonschema.JsonSchemaValueException:
        return False
    try:
        validate(record, name)
    except RecordError:
        return False
    return True


def paths(
    value: Any, prefix: tuple[Any, ...] = (), items: int | None = None
) -> list[tuple[Any, ...]]:
    """Every key path in a JSON value, nested ones too; of a list, its first `items`
    items only when given (a long list's items are alike)."""
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths(v, (*prefix, k), items)
    elif isinstance(value, list):
        for i, v in enumerate(value[:items]):
            out += paths(v, (*prefix, i), items)
    return out


def mutated(record: Any, path: tuple[Any, ...], value: Any, delete: bool = False) -> Any:
    out = copy.deepcopy(record)
    node = out
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


def mutants(record: Any) -> list[Any]:
    """Every field (nested ones too) set to each of VALUES, deleted, or given an unknown
    sibling."""
    out = []
    for path in paths(record):
        out += [mutated(record, path, v) for v in VALUES]
        out.append(mutated(record, path, None, delete=True))
        if len(path) == 1 or isinstance(path[-1], str):
            out.append(mutated(record, (*path[:-1], "extra_field"), 1))
    return out


# --- records from a schema ------------------------------------------------------------------

JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
json_values = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner, max_size=2)
    ),
    max_leaves=4,
)


class FromSchema:
    """Values valid against the schema subset workflow/schemas/ uses (a JSON Schema data
    generator: hypothesis-jsonschema no longer works with current hypothesis). `extras`
    gives an open object keys the schema does not name."""

    def __init__(self, root: dict[str, Any], extras: bool = True):
        self.root, self.extras = root, extras
        self.check = strict_validator_class(root)

    def resolve(self, s: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in s:
            ref = s["$ref"]
            assert ref.startswith("#/"), ref
            node: Any = self.root
            for part in ref[2:].split("/"):
                node = node[part]
            s = {**node, **{k: v for k, v in s.items() if k != "$ref"}}
        return s

    def __call__(self, s: dict[str, Any]) -> st.SearchStrategy[Any]:
        s = self.resolve(s)
        if "allOf" in s:
            return self._conditional(s)
        if "const" in s:
            return st.just(s["const"])
        if "enum" in s:
            return st.sampled_from(s["enum"])
        for key in ("oneOf", "anyOf"):
            if key in s:
                rest = {k: v for k, v in s.items() if k != key}
                return st.one_of([self({**rest, **self.resolve(b)}) for b in s[key]])
        t = s.get("type")
        if isinstance(t, list):
            return st.one_of([self({**s, "type": x}) for x in t])
        if t == "null":
            return st.none()
        if t == "boolean":
            return st.booleans()
        if t == "integer":
            lo = s.get("minimum", -5)
            return st.integers(min_value=lo, max_value=s.get("maximum", lo + 1000))
        if t == "number":
            return self._number(s)
        if t == "string":
            if "pattern" in s:
                return st.from_regex(s["pattern"], fullmatch=True).filter(
                    lambda x: not x.endswith("\n")
                )
            return st.text(min_size=s.get("minLength", 0), max_size=8)
        if t == "array":
            return st.lists(
                self(s["items"]),
                min_size=s.get("minItems", 0),
                max_size=min(3, s.get("maxItems", 3)),
            )
        if t == "object":
            return self._object(s)
        return json_values  # a property the schema leaves untyped

    def _number(self, s: dict[str, Any]) -> st.SearchStrategy[Any]:
        lo, hi = s.get("minimum"), s.get("maximum", s.get("exclusiveMaximum"))
        floats = st.floats(
            min_value=lo,
            max_value=hi,
            exclude_max="exclusiveMaximum" in s,
            allow_nan=False,
            allow_infinity=False,
        )
        ints = st.integers(
            min_value=None if lo is None else int(lo),
            max_value=None if hi is None else int(hi) - ("exclusiveMaximum" in s),
        )
        return floats | ints

    def _object(self, s: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
        props, required = s.get("properties", {}), s.get("required", [])
        if not props and isinstance(s.get("additionalProperties"), dict):
            names = {"type": "string", **s.get("propertyNames", {})}
            return st.dictionaries(self(names), self(s["additionalProperties"]), max_size=3)
        order = [*props, *(r for r in required if r not in props)]
        known = st.fixed_dictionaries(
            {k: self(props.get(k, {})) for k in order if k in required},
            optional={k: self(props[k]) for k in order if k not in required},
        ).map(lambda d: {k: d[k] for k in order if k in d})  # in the schema's (writers') order
        if self.extras and s.get("additionalProperties") is not False:
            extra = st.dictionaries(
                st.text(min_size=1, max_size=6).filter(lambda k: k not in props),
                json_values,
                max_size=2,
            )
            return st.tuples(known, extra).map(lambda pair: pair[0] | pair[1])
        return known

    def _conditional(self, s: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
        """An object, then each `if` of its allOf applied: the properties of the branch
        it takes drawn again from the branch's schema."""
        base = self({k: v for k, v in s.items() if k != "allOf"})

        @st.composite
        def draw(data: st.DrawFn) -> dict[str, Any]:
            value = dict(data(base))
            for rule in s["allOf"]:
                taken = self.check(rule["if"]).is_valid(value)
                branch = rule.get("then" if taken else "else", {})
                for k, sub in branch.get("properties", {}).items():
                    if k in value:
                        value[k] = data(self(self.narrow(s["properties"][k], sub)))
            return value

        return draw()

    def narrow(self, prop: dict[str, Any], sub: dict[str, Any]) -> dict[str, Any]:
        """The property's schema cut to the type a branch of an `if` gives it."""
        prop = self.resolve(prop)
        if "oneOf" in prop:
            branches = [self.resolve(b) for b in prop["oneOf"]]
            return next(b for b in branches if b.get("type") == sub["type"])
        return {**prop, **sub}


def from_schema(root: dict[str, Any], extras: bool = True) -> st.SearchStrategy[Any]:
    return FromSchema(root, extras)(root)


def an_integral_float_in(value: Any) -> bool:
    """Whether `value` holds a float with no fractional part (1.0): the schema's `integer`
    takes it, a record class does not (no writer writes one)."""
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, dict):
        return any(an_integral_float_in(v) for v in value.values())
    if isinstance(value, list):
        return any(an_integral_float_in(v) for v in value)
    return False
