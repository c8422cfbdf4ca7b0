"""Run by tests/verl/test_verl_cpu.py with .venv-verl's python: the embedded CPU
backend's parts, each through verl's own classes and registries.

    verl_cpu_check.py JOB SPEC_JSON

Jobs report what they saw as one JSON object on the last line of stdout; they
assert nothing (the test does).

- `pins`: the private names grumem.verl.private touches, in the shape written there,
  and its refusal of another verl version.
- `registries`: with VERL_PLATFORM=cpu and VERL_USE_EXTERNAL_MODULES naming the
  plug-in (as the trainer's processes get them), what verl's own lookups return:
  platform, device, engine, rollout replica and adapter, and the backend of a
  process group made by verl's own initialize_global_process_group_ray.
- `server`: CpuRolloutServer (the class the replica makes a Ray actor of) given
  concurrent requests, free and under the gate grammar; the model's own full
  forward gives the log-probs it should have answered.
- `weights`: two HF model folders (a trainer's checkpoint and the model it started
  from) as transformers loads them, and how their parameters differ.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import torch

from grumem.core.gate_parser import ParseError, parse_gate_response


def job_pins(spec: dict) -> dict:
    import verl
    import verl.utils.distributed as distributed
    from verl.workers.rollout import base

    from grumem.errors import VerlVersionError
    from grumem.verl import private

    seen: dict[str, Any] = {"verl": verl.__version__, "pinned": private.VERL_VERSION}
    table = getattr(base, private.ROLLOUT_REGISTRY[1], None)
    seen["registry_keys"] = sorted(map(list, table)) if isinstance(table, dict) else None
    seen["get_rollout_class_reads_it"] = private.ROLLOUT_REGISTRY[1] in inspect.getsource(
        base.get_rollout_class
    )
    seen["functions"] = {}
    for name in private.PROCESS_GROUP_FUNCTIONS:
        source = inspect.getsource(getattr(distributed, name))
        seen["functions"][name] = {
            "builds_cpu_gloo_string": 'f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"'
            in source,
            "parameters": list(inspect.signature(getattr(distributed, name)).parameters),
        }
    seen["from_imports"] = {}
    for module_name in private.FROM_IMPORTS:
        module = __import__(module_name, fromlist=["_"])
        seen["from_imports"][module_name] = "initialize_global_process_group_ray" in vars(module)
    verl.__version__ = "0.0.0"  # the refusal, as a user with another verl meets it
    try:
        private.require_pinned_verl()
        seen["refused"] = None
    except VerlVersionError as e:
        seen["refused"] = str(e)
    return seen


def job_registries(spec: dict) -> dict:
    from verl.plugin.platform import PlatformRegistry, get_platform
    from verl.utils.device import get_device_name, get_nccl_backend, get_torch_device
    from verl.utils.distributed import initialize_global_process_group_ray
    from verl.workers.engine import EngineRegistry
    from verl.workers.rollout.base import get_rollout_class
    from verl.workers.rollout.replica import get_rollout_replica_class

    platform = get_platform()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1")
    initialize_global_process_group_ray(timeout_second=60)  # as verl's training worker does
    backend = torch.distributed.get_backend()
    torch.distributed.destroy_process_group()
    device = get_torch_device()
    return {
        "registered": list(PlatformRegistry.registered_names()),
        "platform": type(platform).__module__ + "." + type(platform).__name__,
        "device": get_device_name(),
        "collectives": get_nccl_backend(),
        "ray_resource": platform.ray_resource_name(),
        "empty_cache": device.empty_cache() is None,
        "mem_free_total": list(device.mem_get_info()),
        "engine": get_engine(EngineRegistry),
        "replica": qualname(get_rollout_replica_class("grumem_cpu")),
        "adapter": qualname(get_rollout_class("grumem_cpu", "async")),
        "process_group_backend": str(backend),
    }


def get_engine(registry: Any) -> str:
    return qualname(registry.get_engine_cls("language_model", "fsdp2"))


def qualname(cls: Any) -> str:
    return f"{cls.__module__}.{cls.__name__}"


def job_server(spec: dict) -> dict:
    """The server over the first turns of demo rows, free and under the gate grammar."""
    from transformers import AutoTokenizer

    from grumem.verl.cpu_rollout import CpuRolloutServer
    from grumem.verl.embedded import CpuSettings, cpu_overrides
    from grumem.verl.training import CPU_PROMPT_TOKENS

    model = spec["model"]
    tokenizer = AutoTokenizer.from_pretrained(model)
    prompts = first_turn_prompts(tokenizer, spec["rows"])
    seen: dict[str, Any] = {"prompt_tokens": [len(p) for p in prompts]}
    for grammar in (None, "gate"):
        # the rollout config the CPU settings compose onto verl's own
        config = rollout_config(
            [
                *cpu_overrides(CpuSettings(grammar=grammar)),
                f"actor_rollout_ref.model.path={model}",
                f"data.max_prompt_length={CPU_PROMPT_TOKENS}",
                f"data.max_response_length={spec['response_length']}",
            ]
        )
        server = CpuRolloutServer(config, {"path": model}, replica_rank=0)
        seen[str(grammar)] = asyncio.run(serve(server, tokenizer, prompts, spec["max_tokens"]))
    return seen


def rollout_config(overrides: list[str]) -> Any:
    """actor_rollout_ref.rollout of verl's own trainer config, as the replica gets it."""
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        config = compose(config_name="ppo_trainer", overrides=overrides)
    return config.actor_rollout_ref.rollout


