"""The embedded rollout server: verl's rollout `grumem_cpu` (rollout.name=grumem_cpu,
rollout.mode=async), transformers generating on the CPU from the actor's weights.

verl's v1 trainer talks to a rollout through three parts, each written here
against its seam:

- CpuReplica (a RolloutReplica, registered with RolloutReplicaRegistry): started
  beside the training worker (hybrid mode), it launches one CpuRolloutServer.
- CpuRolloutServer (a Ray actor): `generate(prompt_ids, sampling_params)` answers
  token ids and their log-probs, as verl's vLLM server does. Requests are
  batched: the rollout.n rollouts of a row, and the rows of a batch, arrive
  together; the server waits a moment for the requests in flight (`SETTLE_S`),
  then runs all of them as one batch (grumem.verl.cpu_generate), and the next
  batch holds whatever arrived meanwhile. max_tokens defaults to the rollout's
  response length (bounded by the prompt and response budget), as vLLM's does:
  grumem's agent loop sends none.
- CpuRolloutAdapter (a BaseRollout, in the training worker's process): verl's
  "naive" weight sync hands it the actor's named tensors after each update; it
  sends them to the server in buckets (rollout.checkpoint_engine
  .update_weights_bucket_megabytes), and the server copies them into its model,
  refusing a name it does not have and a sync that leaves a tensor out.

`rollout.engine_kwargs.grumem_cpu.grammar` (gate or judge; default none) makes the
server draw every answer under that grammar; log-probs stay the policy's
(grumem.verl.cpu_generate).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from typing import Any

import ray
import torch
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput
from verl.workers.rollout.utils import ensure_async_iterator

from grumem.errors import EmbeddedTrainError
from grumem.verl.cpu_generate import Request, generate
from grumem.verl.plugin import ROLLOUT_NAME

SETTLE_S = 0.05  # a batch waits until no request has arrived for this long
MAX_WAIT_S = 0.5  # ... or this long after its first


def server_name(replica_rank: int) -> str:
    """The Ray name of a replica's server (one node a replica on a CPU machine)."""
    return f"grumem_cpu_rollout_{replica_rank}"


def engine_settings(config: Any) -> dict[str, Any]:
    """rollout.engine_kwargs.grumem_cpu, as a plain dict."""
    kwargs = getattr(config, "engine_kwargs", None) or {}
    own = kwargs.get(ROLLOUT_NAME) if hasattr(kwargs, "get") else None
    return dict(own or {})


