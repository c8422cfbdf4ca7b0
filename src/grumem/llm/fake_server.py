"""A scriptable OpenAI-compatible chat server on 127.0.0.1, for tests and benchmarks.

A real HTTP server (aiohttp), started as a subprocess: the client under test
goes through its real transport, retries and timeouts, never an in-process
mock. A script (YAML/JSON file or dict) decides every answer:

- `replies`: rules tried in order, the first whose `match` regex is found in
  the last message's content answers, with fixed `content`, a `sequence`, a
  GRU-Mem `gate` policy or an LLM-`judge` policy; `default` (a rule without
  `match`) answers when none matches, else HTTP 400.
- `faults`: a deterministic share of attempts fail in one of the ways real
  servers do (429, 500, 503, hang, reset, truncated, non_json, length).
- `outage`: every completion answers 503.
- `shapes`: misbehaviours of real servers and proxies, each for the requests
  whose last message its `match` regex finds (every request without one):
  `empty_choices`, `null_content` (200s that are no answer), `sse` (a
  text/event-stream body to a non-streaming request), `echo_authorization`
  (a 200 completion that echoes the request's Authorization header) and
  `not_found` (404 "The model … does not exist", OpenAI's error body). A
  wrong answering model is `model`: the name every completion reports.
- `capacity`: a processor-sharing model of a real server's generation rate.
- `latency_s`: a fixed delay per request.

Response bytes are a function of the request body and the script (plus the
position in a `sequence`): `created` is 0 and the id derives from the body's
sha256, so recorded corpora can be compared byte for byte.

Control endpoints: GET /_fake/stats, POST /_fake/reset, POST /_fake/script.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import ipaddress
import json
import math
import os
import re
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

import yaml
from aiohttp import web

from grumem.config import UniqueKeyLoader
from grumem.errors import GrumemError
from grumem.jsonl import RecordError, atomic_writer, dumps, sha256_bytes
from grumem.template import NO_PREVIOUS_MEMORY
from grumem.tokens import count_tokens

FAULT_KINDS = ("429", "500", "503", "hang", "reset", "truncated", "non_json", "length")
SHAPE_KINDS = ("empty_choices", "null_content", "sse", "echo_authorization", "not_found")
# faults that reject a request before any work, as an overloaded server does
_EARLY_FAULTS = ("429", "503")
# faults after which the client has no usable answer: a `sequence` does not advance
_LOST_FAULTS = ("429", "500", "503", "reset", "truncated", "non_json")
# the gate tags: a section line copied into memory must not close or open one
_GATE_TAGS = re.compile(r"</?(think|check|update|next|memory|section|problem)>")
_PROMPT_RE = re.compile(r"<memory>(.*?)</memory>\s*<section>(.*)</section>", re.DOTALL)
UPDATE_LINE_MAX = 200
NON_JSON_BODY = (
    b"<html><head><title>502 Bad Gateway</title></head>\n"
    b"<body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body>\n"
    b"</html>\n"
)


class FakeServerError(GrumemError):
    pass


# --------------------------------------------------------------------------- script


@dataclass(frozen=True)
class Gate:
    check_if: re.Pattern[str]
    next_if: re.Pattern[str] | None


@dataclass(frozen=True)
class Judge:
    yes_if: re.Pattern[str]


@dataclass(frozen=True)
class Rule:
    """One reply rule; exactly one of content, sequence, gate, judge is set."""

    index: int  # position in `replies`; -1 for `default`
    match: re.Pattern[str] | None
    content: str | None = None
    sequence: tuple[str, ...] | None = None
    gate: Gate | None = None
    judge: Judge | None = None


@dataclass(frozen=True)
class Faults:
    rate: float
    kinds: tuple[str, ...]
    seed: int = 0
    retry_after: float = 0
    hang_s: float = 30
    only_first: bool = False


@dataclass(frozen=True)
class Shape:
    kind: str
    match: re.Pattern[str] | None  # None: every request


@dataclass(frozen=True)
class TokenDist:
    """`fixed` tokens, or a lognormal draw seeded by the request sha."""

    fixed: int | None = None
    mu: float = 0.0
    sigma: float = 0.0
    cap: int | None = None
    seed: int = 0


@dataclass(frozen=True)
class Capacity:
    tokens_per_s: float  # math.inf when unset
    per_request_tps: float  # math.inf when unset
    completion_tokens: TokenDist | None  # None: the reply's own cl100k token count


@dataclass(frozen=True)
class Script:
    model: str = "fake-model"
    replies: tuple[Rule, ...] = ()
    default: Rule | None = None
    faults: Faults | None = None
    outage: bool = False
    capacity: Capacity | None = None
    latency_s: float = 0.0
    shapes: tuple[Shape, ...] = ()


class _Fields:
    """Reads one mapping of the script, naming the field of any bad value."""

    def __init__(self, source: str, prefix: str, value: Any, allowed: Sequence[str]):
        self.source, self.prefix = source, prefix
        if not isinstance(value, Mapping):
            raise self.error(None, f"must be a mapping, got {type(value).__name__}")
        unknown = sorted(set(value) - set(allowed))
        if unknown:
            raise self.error(unknown[0], f"unknown field; allowed: {', '.join(allowed)}")
        self.value = value

    def name(self, key: str | None) -> str | None:
        if key is None:
            return self.prefix or None
        return f"{self.prefix}.{key}" if self.prefix else key

    def error(self, key: str | None, why: str) -> RecordError:
        return RecordError(self.source, None, self.name(key), why)

    def has(self, key: str) -> bool:
        return key in self.value

    def get(
        self, key: str, types: type | tuple[type, ...], default: Any = None, required: bool = False
    ) -> Any:
        if key not in self.value:
            if required:
                raise self.error(key, "is required")
            return default
        v = self.value[key]
        # bool is an int subclass: `rate: true` is a mistake, not 1
        if not isinstance(v, types) or (isinstance(v, bool) and bool not in _as_tuple(types)):
            raise self.error(key, f"must be {_type_names(types)}, got {v!r}")
        return v

    def number(
        self,
        key: str,
        default: float | None = None,
        required: bool = False,
        low: float = 0.0,
        positive: bool = False,
    ) -> float | None:
        v = self.get(key, (int, float), default, required)
        if v is None:
            return None
        if not math.isfinite(v) or v < low or (positive and v <= 0):
            raise self.error(key, f"must be {'> 0' if positive else f'>= {low}'}, got {v!r}")
        return float(v)

    def regex(self, key: str, required: bool = False) -> re.Pattern[str] | None:
        v = self.get(key, str, None, required)
        if v is None:
            return None
        try:
            return re.compile(v)
        except re.error as e:
            raise self.error(key, f"bad regex {v!r}: {e}") from None


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _type_names(types: type | tuple[type, ...]) -> str:
    names = {
        "str": "a string",
        "int": "an integer",
        "float": "a number",
        "bool": "true or false",
        "list": "a list",
        "dict": "a mapping",
    }
    return " or ".join(names.get(t.__name__, t.__name__) for t in _as_tuple(types))


def _rule(source: str, prefix: str, value: Any, index: int, with_match: bool) -> Rule:
    kinds = ("content", "sequence", "gate", "judge")
    f = _Fields(source, prefix, value, (("match",) if with_match else ()) + kinds)
    match = f.regex("match", required=True) if with_match else None
    given = [k for k in kinds if f.has(k)]
    if len(given) != 1:
        raise f.error(None, f"needs exactly one of {', '.join(kinds)}, got {given or 'none'}")
    kind = given[0]
    if kind == "content":
        return Rule(index, match, content=f.get("content", str))
    if kind == "sequence":
        seq = f.get("sequence", list)
        if not seq or not all(isinstance(s, str) for s in seq):
            raise f.error("sequence", "must be a non-empty list of strings")
        return Rule(index, match, sequence=tuple(seq))
    if kind == "gate":
        g = _Fields(source, f.name("gate"), value["gate"], ("check_if", "next_if"))
        return Rule(index, match, gate=Gate(g.regex("check_if", required=True), g.regex("next_if")))
    j = _Fields(source, f.name("judge"), value["judge"], ("yes_if",))
    return Rule(index, match, judge=Judge(j.regex("yes_if", required=True)))


def _faults(source: str, value: Any) -> Faults:
    f = _Fields(
        source, "faults", value, ("rate", "kinds", "seed", "retry_after", "hang_s", "only_first")
    )
    rate = f.number("rate", required=True)
    if rate > 1:
        raise f.error("rate", f"is a probability, must be <= 1, got {rate}")
    raw_kinds = f.get("kinds", list, list(FAULT_KINDS))
    kinds = tuple(str(k) for k in raw_kinds)
    bad = [k for k in kinds if k not in FAULT_KINDS]
    if not kinds or bad:
        raise f.error("kinds", f"must be a non-empty list of {', '.join(FAULT_KINDS)}; bad: {bad}")
    return Faults(
        rate,
        kinds,
        f.get("seed", int, 0),
        f.number("retry_after", 0),
        f.number("hang_s", 30),
        f.get("only_first", bool, False),
    )


def _shapes(source: str, value: Any) -> tuple[Shape, ...]:
    if not isinstance(value, list):
        raise RecordError(source, None, "shapes", f"must be a list, got {value!r}")
    shapes = []
    for i, item in enumerate(value):
        f = _Fields(source, f"shapes[{i}]", item, ("kind", "match"))
        kind = f.get("kind", str, required=True)
        if kind not in SHAPE_KINDS:
            raise f.error("kind", f"must be one of {', '.join(SHAPE_KINDS)}, got {kind!r}")
        shapes.append(Shape(kind, f.regex("match")))
    return tuple(shapes)


def _token_dist(source: str, value: Any) -> TokenDist:
    f = _Fields(
        source, "capacity.completion_tokens", value, ("fixed", "dist", "mu", "sigma", "cap", "seed")
    )
    if f.has("fixed"):
        if len(value) != 1:
            raise f.error("fixed", "cannot be combined with a distribution")
        n = f.get("fixed", int)
        if n < 1:
            raise f.error("fixed", f"must be >= 1, got {n}")
        return TokenDist(fixed=n)
    if f.get("dist", str, required=True) != "lognormal":
        raise f.error("dist", f"must be 'lognormal' (or use fixed), got {value['dist']!r}")
    cap = f.get("cap", int)
    if cap is not None and cap < 1:
        raise f.error("cap", f"must be >= 1, got {cap}")
    return TokenDist(
        None,
        f.number("mu", required=True, low=-math.inf),
        f.number("sigma", required=True),
        cap,
        f.get("seed", int, 0),
    )


def _capacity(source: str, value: Any) -> Capacity:
    f = _Fields(source, "capacity", value, ("tokens_per_s", "per_request_tps", "completion_tokens"))
    total = f.number("tokens_per_s", positive=True)
    per = f.number("per_request_tps", positive=True)
    if total is None and per is None:
        raise f.error(None, "needs tokens_per_s, per_request_tps or both")
    dist = value.get("completion_tokens")
    return Capacity(
        math.inf if total is None else total,
        math.inf if per is None else per,
        None if dist is None else _token_dist(source, dist),
    )


def parse_script(value: Any, source: str = "<script>") -> Script:
    """Validate a script mapping; errors name the source and the field."""
    f = _Fields(
        source,
        "",
        value,
        ("model", "replies", "default", "faults", "outage", "capacity", "latency_s", "shapes"),
    )
    replies = f.get("replies", list, [])
    return Script(
        model=f.get("model", str, "fake-model"),
        replies=tuple(_rule(source, f"replies[{i}]", r, i, True) for i, r in enumerate(replies)),
        default=None
        if "default" not in value
        else _rule(source, "default", value["default"], -1, False),
        faults=None if "faults" not in value else _faults(source, value["faults"]),
        outage=f.get("outage", bool, False),
        capacity=None if "capacity" not in value else _capacity(source, value["capacity"]),
        latency_s=f.number("latency_s", 0.0),
        shapes=_shapes(source, value.get("shapes", [])),
    )


def load_script(source: str | os.PathLike[str] | Mapping[str, Any]) -> Script:
    """A script from a YAML or JSON file, or from a dict."""
    if isinstance(source, Mapping):
        return parse_script(source)
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise FakeServerError(f"cannot read script {path}: {e.strerror}") from None
    try:
        value = yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 (safe); JSON is YAML
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = None if mark is None else mark.line + 1
        raise RecordError(path, line, None, f"not YAML/JSON: {e}") from None
    return parse_script(value, str(path))


# --------------------------------------------------------------------- pure policies


def unit_hash(*parts: object) -> float:
    """A deterministic number in (0, 1) from the parts (never exactly 0 or 1)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return (int.from_bytes(digest[:8], "big") + 0.5) / 2**64


