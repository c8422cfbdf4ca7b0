"""The exact request body: built once, recorded, and sent byte for byte.

The body is the record. `build_body` writes it the way the openai SDK puts
it on the wire when every field after `messages` is passed through
`extra_body` (compact JSON, UTF-8 unescaped, key order kept). Named SDK
parameters (`temperature=`, `seed=`...) would be reordered into the SDK's own
order, so the client never uses them; it checks the bytes that went out
against this string after every attempt, and refuses, before it is sent,
a body not in that form (`wire_data`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from grumem.core.json_text import dumps, sha256_text, stdlib_loads
from grumem.errors import RequestError, WireMismatch

RESERVED = ("model", "messages")


def build_body(
    model: str,
    messages: list[dict],
    params: Mapping[str, Any],
    extra: Mapping[str, Any] | None = None,
) -> str:
    """The request body: model, messages, then `params` in their order, then `extra`."""
    if not isinstance(model, str) or not model:
        raise RequestError("request: model must be a non-empty string")
    if not isinstance(messages, list) or not messages:
        raise RequestError("request: messages must be a non-empty list")
    extra = extra or {}
    for key in params:
        if key in RESERVED:
            raise RequestError(f"request: parameter {key!r} clashes with the body's own field")
    for key in extra:
        if key in RESERVED or key in params:
            raise RequestError(f"request: extra field {key!r} is already in the body")
    body = dumps({"model": model, "messages": messages, **params, **extra})
    try:
        body.encode("utf-8")
    except UnicodeEncodeError as e:
        # a lone surrogate cannot go on the wire; say where rather than send '?'
        raise RequestError(f"request: text is not valid UTF-8 at character {e.start}") from None
    return body


def request_sha(body: str) -> str:
    """sha256 of the body's UTF-8 bytes: the cache key and the record's `sha256`."""
    return sha256_text(body)


def request_name(sha: str, label: str = "") -> str:
    """How an error names a request: `request <sha>`, and the caller's label if any."""
    return f"request {sha} ({label})" if label else f"request {sha}"


def wire_data(body: str, sha: str, label: str = "") -> dict[str, Any]:
    """The body parsed, once it is known to be in the form build_body writes.

    That form (compact JSON, UTF-8 unescaped, key order kept, no NaN) is what
    the SDK's `chat.completions.create(model, messages, extra_body=rest)` puts
    on the wire (tests/llm/test_transport.py sends both to a server and
    compares); the client POSTs the bytes as they are, so a body in any other
    form (spaces, escaped non-ASCII, NaN) is refused here, before it is sent,
    rather than recorded as something the SDK would never have sent."""
    name = request_name(sha, label)
    try:
        data = stdlib_loads(body)
    except json.JSONDecodeError as e:
        raise RequestError(f"{name}: body is not JSON: {e}") from None
    if not isinstance(data, dict) or "model" not in data or "messages" not in data:
        raise RequestError(f"{name}: body needs 'model' and 'messages'")
    try:
        wire_form = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError as e:
        raise WireMismatch(f"{name}: the SDK would not send it: {e}") from None
    if wire_form != body:
        raise WireMismatch(
            f"{name}: the body is not in the SDK's wire form (compact "
            f"JSON, UTF-8 unescaped): the SDK would send {len(wire_form.encode())} bytes, the "
            f"record has {len(body.encode())}; build it with grumem.llm.request.build_body"
        )
    return data


def sampling_params(llm: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """Every sampling field, explicitly: servers' defaults differ (llama.cpp is not OpenAI).

    `seed` is the sample index k, so repeated samples are distinct requests."""
    return {
        "temperature": llm["temperature"],
        "top_p": llm["top_p"],
        "max_tokens": llm["max_tokens"],
        "seed": seed,
    }
