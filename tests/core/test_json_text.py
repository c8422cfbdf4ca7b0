"""grumem.core.json_text: orjson where it agrees with the stdlib, the stdlib's bytes and
values always."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grumem.core.json_text import dumps, dumps_bytes, loads

# JSON values as records hold them: every float (tiny, huge, NaN, infinity),
# every character (control characters, lone surrogates), integers past 64 bits
_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(_JSON_VALUES)
@settings(max_examples=400)
def test_dumps_bytes_equals_the_stdlib_serialisation(value: Any) -> None:
    """orjson writes records; every written file keeps the bytes json.dumps gave."""
    try:
        expected = dumps(value).encode("utf-8")
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            dumps_bytes(value)
        return
    assert dumps_bytes(value) == expected


@given(_JSON_VALUES)
@settings(max_examples=400)
def test_loads_equals_the_stdlib_parse(value: Any) -> None:
    text = json.dumps(value)  # ASCII: lone surrogates as \ud800 escapes
    assert json.dumps(loads(text)) == json.dumps(json.loads(text))