def fault_for(faults: Faults | None, sha: str, attempt: int) -> str | None:
    """The fault of attempt `attempt` (0-based) of the body with this sha, or None."""
    if faults is None or (faults.only_first and attempt > 0):
        return None
    if unit_hash("fault", faults.seed, sha, attempt) >= faults.rate:
        return None
    pick = unit_hash("kind", faults.seed, sha, attempt)
    return faults.kinds[min(int(pick * len(faults.kinds)), len(faults.kinds) - 1)]


def draw_tokens(dist: TokenDist, sha: str) -> int:
    """Completion length for a request: fixed, or lognormal seeded by its sha."""
    if dist.fixed is not None:
        return dist.fixed
    z = NormalDist().inv_cdf(unit_hash("tokens", dist.seed, sha))
    n = max(1, round(math.exp(dist.mu + dist.sigma * z)))
    return n if dist.cap is None else min(n, dist.cap)


def split_prompt(text: str) -> tuple[str, str] | None:
    """(memory, section) of a GRU-Mem prompt as filled, trimmed as the gate parser trims."""
    m = _PROMPT_RE.search(text)
    return None if m is None else (m.group(1).strip(), m.group(2).strip())


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


# ----------------------------------------------------------------- capacity model


@dataclass(eq=False)
class _Job:
    remaining: float
    done: asyncio.Future[None]


