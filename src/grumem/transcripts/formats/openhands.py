"""OpenHands event streams: a JSON array of serialized events, one conversation per file.

Read from OpenHands 0.x (`openhands/events/serialization/event.py`,
`event_to_dict`, All-Hands-AI/OpenHands main of 2025; the V0 event stream
the web app downloads as a trajectory and the evaluation harness writes).
The V1 SDK layout (events with a `kind` discriminator) is not this format.

Every event has `id`, `timestamp`, `source` (`user`, `agent`, `environment`)
and a derived one-line `message` (a UI summary, never rendered). An action
event has `action` and `args`; an observation event has `observation`,
`content`, `extras` and `cause` (the id of the action it answers). Events
produced by a function call carry `tool_call_metadata` (`function_name`,
`tool_call_id`, and `model_response`: the whole chat completion, repeated on
every action of that response and on each observation).

Decisions:
- `message` actions: from the user -> user record, from the agent ->
  assistant record, from the environment -> system record; `image_urls`
  become placeholders after the text. An empty message is bookkeeping.
- `system` action -> system record of `args.content` (its tool list is
  configuration, not text).
- Any other action (run, run_ipython, edit, read, write, browse_interactive,
  think, finish, mcp, delegate, ...) -> one assistant record: the visible
  `args.thought` (OpenHands puts the model's text on the first action of a
  response only, so it is kept once), then `Tool call <name>: <args>` where
  name is the function name from `tool_call_metadata` (the action kind
  otherwise) and args are the action's arguments without the thought and
  without OpenHands' own bookkeeping flags (BOOKKEEPING_ARGS).
  `args.reasoning_content`, when present, is thinking (kept unless dropped).
  Such an action from the user (a command typed in the app's terminal) is a
  user record of the same text.
- Observations -> tool_result record of `content` (an empty output is still
  the answer); its source names `cause`, the observation kind and the tool
  call it answers. `extras` (exit code, paths, the old and new file of an
  edit) are metadata or repeat the action, and are not rendered.
- Dropped and counted by kind: `change_agent_state` and `recall` actions
  and `recall` observations (their `content` is a UI note; the workspace and
  microagent context OpenHands renders from `extras` is the harness's, not
  text of the conversation), `agent_state_changed` observations, empty
  `null` observations, empty messages. `model_response` repeats the thought
  and the call and is never rendered.
"""

from __future__ import annotations

import os
from typing import Any

from grumem.errors import RecordError
from grumem.transcripts.base import (
    Detection,
    Head,
    NotThisFormat,
    Session,
    data_url_placeholder,
    is_not,
    load_json_document,
    record,
    require,
    session_stem,
    thinking_text,
    tool_call_text,
)

NAME = "openhands"
SUFFIXES = (".json",)
SOURCES = ("user", "agent", "environment")
BOOKKEEPING_ACTIONS = frozenset({"change_agent_state", "recall"})
BOOKKEEPING_OBSERVATIONS = frozenset({"agent_state_changed", "recall"})
# flags OpenHands sets on actions for its runtime and UI; the model never wrote them
BOOKKEEPING_ARGS = frozenset(
    {
        "thought",
        "reasoning_content",
        "blocking",
        "is_input",
        "hidden",
        "confirmation_state",
        "security_risk",
        "impl_source",
        "is_confirmed",
        "include_extra",
        "kernel_init_code",
        "wait_for_response",
        "image_urls",
        "file_urls",
        "keep_prompt",
        "translated_ipython_code",
    }
)


def _is_event(e: Any) -> bool:
    return isinstance(e, dict) and ("action" in e or "observation" in e) and "source" in e


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    doc = head.document
    if not isinstance(doc, list) or not doc:
        return NotThisFormat(is_not("the file", doc, "a non-empty JSON array of events"))
    for i, e in enumerate(doc):
        if not _is_event(e):
            return NotThisFormat(f"[{i}] is not an event with source and action or observation")
    return True


