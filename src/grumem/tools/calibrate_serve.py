"""`grumem calibrate-serve`: label a calibration sample in a browser, one key a pair.

A local page (aiohttp's web server) shows one pair at a time: the question,
then the chunk as the prompt shows it; `y` yes, `n` no, `s` skip, Backspace
back. The judge's labels are not in the sample, so the page cannot show them.

Each answer is written to the sample file before the page moves on: the
file is read again, the answered line is replaced by the same record with
its `evidence` set (serialised as calibrate-sample writes it, with the line's
own line ending), every other line is copied as the bytes read, and the
result replaces the file atomically (a temporary file beside it, fsync,
rename, fsync of the directory). So a crash or a power cut loses at most the
answer being typed, and a restart resumes at the first unanswered pair. The
sample is the command's output as much as its input: it rewrites the file it
reads, by design, and checks first that each line still holds the pair it
served (a file edited meanwhile is refused, 409, not overwritten).

Security: the server binds 127.0.0.1 unless told otherwise, and every
request must carry the random token of the URL it prints (a `token` query
parameter, or the `X-Grumem-Token` header the page sends), so neither another
local user nor a web page open in the same browser can read the chunks or
write a label: without it, 403 and nothing changes. A pair id not in the
sample or an answer other than yes, no or skip is 400 and nothing changes.
No response allows another origin to read it (no CORS headers), and the page
admits only its own script and style (Content-Security-Policy by hash).

aiohttp rather than Starlette + uvicorn: aiohttp is already a dependency of
grumem (the LLM client's transport), Starlette and uvicorn come only with the
`local` extra, and for one person answering a pair every few seconds their
speed is the same (measured: in the commit that chose it).
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import os
import secrets
import shlex
import signal
import sys
from collections import Counter
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from aiohttp import web

from grumem.core.calibration import SKIP
from grumem.core.json_text import dumps_bytes, json_line
from grumem.errors import GrumemError, PageRequestRefused, RecordError, SampleChanged
from grumem.io.fsync import fsync_dir
from grumem.io.jsonl import atomic_writer, checked, read_jsonl
from grumem.report.viewer import csp_hash

ANSWERS: dict[str, bool | str] = {"yes": True, "no": False, "skip": SKIP}
TOKEN_HEADER = "X-Grumem-Token"


@dataclass(frozen=True)
class SamplePair:
    """A pair of the calibration sample, as its line names it."""

    query_id: str
    chunk_sha: str


class Sample:
    """The calibration sample on disk: its pairs in line order, and their answers."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        records = list(read_jsonl(self.path, "calibration-sample"))
        if not records:
            raise RecordError(self.path, None, None, "empty sample: nothing to label")
        self.pairs = [SamplePair(r["query_id"], r["chunk_sha"]) for r in records]
        self.answers: list[bool | str | None] = [r["evidence"] for r in records]

    def __len__(self) -> int:
        return len(self.pairs)

    def record(self, i: int) -> dict[str, Any]:
        """Line i's record as it is on disk now (read again: a pair's chunk is not kept)."""
        for n, rec in enumerate(read_jsonl(self.path, "calibration-sample")):
            if n == i:
                return rec
        raise SampleChanged(f"{self.path}: has no line {i + 1} any more: restart calibrate-serve")

    def answer(self, i: int, evidence: bool | str) -> None:
        """Set line i's `evidence`, now and atomically; every other line keeps its bytes."""
        raw = self.path.read_bytes()
        lines = raw.splitlines(keepends=True)
        if len(lines) != len(self.pairs):
            raise SampleChanged(
                f"{self.path}: holds {len(lines)} lines, not the {len(self.pairs)} it held"
                " when calibrate-serve started: restart it"
            )
        line = lines[i]
        body = line.rstrip(b"\r\n")
        rec = json_line(self.path, i + 1, body)
        named = (rec.get("query_id"), rec.get("chunk_sha")) if isinstance(rec, dict) else None
        if named != (self.pairs[i].query_id, self.pairs[i].chunk_sha):
            raise SampleChanged(
                f"{self.path}:{i + 1}: no longer holds the pair served: the file was edited"
                " while calibrate-serve ran; restart it"
            )
        rec["evidence"] = evidence
        checked(rec, "calibration-sample", self.path, i + 1)
        lines[i] = dumps_bytes(rec) + line[len(body) :]
        mode = self.path.stat().st_mode
        with atomic_writer(self.path, "wb") as f:
            f.writelines(lines)
        os.chmod(self.path, mode & 0o7777)
        fsync_dir(self.path.parent)
        self.answers[i] = evidence

    def first_unanswered(self, after: int = -1) -> int | None:
        """The first pair without an answer after `after`, wrapping around; None when done."""
        n = len(self.pairs)
        for k in range(n):
            i = (after + 1 + k) % n
            if self.answers[i] is None:
                return i
        return None


def answer_name(evidence: bool | str | None) -> str | None:
    if evidence is None:
        return None
    if evidence is True:
        return "yes"
    return "no" if evidence is False else "skip"


