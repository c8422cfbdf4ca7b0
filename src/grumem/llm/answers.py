"""What counts as an answer, what a server said when it gave none, and which model answered.

- An answer is HTTP 200 with a non-empty `choices[0].message.content` or
  `refusal` (is_answer). Anything else is a failed attempt, retried and
  never cached, so that a server fault is never replayed as the model's.
- A non-200 attempt's error names the server's own error text, on one line
  ("HTTP 404: The model … does not exist"; server_error_text).
- The model that answered is checked against the request's: a mismatch is an
  error unless `llm.accept_models` allows the name (servers that rename).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from grumem.core.json_text import stdlib_loads
from grumem.errors import ModelMismatch

SERVER_ERROR_CHARS = 300  # of a server's error text shown in an attempt's error


def is_answer(status: int | None, content: bytes) -> tuple[bool, str | None]:
    """A final answer is HTTP 200 with a JSON body whose choices[0].message holds a
    non-empty string `content`, or a non-empty string `refusal` (OpenAI's documented
    field for a model that declines: a decision of the model, recorded as such).

    Anything else (empty `choices`, `content: null` or "", a text/event-stream
    body) is a failed attempt: retried, never cached, so that a server fault is
    never replayed forever as the model's format failure."""
    if status != 200:
        return False, None
    try:
        data = stdlib_loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        if content.lstrip().startswith((b"data:", b"event:", b":")):
            return False, "HTTP 200 but the body is a text/event-stream, not one JSON completion"
        return False, f"HTTP 200 but the body is not JSON: {e}"
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices:
        return False, "HTTP 200 but the body has no choices[0].message (no choices)"
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    if not isinstance(message, dict):
        return False, "HTTP 200 but the body has no choices[0].message"
    for name in ("content", "refusal"):
        value = message.get(name)
        if isinstance(value, str) and value:
            return True, None
    shown = json.dumps(message.get("content"))[:40]
    return False, f"HTTP 200 but choices[0].message.content is {shown}, not a non-empty string"


def server_error_text(status: int, content: bytes | None) -> str:
    """`HTTP <status>` and the server's own error text, on one line: OpenAI's
    {"error": {"message"}}, vLLM's {"message"}, FastAPI's {"detail"}, else the body."""
    text = ""
    if content:
        try:
            data = stdlib_loads(content)
        except (UnicodeDecodeError, json.JSONDecodeError):
            data = None
        if isinstance(data, dict):
            error = data.get("error")
            if isinstance(error, dict):
                error = error.get("message")
            for value in (error, data.get("message"), data.get("detail")):
                if isinstance(value, str) and value.strip():
                    text = value
                    break
        if not text:
            text = content.decode("utf-8", errors="replace")
    text = " ".join(text.split())
    if len(text) > SERVER_ERROR_CHARS:
        text = text[: SERVER_ERROR_CHARS - 1] + "…"
    return f"HTTP {status}: {text}" if text else f"HTTP {status}"


def response_model(content: bytes | str) -> str | None:
    """The `model` an answer names; None when the body names none."""
    try:
        data = stdlib_loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    model = data.get("model") if isinstance(data, dict) else None
    return model if isinstance(model, str) else None


def model_accepted(asked: str, answered: str | None, accept: Iterable[str]) -> bool:
    """The answer's model is the one asked for, or allowed by `llm.accept_models`:
    an exact name, or a prefix rule ending in `*` (`*` alone accepts any name)."""
    if answered == asked:
        return True
    if answered is None:
        return "*" in accept
    return any(
        answered.startswith(rule[:-1]) if rule.endswith("*") else answered == rule
        for rule in accept
    )


def model_mismatch(request: str, asked: str, answered: str | None, kept: str) -> ModelMismatch:
    """The error for an answer to `request` (its name) from a model not accepted;
    `kept` says where the answer is kept, if anywhere."""
    named = "names no model" if answered is None else f"is from model {answered!r}"
    allow = "'*'" if answered is None else f"{answered!r} (or a prefix rule such as 'name*')"
    return ModelMismatch(
        f"{request} asked for model {asked!r} but the answer {named}; "
        f"{kept}. Point llm.base_url at a server that serves that "
        f"model, or, if the server only renames it (vLLM --served-model-name), add {allow} to "
        "llm.accept_models"
    )
