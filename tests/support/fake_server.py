"""A scriptable OpenAI-compatible chat server on 127.0.0.1, for tests and benchmarks.

A real HTTP server (aiohttp), started as a subprocess (support.harness): the
client under test goes through its real transport, retries and timeouts,
never an in-process mock. A script (support.script, its format in
fake_script.schema.yaml) decides every answer:

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
  (a 200 completion that echoes the request's Authorization header),
  `not_found` (404 "The model … does not exist", OpenAI's error body) and
  `huge_body` (a 200 completion of `bytes` bytes, streamed piece by piece
  without being built: stats' `streamed_bytes` counts what was written
  before the client hung up). A wrong answering model is `model`: the name
  every completion reports.
- `capacity`: a processor-sharing model of a real server's generation rate.
- `latency_s`: a fixed delay per request.

Control endpoints: GET /_fake/stats, POST /_fake/reset, POST /_fake/script.

    python -m support.fake_server --script FILE [--port 0] [--port-file FILE]

(with tests/ on PYTHONPATH) prints `listening http://127.0.0.1:PORT/v1` once
bound and serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import ipaddress
import json
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from grumem.io.tokenizer import cl100k_tokens
from support.capacity import ProcessorSharing
from support.draws import draw_tokens, fault_for
from support.replies import (
    BadRequest,
    completion_body,
    dumps,
    error_body,
    gate_reply,
    judge_reply,
    last_message_text,
    message_text,
    seed_matches,
)
from support.script import Script, ScriptError, Shape, load_script, parse_script

TOKENS = cl100k_tokens()

# faults after which the client has no usable answer: a `sequence` does not advance
_LOST_FAULTS = ("429", "500", "503", "reset", "truncated", "non_json")
NON_JSON_BODY = (
    b"<html><head><title>502 Bad Gateway</title></head>\n"
    b"<body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body>\n"
    b"</html>\n"
)


class FakeServerError(Exception):
    """The server cannot start: a non-loopback host, a port in use."""


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
    streamed_bytes: int = 0  # of huge_body answers, as written to the socket
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
        self.requests = self.answered = self.in_flight_max = self.streamed_bytes = 0
        self.by_sha, self.faults, self.positions = {}, {}, {}

    def stats(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "answered": self.answered,
            "by_sha": self.by_sha,
            "faults": self.faults,
            "in_flight_max": self.in_flight_max,
            "streamed_bytes": self.streamed_bytes,
        }

    def count_fault(self, kind: str) -> None:
        self.faults[kind] = self.faults.get(kind, 0) + 1

    def reply(self, text: str, seed: Any, advance: bool) -> str | None:
        """The scripted content for a last message and the request's `seed`; None when
        no rule answers."""
        rule = next(
            (r for r in self.script.replies if r.match.search(text) and seed_matches(r, seed)),
            self.script.default,
        )
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
        except ValueError as e:  # a ScriptError or a JSONDecodeError
            return _json(error_body(str(e), "invalid_script"), 400)
        self.state.set_script(script)
        return _json(b'{"ok":true}')

    async def completions(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        sha = hashlib.sha256(raw).hexdigest()
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
            return _json(
                error_body("server overloaded (scripted fault)", "server_error", 503),
                503,
                {"Retry-After": f"{script.faults.retry_after:g}"},
            )
        try:
            request_json = json.loads(raw)
            text = last_message_text(request_json)
            content = st.reply(text, request_json.get("seed"), advance=fault not in _LOST_FAULTS)
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
            if shape.kind == "huge_body":
                return await stream_huge_body(request, shape, sha, script.model, st)
            return shaped_response(shape.kind, request, request_json, sha, script.model, content)
        finish = "stop"
        if fault == "length":
            content, finish = content[: len(content) // 2], "length"
        tokens = TOKENS.count(content)
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
        prompt_tokens = sum(TOKENS.count(message_text(m)) for m in request_json["messages"])
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


async def stream_huge_body(
    request: web.Request, shape: Shape, sha: str, model: str, st: FakeState
) -> web.StreamResponse:
    """A 200 completion of `shape.bytes` bytes (its content padded with `x`), written
    piece by piece from one reused piece: the size costs the server no memory."""
    mark = "\x00"  # where the padding goes: a character completion_body escapes uniquely
    head, tail = completion_body(sha, model, mark, 0, 0).split(b"\\u0000")
    fill = shape.bytes - len(head) - len(tail)
    if fill < 0:
        raise ValueError(f"huge_body: {shape.bytes} bytes cannot hold a completion")
    resp = web.StreamResponse(status=200)
    resp.content_type, resp.charset = "application/json", "utf-8"
    if shape.content_length:
        resp.content_length = shape.bytes
    else:
        resp.enable_chunked_encoding()
    piece = b"x" * min(shape.piece_bytes, max(fill, 1))
    try:
        await resp.prepare(request)
        await _write_counted(resp, head, st)
        while fill > 0:
            await _write_counted(resp, piece if fill >= len(piece) else piece[:fill], st)
            fill -= len(piece)
            if shape.piece_delay_s:
                await asyncio.sleep(shape.piece_delay_s)
        await _write_counted(resp, tail, st)
        await resp.write_eof()
    except ConnectionError:  # the client hung up: what it was sent is counted
        pass
    return resp


async def _write_counted(resp: web.StreamResponse, data: bytes, st: FakeState) -> None:
    await resp.write(data)
    st.streamed_bytes += len(data)


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


def write_port_file(path: Path, port: int) -> None:
    """The port, written whole or not at all: a reader polling the file never sees half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{port}\n", encoding="utf-8")
    os.replace(tmp, path)


async def serve(script: Script, host: str, port: int, port_file: str | None = None) -> None:
    """Serve until SIGTERM or SIGINT; announce the address on stdout once bound."""
    host = check_host(host)
    TOKENS.count("")  # load the encoding now, not inside the first timed request
    runner = web.AppRunner(FakeServer(script).app(), access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0][1]
        if port_file:
            write_port_file(Path(port_file), bound)
        shown = f"[{host}]" if ":" in host else host
        print(f"listening http://{shown}:{bound}/v1", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m support.fake_server", description=__doc__.splitlines()[0]
    )
    p.add_argument("--script", required=True, help="the script, a YAML or JSON file")
    p.add_argument("--host", default="127.0.0.1", help="a loopback address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port; 0 picks a free one (default)")
    p.add_argument("--port-file", default=None, help="also write the bound port to this file")
    args = p.parse_args(argv)
    try:
        check_host(args.host)
        script = load_script(args.script)
        try:
            asyncio.run(serve(script, args.host, args.port, args.port_file))
        except OSError as e:
            raise FakeServerError(
                f"cannot listen on {args.host}:{args.port}: {e.strerror}"
            ) from None
    except (FakeServerError, ScriptError) as e:
        print(f"fake_server: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
