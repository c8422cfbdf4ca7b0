#!/usr/bin/env python
"""Record real model answers to GRU-Mem prompts: fixtures/responses/real/NNN-{grammar,free}.json.

Each prompt (a demo chunk, a demo question, no memory at t=1 or a short one
later) is sent twice with the same seed NNN: once with the four-tag grammar,
once without, both with max_tokens 200. The grammar bounds each text slot
to 250 characters: unbounded, the 135M model rambles inside <think> until
max_tokens cuts the answer off mid-tag (the recorder fails loudly if a
grammar answer is still cut off). Each file holds the exact request body,
the raw response body, whether the grammar was on, the model and the run's
UTC date. Card 000's a9 reads them: with the grammar every answer must parse; without, each is an
exact parse or an error naming a tag.

    .venv/bin/python scripts/record_real_responses.py            # embedded server
    .venv/bin/python scripts/record_real_responses.py --base-url http://127.0.0.1:8080/v1

Prints one line per answer (latency, tokens, tokens/s, parse) and a summary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from grumem.config.settings import load_queries
from grumem.core.chunk_text import Chunk
from grumem.core.gate_parser import parse_gate_response
from grumem.core.grammar import grammar_fields
from grumem.errors import ParseError
from grumem.io.chunk_files import read_chunk_file
from grumem.io.jsonl import write_json
from grumem.io.template_files import load_prompt_builder
from grumem.llm.client import LLMClient
from grumem.llm.local_server import MODEL_NAME, LocalServer
from grumem.llm.request import build_body

# this script runs from the checkout; the package knows only its package data
FIXTURES_DIR = Path(__file__).resolve().parents[1] / "fixtures"

MEMORY_PREVIEW = 200  # characters of the previous chunk kept as a short memory


def pick_chunks(chunk_dir: Path, n: int) -> list[tuple[Chunk, Chunk | None]]:
    """`n` chunks spread evenly over the demo sessions, each with its predecessor."""
    chunks: list[Chunk] = []
    for path in sorted(chunk_dir.glob("*.jsonl")):
        chunks.extend(read_chunk_file(path))
    if not chunks:
        raise SystemExit(f"no chunk files in {chunk_dir}")
    out = []
    for i in range(n):
        c = chunks[(i * len(chunks)) // n % len(chunks)]
        prev = next((p for p in chunks if p.session == c.session and p.index == c.index - 1), None)
        out.append((c, prev))
    return out


def short_memory(prev: Chunk | None) -> str | None:
    """None (M_0) at a session's first chunk, else a short note from the chunk before."""
    if prev is None:
        return None
    text = " ".join(prev.text.split())
    return f"Earlier in this session: {text[:MEMORY_PREVIEW]}"


async def record(args: argparse.Namespace, base_url: str, model: str) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    questions = [q["question"] for q in load_queries(args.queries)]
    builder = load_prompt_builder()
    date = datetime.now(UTC).date().isoformat()
    results: dict[bool, list[bool]] = {True: [], False: []}
    cut: list[str] = []
    rates: list[float] = []
    with tempfile.TemporaryDirectory(prefix="grumem-record-") as cache_dir:
        client = LLMClient(
            base_url,
            cache_dir=cache_dir,
            concurrency=1,
            timeout=args.timeout,
            retries=2,
            backoff=1.0,
        )
        async with client:
            for i, (chunk, prev) in enumerate(pick_chunks(Path(args.chunks), args.prompts)):
                question = questions[i % len(questions)]
                prompt = builder.build(question, chunk.text, short_memory(prev))
                for grammar in (True, False):
                    params = {
                        "temperature": args.temperature,
                        "top_p": args.top_p,
                        "max_tokens": args.max_tokens,
                        "seed": i,
                    }
                    extra = grammar_fields("llama.cpp", max_text_chars=args.text_chars)
                    extra = extra if grammar else None
                    body = build_body(model, prompt.messages(), params, extra)
                    ex = await client.complete(body, f"{i:03d}")
                    if not ex.ok:
                        print(ex.failure(f"{i:03d}"), file=sys.stderr)
                        return 1
                    name = f"{i:03d}-{'grammar' if grammar else 'free'}.json"
                    write_json(
                        out / name,
                        {
                            "request_body": body,
                            "response_body": ex.response["body"],
                            "grammar": grammar,
                            "model": model,
                            "date": date,
                        },
                    )
                    answer = json.loads(ex.response["body"])
                    text = answer["choices"][0]["message"]["content"]
                    try:
                        parse_gate_response(text)
                        parsed = "parses"
                    except ParseError as e:
                        parsed = f"ParseError {e}"
                    results[grammar].append(parsed == "parses")
                    finish = answer["choices"][0].get("finish_reason")
                    if grammar and finish == "length":
                        cut.append(name)
                    tokens = answer.get("usage", {}).get("completion_tokens", 0)
                    latency = ex.response["latency_s"]
                    rates.append(tokens / latency if latency else 0.0)
                    print(
                        f"{name}: {latency:6.2f} s, {tokens:3d} tokens, {rates[-1]:5.1f} tok/s, "
                        f"finish {finish}, {parsed}",
                        flush=True,
                    )
    for grammar, ok in results.items():
        kind = "with grammar" if grammar else "free-form"
        print(f"{kind}: {sum(ok)}/{len(ok)} parse")
    print(f"mean {sum(rates) / len(rates):.1f} tokens/s over {len(rates)} answers")
    if cut:
        print(f"grammar answers cut off by max_tokens: {', '.join(cut)}", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(FIXTURES_DIR / "responses" / "real"))
    p.add_argument("--chunks", default=str(FIXTURES_DIR / "demo" / "chunks"))
    p.add_argument("--queries", default=str(FIXTURES_DIR / "demo" / "queries.yaml"))
    p.add_argument("--prompts", type=int, default=20, help="prompts; each is sent twice")
    p.add_argument("--max-tokens", type=int, default=200)
    p.add_argument("--text-chars", type=int, default=250, help="grammar bound per text slot")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--top-p", type=float, default=0.95)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--base-url", default=None, help="a running llama.cpp server (…/v1)")
    p.add_argument("--model", default=MODEL_NAME)
    args = p.parse_args()
    # SIGTERM unwinds like Ctrl-C, so the embedded server is stopped either way
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if args.base_url:
        return asyncio.run(record(args, args.base_url, args.model))
    with LocalServer() as server:
        print(f"embedded server at {server.base_url}", flush=True)
        return asyncio.run(record(args, server.base_url, server.model))


if __name__ == "__main__":
    sys.exit(main())
