"""The API key: read from its environment variable, and kept out of every text and record.

- The key is checked when it is read (printable ASCII, no control
  character): a trailing newline would end up quoted in the SDK's header
  error. The variable's name is checked too, and never shown: a value that is
  not a variable name may be the key pasted in its place.
- Every form of the key (raw, repr, bytes repr, JSON, URL-encoded) is
  scrubbed from error texts.
- A response body holding the key (a server echoing the Authorization
  header) is refused: never cached, never recorded.

The key lives only in an ApiKey (its repr shows the variable, never the
value) and in the SDK's headers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import quote, quote_plus

from grumem.config.settings import ENV_VAR_NAME
from grumem.errors import KeyInResponse, LLMError

NO_KEY = "sk-no-key"  # local servers ignore the key; the SDK insists on one
SCRUBBED = "[api key]"


def read_api_key(env_name: str) -> str:
    """The API key from the environment variable `env_name`; NO_KEY when unset or empty.

    Never shows the value: a name that is not a variable name may be a key
    pasted in its place, and a key with a control character (a trailing
    newline from `$(cat keyfile)`) would be quoted in full by the SDK's
    "Illegal header value" error."""
    if not ENV_VAR_NAME.match(env_name):
        raise LLMError(
            "llm.api_key_env must be the NAME of an environment variable "
            "(letters, digits, _; not starting with a digit); the value given is not "
            "shown, in case it is the key itself"
        )
    key = os.environ.get(env_name)
    if not key:
        return NO_KEY
    for i, ch in enumerate(key, start=1):
        if not "!" <= ch <= "~":
            what = f"U+{ord(ch):04X}" if ch.isascii() else "a non-ASCII character"
            raise LLMError(
                f"the API key in ${env_name} has {what} at character {i} of {len(key)} "
                "(a trailing newline from a key file?); API keys are printable ASCII "
                "without spaces: strip it (export "
                f"{env_name}=\"$(tr -d '[:space:]' < keyfile)\"); the key is not shown"
            )
    return key


def secret_forms(key: str) -> tuple[str, ...]:
    """Every way an error text or a body may spell the key, longest first."""
    raw = key.encode("utf-8", "backslashreplace")
    forms = {
        key,
        key.strip(),
        repr(key)[1:-1],
        key.encode("unicode_escape").decode("ascii"),
        repr(raw)[2:-1],
        json.dumps(key)[1:-1],
        json.dumps(key, ensure_ascii=False)[1:-1],
        quote(key, safe=""),
        quote(key),
        quote_plus(key),
    }
    return tuple(sorted((f for f in forms if f), key=len, reverse=True))


def scrub(text: str, forms: Iterable[str]) -> str:
    """`text` with every one of `forms` replaced by SCRUBBED (longest first: see secret_forms)."""
    for form in forms:
        text = text.replace(form, SCRUBBED)
    return text


@dataclass(frozen=True)
class ApiKey:
    """The key of `$env_name` (NO_KEY when unset), with the forms to scrub (none for NO_KEY)."""

    env_name: str
    value: str = field(repr=False)
    forms: tuple[str, ...] = field(repr=False)

    @classmethod
    def from_env(cls, env_name: str) -> ApiKey:
        value = read_api_key(env_name)
        return cls(env_name, value, () if value == NO_KEY else secret_forms(value))

    def scrub(self, text: str) -> str:
        return scrub(text, self.forms)

    def echoed_in(self, body: bytes | str) -> bool:
        """Whether `body` (a response, raw or as recorded) holds any form of the key."""
        if isinstance(body, bytes):
            return any(f.encode("utf-8") in body for f in self.forms)
        return any(f in body for f in self.forms)

    def echoed(self, request: str, status: int | None, kept: str) -> KeyInResponse:
        """The error for a response to `request` (its name) that echoed the key;
        `kept` says where the response is kept, if anywhere."""
        return KeyInResponse(
            f"{request}: the response (HTTP {status}) contains the API "
            f"key of ${self.env_name}; nothing of it was recorded and "
            f"{kept}. The server (or a proxy) echoes the Authorization "
            "header: fix it before running again, and rotate the key if the server is "
            "not yours"
        )