class CpuRolloutServer:
    """One model in this process, answering `generate` in batches (see the module)."""

    def __init__(self, config: Any, model_config: Any, replica_rank: int):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
        self.config = omega_conf_to_dataclass(config)
        path = model_config["path"] if hasattr(model_config, "__getitem__") else model_config.path
        self.model = AutoModelForCausalLM.from_pretrained(
            path, dtype=torch.float32, attn_implementation="sdpa"
        ).eval()
        tokenizer = AutoTokenizer.from_pretrained(path)
        stops = self.model.generation_config.eos_token_id
        stops = stops if isinstance(stops, list) else [stops]
        self.stop_ids = frozenset(int(s) for s in stops if s is not None)
        if not self.stop_ids:
            raise EmbeddedTrainError(f"{path}: generation_config.json names no eos_token_id")
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else min(self.stop_ids))
        self.generator = torch.Generator().manual_seed(int(self.config.seed) + replica_rank)
        self.grammar = self._grammar(tokenizer, engine_settings(self.config))
        self.global_steps: int | None = None
        self.pending: list[tuple[Request, asyncio.Future[Request]]] = []
        self.batcher: asyncio.Task[None] | None = None
        self.stats = {"batches": 0, "requests": 0, "tokens": 0, "seconds": 0.0}
        self.received: set[str] = set()

    def _grammar(self, tokenizer: Any, settings: dict[str, Any]) -> Any:
        which = settings.get("grammar")
        if not which:
            return None
        from grumem.verl.cpu_grammar import CompiledGrammar

        vocab = int(self.model.config.vocab_size)
        return CompiledGrammar(
            tokenizer, vocab, min(self.stop_ids), str(which), int(self.config.response_length)
        )

    # ------------------------------------------------------------------ generate

    async def generate(
        self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str, **_: Any
    ) -> TokenOutput:
        request = self._request(list(prompt_ids), dict(sampling_params))
        future: asyncio.Future[Request] = asyncio.get_running_loop().create_future()
        self.pending.append((request, future))
        if self.batcher is None or self.batcher.done():
            self.batcher = asyncio.create_task(self._run_batches())
        done = await future
        return TokenOutput(
            token_ids=done.token_ids,
            log_probs=done.log_probs if sampling_params.get("logprobs") else None,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    def _request(self, prompt_ids: list[int], params: dict[str, Any]) -> Request:
        c = self.config
        room = c.prompt_length + c.response_length - len(prompt_ids)
        limit = params.get("max_tokens", params.get("max_new_tokens"))
        max_tokens = min(c.response_length, room) if limit is None else int(limit)
        if max_tokens < 1:
            raise EmbeddedTrainError(
                f"a prompt of {len(prompt_ids)} tokens leaves no room to answer within"
                f" rollout.prompt_length + response_length ({c.prompt_length + c.response_length})"
            )
        return Request(
            prompt_ids=prompt_ids,
            max_tokens=max_tokens,
            temperature=float(params.get("temperature", 1.0)),
            top_p=float(params.get("top_p", 1.0)),
            top_k=int(params.get("top_k", -1)),
            grammar=None if self.grammar is None else self.grammar.state(),
        )

    async def _run_batches(self) -> None:
        loop = asyncio.get_running_loop()
        while self.pending:
            await self._settle()
            batch, self.pending = self.pending, []
            started = time.monotonic()
            try:
                await loop.run_in_executor(None, self._generate, [r for r, _ in batch])
            except Exception as e:  # every waiting request gets the error
                for _, future in batch:
                    future.set_exception(e)
                continue
            self._count(batch, time.monotonic() - started)
            for request, future in batch:
                future.set_result(request)

    async def _settle(self) -> None:
        """Wait while requests keep arriving, at most MAX_WAIT_S."""
        first = time.monotonic()
        seen = len(self.pending)
        while time.monotonic() - first < MAX_WAIT_S:
            await asyncio.sleep(SETTLE_S)
            if len(self.pending) == seen:
                return
            seen = len(self.pending)

    def _generate(self, requests: list[Request]) -> None:
        generate(self.model, requests, self.stop_ids, self.pad_id, self.generator)

    def _count(self, batch: list[tuple[Request, Any]], seconds: float) -> None:
        self.stats["batches"] += 1
        self.stats["requests"] += len(batch)
        self.stats["tokens"] += sum(len(r.token_ids) for r, _ in batch)
        self.stats["seconds"] += seconds

    async def statistics(self) -> dict[str, float]:
        """Batches, requests, generated tokens and seconds generating, so far."""
        return dict(self.stats)

    # ------------------------------------------------------------------- weights

    async def load_weights(self, named: dict[str, torch.Tensor]) -> int:
        """Copy one bucket of the actor's tensors into the model; refuse unknown names."""
        state = self.model.state_dict()
        unknown = sorted(set(named) - set(state))
        if unknown:
            raise EmbeddedTrainError(
                f"weight sync: the rollout model has no tensor {unknown[0]!r}"
                f" ({len(unknown)} unknown): actor and rollout must be the same model"
            )
        with torch.no_grad():
            for name, tensor in named.items():
                state[name].copy_(tensor)
        self.received.update(named)
        return len(named)

    async def finish_weights(self, global_steps: int | None) -> int:
        """End a sync: every tensor of the model must have come (tied ones once)."""
        names = {n for n, _ in self.model.named_parameters()}
        missing = sorted(names - self.received)
        self.received = set()
        if missing:
            raise EmbeddedTrainError(
                f"weight sync left {len(missing)} of the rollout model's tensors out (first:"
                f" {missing[0]!r}): the rollout would answer from stale weights"
            )
        self.global_steps = global_steps
        return len(names)

    # verl's replica lifecycle: one process, weights kept, nothing to free or resume

    async def wake_up(self, tags: list[str] | None = None) -> None:
        return None

    async def sleep(self) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        return None

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def abort_all_requests(self, **_: Any) -> dict[str, Any]:
        return {"aborted_count": 0, "request_ids": []}

    async def resume_generation(self) -> None:
        return None

    async def start_profile(self, **_: Any) -> None:
        return None

    async def stop_profile(self) -> None:
        return None


class CpuReplica(RolloutReplica):  # type: ignore[misc]  # verl's class: Any to mypy
    """One CpuRolloutServer a replica, beside the training worker (hybrid mode)."""

    async def launch_servers(self) -> None:
        server = (
            ray.remote(CpuRolloutServer)
            .options(
                name=server_name(self.replica_rank),
                max_concurrency=self.max_concurrency,
                num_cpus=0,  # it computes while the trainer waits for it, never beside it
            )
            .remote(
                config=self.config, model_config=self.model_config, replica_rank=self.replica_rank
            )
        )
        self.servers = [server]
        self._server_handle = server
        self._server_address = server_name(self.replica_rank)  # the load balancer's key

    def rollout_worker_use_gpu(self) -> bool:
        return False


class CpuRolloutAdapter(BaseRollout):  # type: ignore[misc]  # verl's class: Any to mypy
    """The training worker's side of the weight sync (verl's naive path)."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1):
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", "0"))
        self.replica_rank = rank if replica_rank == -1 else replica_rank
        self.is_leader_rank = True  # one process a replica
        self.bucket_bytes = int(self.config.checkpoint_engine.update_weights_bucket_megabytes) << 20
        self.server: Any = None

    def _server(self) -> Any:
        # the server starts after the worker: found by name at the first sync
        if self.server is None:
            self.server = ray.get_actor(server_name(self.replica_rank))
        return self.server

    async def update_weights(
        self, weights: Any, wire_format: str = "named_tensors", **kwargs: Any
    ) -> None:
        if wire_format != "named_tensors":
            raise EmbeddedTrainError(
                "the embedded rollout takes full named tensors; the checkpoint engine"
                f" sent {wire_format!r}"
            )
        server = self._server()
        async for bucket in _buckets(weights, self.bucket_bytes):
            await server.load_weights.remote(bucket)
        await server.finish_weights.remote(kwargs.get("global_steps"))

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None


async def _buckets(weights: Any, limit: int) -> AsyncIterator[dict[str, torch.Tensor]]:
    bucket: dict[str, torch.Tensor] = {}
    size = 0
    async for name, tensor in ensure_async_iterator(weights):
        full = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
        full = full.detach().to("cpu").contiguous()
        bucket[name] = full
        size += full.numel() * full.element_size()
        if size >= limit:
            yield bucket
            bucket, size = {}, 0
    if bucket:
        yield bucket