class ProcessorSharing:
    """Generation shared equally by in-flight requests, each capped per request.

    Event-driven and exact: between starts and finishes every job runs at
    min(per_request, total / n); a timer fires when the next job completes.
    """

    def __init__(self, total: float, per_request: float):
        self.total, self.per_request = total, per_request
        self.jobs: list[_Job] = []
        self.last = 0.0
        self.timer: asyncio.TimerHandle | None = None

    def rate(self) -> float:
        return min(self.per_request, self.total / max(1, len(self.jobs)))

    async def generate(self, tokens: int) -> None:
        loop = asyncio.get_running_loop()
        if tokens <= 0 or math.isinf(self.rate()):
            return
        self._advance(loop.time())
        job = _Job(float(tokens), loop.create_future())
        self.jobs.append(job)
        self._schedule(loop)
        try:
            await job.done
        finally:
            if job in self.jobs:  # cancelled: its share goes back to the others
                self._advance(loop.time())
                self.jobs.remove(job)
                self._schedule(loop)

    def _advance(self, now: float) -> None:
        if self.jobs:
            progress = self.rate() * (now - self.last)
            for job in self.jobs:
                job.remaining -= progress
        self.last = now

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.jobs:
            first = min(job.remaining for job in self.jobs)
            self.timer = loop.call_at(self.last + max(0.0, first) / self.rate(), self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        self.timer = None
        self._advance(loop.time())
        # a timer may fire a hair early: finish what is within 0.1 ms of done
        slack = self.rate() * 1e-4
        for job in [j for j in self.jobs if j.remaining <= slack]:
            self.jobs.remove(job)
            if not job.done.done():
                job.done.set_result(None)
        self._schedule(loop)


# ----------------------------------------------------------------------- server


@dataclass
class FakeState:
    """The script and the counters the control endpoints expose."""

    script: Script
    requests: int = 0
    answered: int = 0
    by_sha: dict[str, int] = field(default_factory=dict)
    faults: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0
    in_flight_max: int = 0
    positions: dict[int, int] = field(default_factory=dict)  # sequence rule -> next item
    sharing: ProcessorSharing | None = None

    def __post_init__(self) -> None:
        self.set_script(self.script)

    def set_script(self, script: Script) -> None:
        self.script = script
        self.positions = {}
        cap = script.capacity
        self.sharing = (
            None if cap is None else ProcessorSharing(cap.tokens_per_s, cap.per_request_tps)
        )

    def reset(self) -> None:
        self.requests = self.answered = self.in_flight_max = 0
        self.by_sha, self.faults, self.positions = {}, {}, {}

    def stats(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "answered": self.answered,
            "by_sha": self.by_sha,
            "faults": self.faults,
            "in_flight_max": self.in_flight_max,
        }

    def count_fault(self, kind: str) -> None:
        self.faults[kind] = self.faults.get(kind, 0) + 1

    def reply(self, text: str, advance: bool) -> str | None:
        """The scripted content for a last message; None when no rule answers."""
        rule = next((r for r in self.script.replies if r.match.search(text)), self.script.default)
        if rule is None:
            return None
        if rule.content is not None:
            return rule.content
        if rule.sequence is not None:
            pos = self.positions.get(rule.index, 0)
            if advance:
                self.positions[rule.index] = pos + 1
            return rule.sequence[min(pos, len(rule.sequence) - 1)]
        if rule.gate is not None:
            return gate_reply(text, rule.gate)
        assert rule.judge is not None
        return judge_reply(text, rule.judge)


def _json(body: bytes, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(
        body=body, status=status, headers=headers, content_type="application/json", charset="utf-8"
    )


class FakeServer:
    def __init__(self, script: Script):
        self.state = FakeState(script)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.completions)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/health", self.health)
        app.router.add_get("/_fake/stats", self.stats)
        app.router.add_post("/_fake/reset", self.reset)
        app.router.add_post("/_fake/script", self.set_script)
        return app

    async def health(self, request: web.Request) -> web.Response:
        return _json(dumps({"status": "ok"}).encode())

    async def models(self, request: web.Request) -> web.Response:
        model = {
            "id": self.state.script.model,
            "object": "model",
            "created": 0,
            "owned_by": "grumem-fake",
        }
        return _json(dumps({"object": "list", "data": [model]}).encode())

    async def stats(self, request: web.Request) -> web.Response:
        return _json(dumps(self.state.stats()).encode())

    async def reset(self, request: web.Request) -> web.Response:
        self.state.reset()
        return _json(b'{"ok":true}')

    async def set_script(self, request: web.Request) -> web.Response:
        try:
            script = parse_script(json.loads(await request.read()), "POST /_fake/script")
        except (ValueError, RecordError) as e:  # JSONDecodeError is a ValueError
            return _json(error_body(str(e), "invalid_script"), 400)
        self.state.set_script(script)
        return _json(b'{"ok":true}')

    async def completions(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        sha = sha256_bytes(raw)
        st = self.state
        attempt = st.by_sha.get(sha, 0)
        st.by_sha[sha] = attempt + 1
        st.requests += 1
        st.in_flight += 1
        st.in_flight_max = max(st.in_flight_max, st.in_flight)
        try:
            return await self._complete(request, raw, sha, attempt)
        finally:
            st.in_flight -= 1

    async def _complete(
        self, request: web.Request, raw: bytes, sha: str, attempt: int
    ) -> web.StreamResponse:
        # a script swapped in mid-request does not apply to it
        st, script, sharing = self.state, self.state.script, self.state.sharing
        if script.latency_s:
            await asyncio.sleep(script.latency_s)
        if script.outage:
            st.count_fault("outage")
            return _json(
                error_body("service unavailable (scripted outage)", "server_error", 503), 503
            )
        fault = fault_for(script.faults, sha, attempt)
        if fault is not None:
            st.count_fault(fault)
        if fault == "429":
            retry_after = f"{script.faults.retry_after:g}"
            return _json(
                error_body("rate limit reached (scripted fault)", "rate_limit_exceeded", 429),
                429,
                {"Retry-After": retry_after},
            )
        if fault == "503":
            return _json(error_body("server overloaded (scripted fault)", "server_error", 503), 503)
        try:
            request_json = json.loads(raw)
            text = last_message_text(request_json)
            content = st.reply(text, advance=fault not in _LOST_FAULTS)
        except (ValueError, BadRequest) as e:  # bad JSON, bad shape, gate rule on a non-prompt
            return _json(error_body(str(e), "invalid_request_error"), 400)
        if content is None:
            return _json(
                error_body(
                    "no scripted reply matches the last message and the script has no default",
                    "invalid_request_error",
                ),
                400,
            )
        shape = next((x for x in script.shapes if x.match is None or x.match.search(text)), None)
        if shape is not None:
            st.count_fault(shape.kind)
            return shaped_response(shape.kind, request, request_json, sha, script.model, content)
        finish = "stop"
        if fault == "length":
            content, finish = content[: len(content) // 2], "length"
        tokens = count_tokens(content)
        cap = script.capacity
        if cap is not None and cap.completion_tokens is not None:
            tokens = draw_tokens(cap.completion_tokens, sha)
            if fault == "length":
                tokens = max(1, tokens // 2)
        if fault == "hang":
            await asyncio.sleep(script.faults.hang_s)
        if sharing is not None:
            await sharing.generate(tokens)
        if fault == "500":
            return _json(
                error_body("internal server error (scripted fault)", "server_error", 500), 500
            )
        if fault == "non_json":
            return web.Response(
                body=NON_JSON_BODY, status=200, content_type="text/html", charset="utf-8"
            )
        prompt_tokens = sum(count_tokens(message_text(m)) for m in request_json["messages"])
        body = completion_body(sha, script.model, content, prompt_tokens, tokens, finish)
        if fault == "truncated":
            return _json(body[: len(body) // 2])
        if fault == "reset":
            return await _reset_mid_body(request, body)
        st.answered += 1
        return _json(body)


def shaped_response(
    kind: str, request: web.Request, request_json: dict, sha: str, model: str, content: str
) -> web.Response:
    """One of the scripted misbehaviours (SHAPE_KINDS) answering a completion."""
    if kind == "not_found":
        asked = request_json.get("model")
        return _json(
            error_body(
                f"The model `{asked}` does not exist or you do not have access to it.",
                "invalid_request_error",
                "model_not_found",
            ),
            404,
        )
    data = json.loads(completion_body(sha, model, content, 0, 0))
    if kind == "empty_choices":
        data["choices"] = []
    elif kind == "null_content":
        data["choices"][0]["message"]["content"] = None
    elif kind == "echo_authorization":
        # a debugging proxy that shows what it received
        data["received_headers"] = {"authorization": request.headers.get("Authorization")}
    else:  # sse: what a streaming server sends, to a request that did not ask for it
        chunk = {**data, "object": "chat.completion.chunk"}
        chunk["choices"] = [{"index": 0, "delta": {"content": content}, "finish_reason": "stop"}]
        body = f"data: {dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
        return web.Response(body=body, status=200, content_type="text/event-stream")
    return _json(dumps(data).encode("utf-8"))


async def _reset_mid_body(request: web.Request, body: bytes) -> web.StreamResponse:
    """Send the headers and half the body, then drop the connection."""
    resp = web.StreamResponse(status=200)
    resp.content_type, resp.charset = "application/json", "utf-8"
    resp.content_length = len(body)
    await resp.prepare(request)
    await resp.write(body[: len(body) // 2])
    transport = request.transport
    if transport is not None:
        # abort() drops what is still buffered: let the half body reach the kernel first
        for _ in range(1000):
            if transport.is_closing() or transport.get_write_buffer_size() == 0:
                break
            await asyncio.sleep(0.001)
        transport.abort()
    return resp


# -------------------------------------------------------------------------- main


def check_host(host: str) -> str:
    """The loopback address to bind; anything else is refused (tests never leave the host)."""
    if host == "localhost":
        return "127.0.0.1"
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise FakeServerError(
            f"refusing to bind {host!r}: the fake server only listens on a "
            "loopback address (127.0.0.1, ::1)"
        )
    return host


async def serve(script: Script, host: str, port: int, port_file: str | None = None) -> None:
    """Serve until SIGTERM or SIGINT; announce the address on stdout once bound."""
    host = check_host(host)
    count_tokens("")  # load the encoding now, not inside the first timed request
    runner = web.AppRunner(FakeServer(script).app(), access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0][1]
        if port_file:
            with atomic_writer(port_file) as f:
                f.write(f"{bound}\n")
        shown = f"[{host}]" if ":" in host else host
        print(f"listening http://{shown}:{bound}/v1", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--script", required=True, help="the script, a YAML or JSON file")
    p.add_argument("--host", default="127.0.0.1", help="a loopback address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port; 0 picks a free one (default)")
    p.add_argument("--port-file", default=None, help="also write the bound port to this file")


def run(args: argparse.Namespace) -> int:
    check_host(args.host)
    script = load_script(args.script)
    try:
        asyncio.run(serve(script, args.host, args.port, args.port_file))
    except OSError as e:
        raise FakeServerError(f"cannot listen on {args.host}:{args.port}: {e.strerror}") from None
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m grumem.llm.fake_server", description=__doc__.splitlines()[0]
    )
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except GrumemError as e:
        print(f"fake_server: error: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
