"""The exact request body: built once, recorded, and sent byte for byte.

The body is the record. `build_body` writes it the way the openai SDK puts
it on the wire when every field after `messages` is passed through
`extra_body` (compact JSON, UTF-8 unescaped, key order kept). Named SDK
parameters (`temperature=`, `seed=`...) would be reordered into the SDK's own
order, so the client never uses them; it checks the bytes that went out
against this string after every attempt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from grumem.core.json_text import dumps, sha256_text
from grumem.errors import RequestError

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


def sampling_params(llm: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """Every sampling field, explicitly: servers' defaults differ (llama.cpp is not OpenAI).

    `seed` is the sample index k, so repeated samples are distinct requests."""
    return {
        "temperature": llm["temperature"],
        "top_p": llm["top_p"],
        "max_tokens": llm["max_tokens"],
        "seed": seed,
    }
