"""What the fake server answers, as pure functions of the request and the script.

The bytes of a completion depend on the request body and the script only:
`created` is 0 and the id derives from the body's sha256, so recorded
corpora can be compared byte for byte.
"""

from __future__ import annotations

import json
import re
from typing import Any

from support.script import Gate, Judge, Rule

# the template's memory placeholder at t=1: the fake reads the prompt as a model would
NO_PREVIOUS_MEMORY = "No previous memory"
# the gate tags: a section line copied into memory must not close or open one
_GATE_TAGS = re.compile(r"</?(think|check|update|next|memory|section|problem)>")
_PROMPT_RE = re.compile(r"<memory>(.*?)</memory>\s*<section>(.*)</section>", re.DOTALL)
UPDATE_LINE_MAX = 200


def dumps(value: Any) -> str:
    """Compact UTF-8 JSON, key order kept: the bytes a recorded corpus pins."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def split_prompt(text: str) -> tuple[str, str] | None:
    """(memory, section) of a GRU-Mem prompt as filled, trimmed as the gate parser trims."""
    m = _PROMPT_RE.search(text)
    return None if m is None else (m.group(1).strip(), m.group(2).strip())


def seed_matches(rule: Rule, seed: Any) -> bool:
    """Whether a rule answers a request with this `seed`: any seed when the rule names
    none, else exactly its integer (a JSON true or 1.0 is not the seed 1)."""
    if rule.seed is None:
        return True
    return type(seed) is int and seed == rule.seed


def gate_reply(text: str, gate: Gate) -> str:
    """The four-tag answer of the scripted gate policy to one GRU-Mem prompt."""
    parts = split_prompt(text)
    if parts is None:
        raise ValueError(
            "a gate rule matched a message without <memory>…</memory> <section>…</section>"
        )
    memory, section = parts
    check = gate.check_if.search(section) is not None
    end = gate.next_if is not None and gate.next_if.search(section) is not None
    update = memory  # `no`: the previous memory verbatim, as the template asks
    if check:
        first = next((ln.strip() for ln in section.splitlines() if ln.strip()), "")
        # tags in the copied line would make the answer unparseable, or would
        # end the <memory> slot early in the next prompt
        line = _GATE_TAGS.sub(lambda m: m.group(0).replace("<", "&lt;"), first[:UPDATE_LINE_MAX])
        kept = "" if memory == NO_PREVIOUS_MEMORY else memory
        update = (kept + "\n" if kept else "") + "- " + line
    think = f"fake gate: the section {'matches' if check else 'does not match'} check_if" + (
        "" if gate.next_if is None else f"; it {'matches' if end else 'does not match'} next_if"
    )
    return (
        f"<think>{think}</think>\n<check>{'yes' if check else 'no'}</check>\n"
        f"<update>{update}</update>\n<next>{'end' if end else 'continue'}</next>"
    )


def judge_reply(text: str, judge: Judge) -> str:
    yes = judge.yes_if.search(text) is not None
    think = f"fake judge: the message {'matches' if yes else 'does not match'} yes_if"
    return f"<think>{think}</think>\n<evidence>{'yes' if yes else 'no'}</evidence>"


class BadRequest(ValueError):
    pass


def last_message_text(request: Any) -> str:
    """The text of the last message of a chat request; BadRequest if it has none."""
    if not isinstance(request, dict):
        raise BadRequest("the request body must be a JSON object")
    if request.get("stream"):
        raise BadRequest("the fake server does not stream; send stream=false")
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    return message_text(messages[-1])


def message_text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        return "".join(p.get("text", "") for p in content if p.get("type") == "text")
    raise BadRequest("each message needs 'content', a string or a list of text parts")


def completion_body(
    sha: str,
    model: str,
    content: str,
    prompt_tokens: int,
    completion_tokens: int,
    finish_reason: str = "stop",
) -> bytes:
    """An OpenAI chat.completion, byte-stable: no clock, no random id."""
    return dumps(
        {
            "id": f"chatcmpl-{sha[:32]}",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    ).encode("utf-8")


def error_body(message: str, type_: str, code: int | str | None = None) -> bytes:
    return dumps(
        {"error": {"message": message, "type": type_, "param": None, "code": code}}
    ).encode("utf-8")