@dataclass
class Server:
    sample: Sample
    annotator: str
    out: str
    token: str

    def finalize_command(self) -> str:
        return shlex.join(
            [
                "grumem",
                "calibrate-finalize",
                "--sample",
                str(self.sample.path),
                "--annotator",
                self.annotator,
                "--out",
                self.out,
            ]
        )

    def state(self) -> dict[str, Any]:
        s = self.sample
        per_query: dict[str, Counter[str]] = {}
        for pair, ans in zip(s.pairs, s.answers, strict=True):
            c = per_query.setdefault(pair.query_id, Counter())
            c["n"] += 1
            c["answered"] += ans is not None
        return {
            "n": len(s),
            "answered": sum(a is not None for a in s.answers),
            "answers": [answer_name(a) for a in s.answers],
            "queries": [
                {"query_id": q, "n": c["n"], "answered": c["answered"]}
                for q, c in per_query.items()
            ],
            "first_unanswered": s.first_unanswered(),
            "annotator": self.annotator,
            "sample": str(s.path),
            "finalize": self.finalize_command(),
        }

    # -------------------------------------------------------------- handlers

    @web.middleware
    async def guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
        given = request.headers.get(TOKEN_HEADER) or request.query.get("token") or ""
        if not hmac.compare_digest(given.encode("utf-8"), self.token.encode("utf-8")):
            response: web.StreamResponse = web.Response(
                status=403, text="403: this URL's token is missing or wrong\n"
            )
        else:
            try:
                response = await handler(request)
            except PageRequestRefused as e:
                response = web.Response(status=e.status, text=f"{e.status}: {e.text}\n")
        response.headers.update(
            {
                "Cache-Control": "no-store",
                "Referrer-Policy": "no-referrer",
                "X-Content-Type-Options": "nosniff",
                "X-Frame-Options": "DENY",
            }
        )
        return response

    async def page(self, request: web.Request) -> web.Response:
        return web.Response(
            text=self._page,
            content_type="text/html",
            headers={"Content-Security-Policy": self._csp},
        )

    async def get_state(self, request: web.Request) -> web.Response:
        return web.json_response(self.state())

    def _index(self, value: Any) -> int:
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not 0 <= value < len(self.sample)
        ):
            raise PageRequestRefused(
                400, f"no pair {value!r} in the sample (pairs 0 to {len(self.sample) - 1})"
            )
        return value

    async def get_pair(self, request: web.Request) -> web.Response:
        i = self._index(request.match_info["i"])
        try:
            rec = self.sample.record(i)
        except SampleChanged as e:
            raise PageRequestRefused(409, str(e)) from None
        if SamplePair(rec["query_id"], rec["chunk_sha"]) != self.sample.pairs[i]:
            raise PageRequestRefused(409, "the sample file was edited: restart calibrate-serve")
        return web.json_response(
            {
                "i": i,
                "query_id": rec["query_id"],
                "question": rec["question"],
                "chunk": rec["chunk"],
                "session": rec["session"],
                "index": rec["index"],
                "answer": answer_name(self.sample.answers[i]),
            }
        )

    async def post_answer(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            raise PageRequestRefused(400, "the body is not JSON") from None
        if not isinstance(body, dict) or set(body) != {"pair", "value"}:
            raise PageRequestRefused(400, 'send {"pair": <number>, "value": "yes" | "no" | "skip"}')
        i = self._index(body["pair"])
        value = body["value"]
        if not isinstance(value, str) or value not in ANSWERS:
            raise PageRequestRefused(400, f"{value!r} is no answer: yes, no or skip")
        try:
            self.sample.answer(i, ANSWERS[value])
        except SampleChanged as e:
            raise PageRequestRefused(409, str(e)) from None
        return web.json_response(self.state())

    def app(self) -> web.Application:
        script, style = asset("calibrate.js"), asset("calibrate.css")
        self._csp = (
            f"default-src 'none'; script-src {csp_hash(script)}; style-src {csp_hash(style)};"
            " connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        )
        self._page = (
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            "<title>grumem: calibration</title>\n"
            f"<style>{style}</style>\n</head>\n<body>\n"
            '<div id="app"><noscript>This page needs JavaScript.</noscript></div>\n'
            f"<script>{script}</script>\n</body>\n</html>\n"
        )
        app = web.Application(middlewares=[self.guard])
        app.router.add_get("/", self.page)
        app.router.add_get("/api/state", self.get_state)
        app.router.add_get("/api/pair/{i}", self.get_pair)
        app.router.add_post("/api/answer", self.post_answer)
        return app


def asset(name: str) -> str:
    return (files("grumem.tools") / name).read_text(encoding="utf-8")


async def serve(server: Server, host: str, port: int) -> None:
    runner = web.AppRunner(server.app(), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as e:
            raise GrumemError(f"--host {host} --port {port}: cannot listen: {e.strerror}") from None
        bound_host, bound_port = runner.addresses[0][:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        s = server.state()
        print(
            f"calibrate-serve: {s['n']} pairs, {s['answered']} answered, in {server.sample.path};"
            f" open http://{shown}:{bound_port}/?token={server.token}"
            " (Ctrl-C stops it; every answer is already saved)",
            file=sys.stderr,
            flush=True,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()


def main(args: argparse.Namespace) -> int:
    """`grumem calibrate-serve`: the labelling page, until Ctrl-C or SIGTERM."""
    if not args.annotator.strip():
        raise GrumemError("--annotator: name the person (or team) who labels the sample")
    sample = Sample(args.sample)
    out = args.out or str(Path(args.sample).with_name("calibration.jsonl"))
    server = Server(sample, args.annotator, out, secrets.token_urlsafe(32))
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"calibrate-serve: warning: --host {args.host} is reachable from other machines;"
            " the token is all that guards the sample",
            file=sys.stderr,
        )
    asyncio.run(serve(server, args.host, args.port))
    return 0
