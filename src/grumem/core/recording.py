"""The recording's integrity: request and response sha checks, chat content from a body.

The `gates` stage, the export and the judge all read recorded exchanges; all
check them through these functions, so a check cannot be skipped in one and
kept in another, and a body means the same to each: its content is parsed
from the raw bytes, so a body that is not UTF-8 is no chat completion anywhere
(its U+FFFD text is for people only). A response attempt stores its raw body losslessly: `body` is
the text, and when the raw bytes are not valid UTF-8 `body_b64` holds them
(base64) while `body` shows them decoded with U+FFFD, for people reading.
The sha256 is always over the raw bytes, so it can always be checked.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any

from grumem.core.json_text import loads, sha256_bytes, sha256_text
from grumem.errors import RecordError
from grumem.records.base import or_none
from grumem.records.response import Attempt, Request

if TYPE_CHECKING:
    from os import PathLike


def stored_body(raw: bytes) -> dict[str, str]:
    """`body` (and `body_b64` when the bytes are not UTF-8) for a response attempt."""
    try:
        return {"body": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {
            "body": raw.decode("utf-8", errors="replace"),
            "body_b64": base64.b64encode(raw).decode("ascii"),
        }


def response_bytes(response: Attempt) -> bytes | None:
    """The raw body bytes of a recorded attempt; None when no body arrived.

    ValueError when `body_b64` is not base64 or `body` is not its decoding."""
    return raw_body(response.body, or_none(response.body_b64))


def raw_body(body: str | None, b64: str | None) -> bytes | None:
    """The raw bytes of a stored body: `body` as UTF-8, or `b64` (base64) when given,
    `body` then being their decoding with U+FFFD; None when no body arrived."""
    if b64 is None:
        return None if body is None else body.encode("utf-8")
    try:
        raw = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"body_b64 is not base64: {e}") from None
    if body != raw.decode("utf-8", errors="replace"):
        raise ValueError("body is not the text of body_b64")
    return raw


def check_request(path: str | PathLike[str], line: int | None, request: Request) -> str:
    """The recorded request body, after checking it against its sha256."""
    body = request.body
    if sha256_text(body) != request.sha256:
        raise RecordError(
            path,
            line,
            "request.sha256",
            "the recorded request body does not match its sha256: the recording was altered"
            " or is corrupt. A prompt is never re-assembled; re-record this run"
            " (or restore the file) instead",
        )
    return body


def check_response(path: str | PathLike[str], line: int | None, response: Attempt) -> bytes | None:
    """The recorded response body's raw bytes, after checking them against their sha256."""
    try:
        raw = response_bytes(response)
    except ValueError as e:
        raise RecordError(path, line, "response.body_b64", str(e)) from None
    if raw is None:
        return None
    if sha256_bytes(raw) != response.sha256:
        raise RecordError(
            path,
            line,
            "response.sha256",
            "the recorded response body does not match its sha256: the recording was"
            " altered or is corrupt; re-record this run (or restore the file)",
        )
    return raw


# what chat_content raises for a body that holds no chat completion
NOT_A_CHAT_COMPLETION = (ValueError, KeyError, IndexError, TypeError)


def body_json(body: str | bytes) -> Any:
    """A recorded body parsed for its strings (messages, content): orjson, or the
    stdlib's value or error where orjson refuses it; a NestingError (a ValueError)
    past MAX_JSON_DEPTH. orjson may read an integer past 64 bits as a float: no
    string read from a body can change by that, and the guard cost a pass over
    every body."""
    return loads(body, exact_integers=False)


def chat_content(body: str | bytes) -> tuple[str, str | None]:
    """(content, finish_reason) of an OpenAI chat.completion body; ValueError if it has none."""
    data = body_json(body)
    choice = data["choices"][0]
    content = choice["message"]["content"]
    if not isinstance(content, str):
        raise ValueError("choices[0].message.content is not a string")
    return content, choice.get("finish_reason")


def recorded_content(
    path: str | PathLike[str], line: int | None, response: Attempt | None
) -> str | None:
    """The assistant text of a recorded response, derived from its sha-checked body;
    None when the body holds no chat content (a failure, recorded as such)."""
    if response is None:
        return None
    raw = check_response(path, line, response)
    if raw is None or response.status != 200:
        return None
    try:
        return chat_content(raw)[0]
    except NOT_A_CHAT_COMPLETION:
        return None
