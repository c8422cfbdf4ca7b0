"""The recording client's tests' common parts: the model and reply the fake server is
scripted with, request bodies and the bytes it answers them with, a client with
fast retries, and a fault schedule that meets every kind of fault.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from grumem.io.tokenizer import cl100k_tokens
from grumem.llm.client import Exchange, LLMClient
from grumem.llm.request import build_body, request_sha
from support.replies import completion_body

TOKENS = cl100k_tokens()

MODEL = "fake-model"
REPLY = "<think>ok</think>\n<check>no</check>\n<update></update>\n<next>continue</next>"
KEY_ENV = "GRUMEM_TEST_API_KEY"
PARAMS = {"temperature": 0.7, "top_p": 0.95, "max_tokens": 64, "seed": 0}


def body_for(i: int, text: str = "chunk") -> str:
    """A request body for `text i`, sample seed i."""
    return build_body(MODEL, [{"role": "user", "content": f"{text} {i}"}], {**PARAMS, "seed": i})


def expected_body(body: str, content: str = REPLY, finish: str = "stop") -> str:
    """What the fake server answers to `body` (no clock, no random id)."""
    sha = request_sha(body)
    prompt_tokens = sum(TOKENS.count(m["content"]) for m in json.loads(body)["messages"])
    return completion_body(
        sha, MODEL, content, prompt_tokens, TOKENS.count(content), finish
    ).decode("utf-8")


def make_client(base_url: str | None, cache_dir: Path, **kw: Any) -> LLMClient:
    """A client of the test key's variable, with quick retries; `kw` overrides."""
    opts = dict(
        cache_dir=cache_dir,
        api_key_env=KEY_ENV,
        concurrency=8,
        timeout=5.0,
        retries=3,
        backoff=0.001,
    )
    opts.update(kw)
    return LLMClient(base_url, **opts)


async def run_all(client: LLMClient, bodies: list[str]) -> list[Exchange]:
    """Every body at once through `client` (labelled b0, b1...), the client closed after."""
    async with client:
        return await asyncio.gather(*(client.complete(b, f"b{i}") for i, b in enumerate(bodies)))


# every fault kind the fake server has, at a rate a 200-request run meets each of
FAULTS = {
    "rate": 0.3,
    "kinds": ["429", "500", "503", "hang", "reset", "truncated", "non_json", "length"],
    "seed": 7,
    "retry_after": 0,
    "hang_s": 2,
}