def read(path: str | os.PathLike[str], drop_thinking: bool) -> list[Session]:
    path = str(path)
    doc = load_json_document(path)
    if not isinstance(doc, list):
        raise RecordError(path, None, None, "expected a JSON array of OpenHands events")
    session = Session(session_stem(path, SUFFIXES))
    for i, event in enumerate(doc):
        where = f"[{i}]."
        if not isinstance(event, dict):
            raise RecordError(path, None, f"[{i}]", "expected an event object")
        source_name = require(event, "source", str, path, None, where)
        if source_name not in SOURCES:
            raise RecordError(
                path,
                None,
                f"{where}source",
                f"unknown source {source_name!r}; expected one of {', '.join(SOURCES)}",
            )
        src: dict[str, Any] = {"file": path, "index": i}
        if isinstance(event.get("id"), int):
            src["event_id"] = event["id"]
        if "action" in event:
            _action(event, source_name, where, path, src, drop_thinking, session)
        elif "observation" in event:
            _observation(event, where, path, src, session)
        else:
            raise RecordError(
                path, None, f"{where}action", "missing: neither action nor observation"
            )
    return [session]


def _action(
    event: dict,
    source_name: str,
    where: str,
    path: str,
    src: dict[str, Any],
    drop_thinking: bool,
    session: Session,
) -> None:
    kind = require(event, "action", str, path, None, where)
    args = require(event, "args", dict, path, None, where)
    if kind in BOOKKEEPING_ACTIONS:
        session.skipped[f"action:{kind}"] += 1
        return
    awhere = f"{where}args."
    if kind == "message":
        content = require(args, "content", str, path, None, awhere)
        parts = [content] if content else []
        parts.extend(_image_parts(args, awhere, path))
        if not parts:
            session.skipped["empty message"] += 1
            return
        role = {"user": "user", "agent": "assistant", "environment": "system"}[source_name]
        session.records.append(record(role, "\n\n".join(parts), src))
        return
    if kind == "system":
        content = require(args, "content", str, path, None, awhere)
        if content:
            session.records.append(record("system", content, src))
        else:
            session.skipped["empty system message"] += 1
        return
    parts = []
    reasoning = args.get("reasoning_content")
    if reasoning is not None and not isinstance(reasoning, str):
        raise RecordError(path, None, f"{awhere}reasoning_content", "expected a string")
    if reasoning:
        if drop_thinking:
            session.skipped["thinking"] += 1
        else:
            parts.append(thinking_text(reasoning))
    thought = args.get("thought", "")
    if not isinstance(thought, str):
        raise RecordError(path, None, f"{awhere}thought", "expected a string")
    if thought:
        parts.append(thought)
    meta = _tool_call_metadata(event, where, path)
    name = meta.get("function_name", kind)
    shown = {k: v for k, v in args.items() if k not in BOOKKEEPING_ARGS}
    parts.append(tool_call_text(name, shown))
    if "tool_call_id" in meta:
        src = {**src, "tool_call_id": meta["tool_call_id"]}
    # a command the user ran in the app's terminal is the user's, not the model's
    role = "user" if source_name == "user" else "assistant"
    session.records.append(record(role, "\n\n".join(parts), {**src, "action": kind}))


def _observation(event: dict, where: str, path: str, src: dict[str, Any], session: Session) -> None:
    kind = require(event, "observation", str, path, None, where)
    content = event.get("content", "")
    if not isinstance(content, str):
        raise RecordError(path, None, f"{where}content", "expected a string")
    if kind in BOOKKEEPING_OBSERVATIONS or (kind == "null" and not content):
        session.skipped[f"observation:{kind}"] += 1
        return
    src = {**src, "observation": kind}
    if isinstance(event.get("cause"), int):
        src["cause"] = event["cause"]
    meta = _tool_call_metadata(event, where, path)
    if "function_name" in meta:
        src["tool"] = meta["function_name"]
    if "tool_call_id" in meta:
        src["tool_call_id"] = meta["tool_call_id"]
    session.records.append(record("tool_result", content, src))


def _tool_call_metadata(event: dict, where: str, path: str) -> dict[str, str]:
    """function_name and tool_call_id; the model_response beside them is a duplicate."""
    meta = event.get("tool_call_metadata")
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise RecordError(path, None, f"{where}tool_call_metadata", "expected an object")
    mwhere = f"{where}tool_call_metadata."
    return {
        "function_name": require(meta, "function_name", str, path, None, mwhere),
        "tool_call_id": require(meta, "tool_call_id", str, path, None, mwhere),
    }


def _image_parts(args: dict, where: str, path: str) -> list[str]:
    urls = args.get("image_urls") or []
    if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
        raise RecordError(path, None, f"{where}image_urls", "expected a list of strings")
    return [data_url_placeholder("image", u) for u in urls]