def first_turn_prompts(tokenizer: Any, rows: int) -> list[list[int]]:
    """Turn 1 of the first `rows` demo sessions rows, chat-templated as verl's agent
    loop tokenizes them."""
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from grumem.core.rollout_row import row_turns
    from grumem.core.turn_loop import Ask, TurnLoop
    from grumem.io.template_files import GRU_MEM_TEMPLATE
    from grumem.io.tokenizer import cl100k_tokens
    from grumem.verl.rollout import read_rollout_row, rollout_builder, rollout_rules
    from support.rollout_rows import demo_rollout_rows

    tokens = cl100k_tokens()
    out = []
    for columns in demo_rollout_rows()[:rows]:
        row = read_rollout_row(columns)
        turns = row_turns(row, rollout_builder(row, GRU_MEM_TEMPLATE, tokens))
        first = next(iter(TurnLoop(turns, rollout_rules(row, tokens))))
        assert isinstance(first, Ask), first
        out.append(
            tokenizer.apply_chat_template(
                first.messages, add_generation_prompt=True, tokenize=True, return_dict=False
            )
        )
    return out


async def serve(server: Any, tokenizer: Any, prompts: list[list[int]], max_tokens: int) -> dict:
    """The prompts sent at once (the first two without max_tokens), as the n rollouts
    of a row are; what came back, and the log-probs the model's full forward gives."""
    params = [{"temperature": 1.0, "logprobs": True} for _ in prompts]
    params[-1]["max_tokens"] = max_tokens
    started = time.monotonic()
    outputs = await asyncio.gather(
        *(
            server.generate(prompt_ids=p, sampling_params=q, request_id=str(i))
            for i, (p, q) in enumerate(zip(prompts, params, strict=True))
        )
    )
    seconds = time.monotonic() - started
    answers = []
    for prompt, out in zip(prompts, outputs, strict=True):
        text = tokenizer.decode(
            out.token_ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        try:
            parse_gate_response(text)
            parsed = True
        except ParseError:
            parsed = False
        answers.append(
            {
                "tokens": len(out.token_ids),
                "ends_with_stop": out.token_ids[-1] in server.stop_ids,
                "log_prob_gap": log_prob_gap(server.model, prompt, out),
                "parsed": parsed,
                "text": text[:200],
            }
        )
    return {"answers": answers, "stats": await server.statistics(), "seconds": round(seconds, 1)}


def log_prob_gap(model: Any, prompt: list[int], out: Any) -> float:
    """The largest |answered - recomputed| log-prob over the answer's tokens, the
    recomputation one full forward over prompt + answer (as verl's actor does)."""
    ids = torch.tensor([prompt + out.token_ids])
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    want = torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(out.token_ids)[:, None])[:, 0]
    return float((want - torch.tensor(out.log_probs)).abs().max())


def job_weights(spec: dict) -> dict:
    """Two HF model folders loaded by transformers: their parameters' names, and how far
    apart they are (the largest absolute difference, and how many tensors differ)."""
    from transformers import AutoModelForCausalLM

    before, after = (
        dict(AutoModelForCausalLM.from_pretrained(spec[k]).named_parameters())
        for k in ("before", "after")
    )
    differ = [n for n in before if not torch.equal(before[n], after[n])]
    return {
        "same_names": sorted(before) == sorted(after),
        "tensors": len(before),
        "tensors_changed": len(differ),
        "max_abs_change": max(
            (float((before[n] - after[n]).abs().max()) for n in differ), default=0.0
        ),
    }


JOBS = {
    "pins": job_pins,
    "registries": job_registries,
    "server": job_server,
    "weights": job_weights,
}

if __name__ == "__main__":
    job, spec_path = sys.argv[1], sys.argv[2]
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    print(json.dumps(JOBS[job](spec), default=str))
