"""Server managers for verl's agent loops, in .venv-verl only (they import verl and
llama_cpp): what `server_manager.generate` is to an AgentLoopBase, token ids in
and token ids out, without vLLM or a GPU.

- LlamaServerManager generates with a real model: the GGUF the demo installs,
  through llama.cpp in-process (llama-cpp-python's `Llama.generate` takes and
  yields token ids; its HTTP server's completion endpoint takes only text), under
  a GBNF grammar as the workflow's embedded server runs it.
- ScriptedServerManager answers each request with the next scripted text,
  tokenized by the policy's tokenizer: a recorded answer fed back as tokens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from llama_cpp import Llama, LlamaGrammar
from verl.workers.rollout.replica import TokenOutput


class LlamaServerManager:
    """`generate` over one in-process llama.cpp model, one request at a time.

    Sampling as verl passes it (temperature, top_p, top_k; max_tokens, which verl's
    own client sets from rollout.response_length) and the GBNF `grammar`; the
    model's end-of-generation token ends a response and is part of it, as vLLM
    returns it."""

    def __init__(self, gguf: str, grammar: str | None, max_tokens: int, seed: int = 0):
        # fixed threads and a seed set before every request: the same prompt ids give
        # the same answer whatever ran before it
        self.llm = Llama(model_path=gguf, n_ctx=8192, n_threads=2, seed=seed, verbose=False)
        self.seed = seed
        self.grammar = None if grammar is None else LlamaGrammar.from_string(grammar, verbose=False)
        self.max_tokens = max_tokens
        self.lock = asyncio.Lock()
        self.calls: list[dict[str, Any]] = []

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> TokenOutput:
        async with self.lock:
            ids = await asyncio.get_running_loop().run_in_executor(
                None, lambda: self._generate(prompt_ids, sampling_params)
            )
        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids), "ids": ids})
        return TokenOutput(token_ids=ids, stop_reason="completed")

    def _generate(self, prompt_ids: list[int], params: dict[str, Any]) -> list[int]:
        limit = params.get("max_tokens", self.max_tokens)
        top_k = params.get("top_k", -1)
        out: list[int] = []
        self.llm.set_seed(self.seed)
        tokens = self.llm.generate(
            prompt_ids,
            temp=params.get("temperature", 1.0),
            top_p=params.get("top_p", 1.0),
            top_k=top_k if top_k and top_k > 0 else 0,
            repeat_penalty=params.get("repetition_penalty", 1.0),
            grammar=self.grammar,
            reset=True,  # each call builds its sampler anew, the grammar's state too
        )
        for token in tokens:
            out.append(token)
            if self.llm.token_eos() == token or len(out) >= limit:
                break
        return out

    def close(self) -> None:
        self.llm.close()


class ScriptedServerManager:
    """`generate` answering from scripts of texts, as token ids of `tokenizer`, each
    ended by `eos_id`: the first request id seen gets scripts[0] (its answers in
    order), the next new one scripts[1], and so on (an agent loop uses one request
    id a rollout, so a rollout follows one script however rollouts interleave)."""

    def __init__(self, tokenizer: Any, scripts: Sequence[Sequence[str]], eos_id: int):
        self.tokenizer = tokenizer
        self.scripts = [list(s) for s in scripts]
        self.eos_id = eos_id
        self.assigned: dict[str, int] = {}
        self.answered: dict[str, int] = {}
        self.prompts: dict[int, list[list[int]]] = {}

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> TokenOutput:
        script = self.assigned.setdefault(request_id, len(self.assigned))
        turn = self.answered.get(request_id, 0)
        self.answered[request_id] = turn + 1
        self.prompts.setdefault(script, []).append(list(prompt_ids))
        text = self.scripts[script][turn]
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.eos_id]
        return TokenOutput(token_ids=ids, stop_reason="completed")
