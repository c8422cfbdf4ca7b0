"""Run by tests/test_verl_online.py with .venv-verl's python (verl 0.9.1, never in the
main venv): grumem's online GRU-Mem training driven by verl's own classes on CPU.

    verl_online_check.py SPEC_JSON

SPEC_JSON names the GGUF (SmolLM2, the demo's model: transformers reads the
policy's tokenizer from it), a scratch directory, the jobs to run and their
inputs. Jobs assert nothing: they report what they saw, and one JSON object is
printed last for the test to assert on.

- `loop`: the `grumem` agent loop (verl's AgentLoopBase) over a demo session at
  L1 and L2 with a real model: llama.cpp generating token ids from the prompt's
  token ids, under the gate grammar.
- `replay`: the agent loop fed recorded answers as the policy's token ids, then
  the group step over each recorded group.
- `group`: rollouts of rows through the group step, TurnOutput.as_dict (the row
  verl stores) and verl's compute_advantage_for_multi_trajectories with the
  registered estimator, and with stock `grpo` beside it.
- `compose`: a command line's overrides composed onto verl's trainer config.
- `dataset`: the export's own sessions.parquet loaded by verl's RLHFDataset with the
  data config `grumem verl-config --online` prints, and one of its rows, as verl's
  agent loop worker hands a row over, run by the `grumem` agent loop.
- `worker`: verl's v1 rollout path on this machine: Ray (127.0.0.1 only),
  TransferQueue, GrumemAgentLoopWorker (what GrumemAgentLoopManager makes Ray
  actors of) given a dataloader batch of sessions.parquet rows as the trainer
  submits it, GrumemReplayBuffer sampling the finished group as the trainer
  does, and the trainer's advantage step over what TransferQueue holds.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import pickle
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import torch
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from transformers import AutoConfig, AutoTokenizer
from verl.experimental.agent_loop.agent_loop import DictConfigWrap
from verl.protocol import DataProto
from verl.trainer.ppo.core_algos import AdvantageEstimator
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

sys.path.insert(0, str(Path(__file__).parents[1]))

from grumem.core.grammar import fitting_text_chars, gbnf  # noqa: E402
from grumem.verl.agent_loop import GrumemAgentLoop  # noqa: E402
from grumem.verl.estimator import ESTIMATOR  # noqa: E402
from grumem.verl.group_step import step_metrics  # noqa: E402
from grumem.verl.rollout import read_rollout_row  # noqa: E402
from grumem.verl.worker import score_group  # noqa: E402
from support.rollout_rows import demo_rollout_rows, write_rows  # noqa: E402
from support.verl_servers import LlamaServerManager, ScriptedServerManager  # noqa: E402

REAL_SESSION = ("errors-and-fixes", "demo-03-npm-peer-deps")  # the demo's shortest: 3 chunks
MAX_TOKENS = 160
PROMPT_LENGTH = 8192
RESPONSE_LENGTH = 512
USER_START, USER_END = "<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n"


def loop_config() -> Any:
    return OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": PROMPT_LENGTH,
                    "response_length": RESPONSE_LENGTH,
                    "multi_turn": {"tool_config_path": None},
                },
                "model": {},
            },
            "data": {"apply_chat_template_kwargs": {}},
        }
    )


async def run_loop(tokenizer: Any, server: Any, row: dict, params: dict) -> list:
    # made inside the running event loop, as verl's workers make theirs
    config = loop_config()
    loop = GrumemAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
    )
    return await loop.run(params, **row)


def decode(tokenizer: Any, ids: list[int], special: bool) -> str:
    return tokenizer.decode(
        ids, skip_special_tokens=not special, clean_up_tokenization_spaces=False
    )


def user_message(tokenizer: Any, prompt_ids: list[int]) -> str | None:
    """The user message inside a chat-templated prompt (None if not exactly one)."""
    text = decode(tokenizer, prompt_ids, special=True)
    if text.count(USER_START) != 1 or not text.endswith(USER_END):
        return None
    return text.split(USER_START, 1)[1][: -len(USER_END)]


def eos_id(tokenizer: Any) -> int:
    """The token that ends an assistant turn in the policy's chat template."""
    return tokenizer.convert_tokens_to_ids("<|im_end|>")


def demo_row(level: str, query_id: str, session: str) -> dict:
    (row,) = [
        r
        for r in demo_rollout_rows(level=level)
        if (r["extra_info"]["query_id"], r["extra_info"]["session"]) == (query_id, session)
    ]
    return row


# ------------------------------------------------------------------------- loop


def job_loop(tokenizer: Any, gguf: Path) -> dict:
    grammar = gbnf("gate", fitting_text_chars(MAX_TOKENS))
    server = LlamaServerManager(str(gguf), grammar, MAX_TOKENS, seed=0)
    seen: dict[str, Any] = {}
    try:
        seen["token_ids"] = token_ids_agree(tokenizer, server)
        for level in ("L1", "L2"):
            row = demo_row(level, *REAL_SESSION)
            first = len(server.calls)
            started = time.monotonic()
            params = {"temperature": 0.7, "top_p": 0.95, "top_k": -1, "max_tokens": MAX_TOKENS}
            outputs = asyncio.run(run_loop(tokenizer, server, row, params))
            seen[level] = {
                "seconds": round(time.monotonic() - started, 1),
                "row": row,
                "turns": [
                    {
                        "fields": o.turn.fields(),
                        "user": user_message(tokenizer, o.prompt_ids),
                        "response": decode(tokenizer, o.response_ids, special=False),
                        "prompt_tokens": len(o.prompt_ids),
                        "prompt_is_sent": list(o.prompt_ids) == call["prompt_ids"],
                        "response_is_generated": list(o.response_ids) == call["ids"],
                        "mask_all_generated": list(o.response_mask) == [1] * len(o.response_ids),
                    }
                    for o, call in zip(outputs, server.calls[first:], strict=True)
                ],
            }
    finally:
        server.close()
    seen["prompt_length"] = PROMPT_LENGTH
    return seen


def token_ids_agree(tokenizer: Any, server: LlamaServerManager) -> dict:
    """transformers' tokenizer (from the GGUF) and llama.cpp's own, on the demo's
    chat-templated first prompts: the same ids both ways, and the text back."""
    texts = []
    for row in demo_rollout_rows():
        info = row["extra_info"]
        messages = [
            {"role": "user", "content": info["question"] + "\n" + info["chunks"][0]["text"]}
        ]
        texts.append(
            tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        )
    same_ids = same_text = llama_text = 0
    for text in texts:
        hf = tokenizer(text, add_special_tokens=False)["input_ids"]
        llama = server.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        same_ids += hf == llama
        # the agent loop decodes with the policy's tokenizer, as here
        same_text += decode(tokenizer, hf, special=True) == text
        # llama.cpp's own detokenizer, for the record (it shortens long runs of spaces)
        llama_text += server.llm.detokenize(hf, special=True).decode("utf-8") == text
    return {
        "texts": len(texts),
        "same_ids": same_ids,
        "same_text": same_text,
        "llama_detokenize_same_text": llama_text,
    }


# ----------------------------------------------------------------------- replay


def job_replay(tokenizer: Any, groups: list[dict]) -> list[dict]:
    """Per recorded group: each sample's answers fed back (one script a sample, run
    one after the other), the user messages the loop built, the group step's values."""
    out = []
    for group in groups:
        rollouts, samples = {}, []
        for k, sample in enumerate(group["samples"]):
            server = ScriptedServerManager(tokenizer, [sample["responses"]], eos_id(tokenizer))
            outputs = asyncio.run(run_loop(tokenizer, server, group["row"], {"temperature": 1.0}))
            rollouts[k] = outputs
            samples.append(
                {
                    "trajectory_id": sample["trajectory_id"],
                    "users": [user_message(tokenizer, o.prompt_ids) for o in outputs],
                    "responses": [
                        decode(tokenizer, o.response_ids, special=False) for o in outputs
                    ],
                }
            )
        score_group(read_rollout_row(group["row"]), rollouts, validate=False)
        for k, sample in enumerate(samples):
            sample["turns"] = [o.extra_fields["grumem"] for o in rollouts[k]]
            sample["turn_scores"] = [o.turn_score for o in rollouts[k]]
        out.append({"samples": samples})
    return out


# ------------------------------------------------------------------------ group


def job_group(tokenizer: Any, spec: dict) -> dict:
    """Rows of the demo rolled out twice each with scripted answers; the rows verl
    stores (as_dict) through verl's own advantage step."""
    keys, rows_dicts, turns, groups = [], [], [], []
    for n, case in enumerate(spec):
        row = demo_row(case["level"], case["query_id"], case["session"])
        uid = f"case{n}"  # verl's uid: one a dataset row drawn
        rollouts = {}
        for s, script in enumerate(case["scripts"]):
            server = ScriptedServerManager(tokenizer, [script], eos_id(tokenizer))
            rollouts[s] = asyncio.run(run_loop(tokenizer, server, row, {"temperature": 1.0}))
        score_group(read_rollout_row(row), rollouts, validate=False)
        groups.append({"uid": uid, "row": row})
        for s, outputs in rollouts.items():
            for i, o in enumerate(outputs):
                keys.append(f"{uid}_{s}_{i}")
                rows_dicts.append(o.as_dict())
                turns.append(o.extra_fields["grumem"])
    data = verl_batch(rows_dicts, keys)
    config = OmegaConf.create({"use_kl_in_reward": False})
    grumem = compute_advantage_for_multi_trajectories(
        data.select_idxs(list(range(len(keys)))), keys, ESTIMATOR, config=config
    )
    grpo = compute_advantage_for_multi_trajectories(
        data.select_idxs(list(range(len(keys)))), keys, AdvantageEstimator.GRPO, config=config
    )
    return {
        "groups": groups,
        "keys": keys,
        "turns": turns,
        "rm_score_sums": data.batch["token_level_rewards"].sum(dim=-1).tolist(),
        "grumem": per_token_values(grumem),
        "grpo": per_token_values(grpo),
        "metrics": step_metrics(zip(keys, turns, strict=True), "training"),
    }


def verl_batch(rows: list[dict], keys: list[str]) -> DataProto:
    """The rows as verl's trainer makes its advantage batch: responses right-padded,
    token_level_rewards = rm_scores, uid from the key."""
    width = max(len(r["response_mask"]) for r in rows)
    mask = torch.zeros(len(rows), width, dtype=torch.int64)
    scores = torch.zeros(len(rows), width, dtype=torch.float32)
    for i, r in enumerate(rows):
        n = len(r["response_mask"])
        mask[i, :n] = r["response_mask"]
        scores[i, :n] = r["rm_scores"]
    uids = np.array([k.rsplit("_", 2)[0] for k in keys], dtype=object)
    return DataProto.from_dict(
        tensors={"response_mask": mask, "rm_scores": scores, "token_level_rewards": scores},
        non_tensors={"uid": uids},
    )


def per_token_values(data: DataProto) -> list[dict]:
    """Per row: the distinct advantage values on its response tokens, and whether
    advantages equal returns and are 0 off the response."""
    adv, ret, mask = data.batch["advantages"], data.batch["returns"], data.batch["response_mask"]
    out = []
    for a, r, m in zip(adv, ret, mask, strict=True):
        on = a[m.bool()]
        out.append(
            {
                "values": sorted(set(on.tolist())),
                "returns_equal": bool(torch.equal(a, r)),
                "zero_off_response": bool((a[~m.bool()] == 0).all()),
            }
        )
    return out


# ----------------------------------------------------------------------- worker


def job_worker(tokenizer: Any, gguf: Path, scratch: Path, spec: dict) -> dict:
    import ray
    import transfer_queue as tq
    from verl.utils import tensordict_utils as tu

    from grumem.verl.sampler import GrumemReplayBuffer
    from grumem.verl.worker import GrumemAgentLoopManager, GrumemAgentLoopWorker

    model_dir = hf_model_dir(gguf, scratch / "model", tokenizer)
    row = demo_row("L1", spec["query_id"], spec["session"])
    sessions = write_rows(scratch / "sessions.parquet", [row])
    overrides = [
        *spec["overrides"],
        f"data.train_files={sessions}",
        f"data.val_files={sessions}",
        f"actor_rollout_ref.model.path={model_dir}",
        f"data.max_prompt_length={PROMPT_LENGTH}",
        f"data.max_response_length={RESPONSE_LENGTH}",
        "actor_rollout_ref.rollout.n=2",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        "data.train_batch_size=1",
        # the server the GPU recipe names; only its config is read here (no vLLM starts)
        "actor_rollout_ref.rollout.name=vllm",
    ]
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        config = compose(config_name="ppo_trainer", overrides=overrides)
    # the manager named in config makes Ray actors of this worker class
    manager = GrumemAgentLoopManager(config, None)
    seen: dict[str, Any] = {
        "manager_worker_class": manager.agent_loop_workers_class.__ray_actor_class__.__name__,
    }
    started = time.monotonic()
    # logical CPUs: TransferQueue's controller and its two storage units ask one each
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    try:
        tq.init()
        seen["ray_tq_init_s"] = round(time.monotonic() - started, 1)
        scripts = spec["scripts"]
        server = ScriptedServerManager(tokenizer, scripts, eos_id(tokenizer))
        worker = GrumemAgentLoopWorker(config, server, None, None)
        seen["worker_is_tq_worker"] = [c.__name__ for c in type(worker).__mro__[:3]]

        # the trainer's batch: its dataloader's collate_fn over RLHFDataset items, a
        # uid each, global_steps, the prompt registered in TransferQueue as pending
        dataset = RLHFDataset(data_files=[str(sessions)], tokenizer=tokenizer, config=config.data)
        batch_dict = collate_fn([dataset[0]])
        batch_dict["uid"] = np.array([str(uuid.uuid4())], dtype=object)
        batch = tu.get_tensordict(batch_dict)
        tu.assign_non_tensor_data(batch, "global_steps", 1)
        uid = batch_dict["uid"][0]
        tq.kv_batch_put(
            keys=[uid],
            partition_id="train",
            tags=[{"is_prompt": True, "status": "pending", "global_steps": 1}],
        )

        async def rollout_and_sample() -> tuple[Any, dict]:
            await worker.generate_sequences(batch)  # spawns the row's _run_prompt, returns
            await asyncio.wait_for(asyncio.gather(*list(worker.background_tasks)), 600)
            seen["prompt_status"] = tq.kv_list(partition_id="train")["train"][uid]["status"]
            if seen["prompt_status"] != "finished":
                return None, {}
            sampler = GrumemReplayBuffer(
                trainer_mode="sync",
                trainer_config=config.trainer.v1.get("sync", {}),
                max_off_policy_threshold=None,
                max_off_policy_strategy="drop",
                sampler_kwargs={},
                poll_interval=0.2,
                refill_fn=lambda n: 0,
            )
            # the sampler polls TransferQueue until the group is finished
            return await asyncio.get_running_loop().run_in_executor(
                None, lambda: sampler.sample(global_steps=1, partition_id="train", batch_size=1)
            )

        kv, metrics = asyncio.run(rollout_and_sample())
        if kv is None:
            return seen
        seen["sampled_keys"] = list(kv.keys)
        seen["metrics"] = {k: v for k, v in metrics.items() if "grumem" in k}
        stored = tq.kv_batch_get(
            keys=kv.keys, partition_id=kv.partition_id, select_fields=["extra_fields", "extra_info"]
        )
        extra = [getattr(v, "data", v) for v in stored["extra_fields"]]
        infos = [getattr(v, "data", v) for v in stored["extra_info"]]
        seen["turns"] = [e["grumem"] for e in extra]
        seen["stored_chunk_texts"] = sum("text" in c for i in infos for c in i["chunks"])
        seen["stored_chunk_shas"] = [[c["chunk_sha"] for c in i["chunks"]] for i in infos]
        # the trainer's advantage step (trainer_base._compute_advantage) on those rows
        fields = ["uid", "response_mask", "rm_scores"]
        data = tq.kv_batch_get(keys=kv.keys, partition_id=kv.partition_id, select_fields=fields)
        data = DataProto(batch=data.to_padded_tensor())
        data.batch["token_level_rewards"] = data.batch["rm_scores"]
        data.non_tensor_batch["uid"] = np.array(data.batch.pop("uid").tolist(), dtype=object)
        result = compute_advantage_for_multi_trajectories(
            data,
            batch_keys=kv.keys,
            adv_estimator=config.algorithm.adv_estimator,
            num_repeat=config.actor_rollout_ref.rollout.n,
            config=config.algorithm,
        )
        seen["advantages"] = per_token_values(result)
        seen["row_bytes"] = row_bytes(row)
        seen["refill"] = refill(config, tokenizer, scratch, spec)
    finally:
        tq.close()
        ray.shutdown()
    return seen


def refill(config: Any, tokenizer: Any, scratch: Path, spec: dict) -> dict:
    """A row whose prompt is over its budget (section budget 50 tokens: the first chunk
    is over it, whatever the policy writes) drawn first, in the same Ray session and
    TransferQueue as the worker job. GrumemReplayBuffer as verl's trainer builds a custom
    sampler (no sync_refill_failed_groups given), its refill_fn submitting the next row
    of a queue as the trainer's _add_prompts_to_generate does: the over-budget row again,
    then a good one. Then a sampler whose every refill draws the over-budget row."""
    import logging

    import transfer_queue as tq
    from verl.utils import tensordict_utils as tu

    from grumem.core.template import Budget
    from grumem.verl.sampler import GrumemReplayBuffer
    from grumem.verl.worker import GrumemAgentLoopWorker

    (bad,) = [
        r
        for r in demo_rollout_rows(budget=Budget(section=50))
        if (r["extra_info"]["query_id"], r["extra_info"]["session"]) == tuple(spec["over_budget"])
    ]
    good = demo_row("L1", spec["query_id"], spec["session"])
    sessions = write_rows(scratch / "refill.parquet", [bad, good])
    dataset = RLHFDataset(data_files=[str(sessions)], tokenizer=tokenizer, config=config.data)
    server = ScriptedServerManager(tokenizer, spec["scripts"], eos_id(tokenizer))
    worker = GrumemAgentLoopWorker(config, server, None, None)
    warnings: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            warnings.append(record.getMessage())

    logging.getLogger("grumem.verl.sampler").addHandler(Collect(level=logging.WARNING))
    submitted: list[str] = []  # "bad" / "good", in the order drawn

    async def submit(index: int) -> None:
        batch_dict = collate_fn([dataset[index]])
        batch_dict["uid"] = np.array([str(uuid.uuid4())], dtype=object)
        batch = tu.get_tensordict(batch_dict)
        tu.assign_non_tensor_data(batch, "global_steps", 1)
        tag = {"is_prompt": True, "status": "pending", "global_steps": 1}
        tq.kv_batch_put(keys=[batch_dict["uid"][0]], partition_id="train", tags=[tag])
        submitted.append("bad" if index == 0 else "good")
        await worker.generate_sequences(batch)

    def sampler(queue: list[int], loop: asyncio.AbstractEventLoop) -> Any:
        def refill_fn(count: int) -> int:
            for _ in range(count):
                index = queue.pop(0) if queue else 0
                asyncio.run_coroutine_threadsafe(submit(index), loop).result(60)
            return count

        # what verl's _build_replay_buffer gives a custom sampler: no refill settings
        return GrumemReplayBuffer(
            trainer_mode="sync",
            trainer_config=config.trainer.v1.get("sync", {}),
            max_off_policy_threshold=None,
            max_off_policy_strategy="drop",
            sampler_kwargs={},
            poll_interval=0.1,
            refill_fn=refill_fn,
        )

    async def run(queue: list[int]) -> tuple[Any, dict]:
        loop = asyncio.get_running_loop()
        await submit(0)
        buffer = sampler(queue, loop)
        try:
            return await loop.run_in_executor(
                None, lambda: buffer.sample(global_steps=1, partition_id="train", batch_size=1)
            )
        finally:
            await asyncio.gather(*list(worker.background_tasks), return_exceptions=True)

    seen: dict[str, Any] = {}
    kv, metrics = asyncio.run(run([0, 1]))
    seen["submitted"] = list(submitted)
    seen["sampled_keys"] = list(kv.keys)
    seen["sampled_rows"] = sorted(
        {
            "/".join((i["project"], i["query_id"], i["session"]))
            for i in (
                getattr(v, "data", v)
                for v in tq.kv_batch_get(
                    keys=kv.keys, partition_id="train", select_fields=["extra_info"]
                )["extra_info"]
            )
        }
    )
    seen["metrics"] = {k: v for k, v in metrics.items() if isinstance(v, int | float)}
    seen["server_rollouts"] = len(server.assigned)
    seen["warnings"] = list(warnings)
    tq.kv_clear(partition_id="train", keys=list(kv.keys))
    # every refill draws the dropped row: the sampler stops, saying so
    submitted.clear()
    try:
        asyncio.run(run([]))
        seen["all_dropped_error"] = None
    except Exception as e:
        seen["all_dropped_error"] = f"{type(e).__name__}: {e}"
    seen["all_dropped_draws"] = len(submitted)
    return seen


def hf_model_dir(gguf: Path, out: Path, tokenizer: Any) -> Path:
    """SmolLM2's tokenizer and config from the GGUF, as the directory verl's
    HFModelConfig loads (actor_rollout_ref.model.path); no weights are needed here."""
    tokenizer.save_pretrained(out)
    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # a GGUF names its architecture family (llama), not the HF class verl asks for
    config.architectures = ["LlamaForCausalLM"]
    config.save_pretrained(out)
    return out


def row_bytes(row: dict) -> dict:
    """What a training row copies of its dataset row (pickled extra_info, bytes), with
    and without the chunk texts: the demo row, and a 200-chunk session at the
    section budget."""
    from grumem.verl.rollout import without_chunk_texts

    big = json.loads(json.dumps(row))
    chunks = big["extra_info"]["chunks"]
    # 200 distinct chunks of ~5,000 tokens (budget.section) each, ~4 characters a token
    big["extra_info"]["chunks"] = [
        {"text": text, "chunk_sha": hashlib.sha256(text.encode("utf-8")).hexdigest()}
        for text in (f"{i} " + (chunks[i % len(chunks)]["text"] * 30)[:20_000] for i in range(200))
    ]

    def size(r: dict) -> int:
        return len(pickle.dumps(r["extra_info"]))

    return {
        "demo": size(row),
        "demo_without_texts": size(without_chunk_texts(row)),
        "chunks_200": size(big),
        "chunks_200_without_texts": size(without_chunk_texts(big)),
    }


# ---------------------------------------------------------------------- compose


def job_compose(overrides: list[str]) -> dict:
    """A command line's overrides composed onto verl's own trainer config, as
    `python -m verl.trainer.main_ppo OVERRIDES` does first; what they resolve to."""
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        config = compose(config_name="ppo_trainer", overrides=overrides)
    rollout = config.actor_rollout_ref.rollout
    return {
        "n": rollout.n,
        "prompt_length": rollout.prompt_length,
        "response_length": rollout.response_length,
        "agent_loop": rollout.agent.default_agent_loop,
        "manager": rollout.agent.agent_loop_manager_class,
        "adv_estimator": config.algorithm.adv_estimator,
        "sampler": config.trainer.v1.sampler.custom_sampler.name,
        "model": config.actor_rollout_ref.model.path,
        "n_gpus": config.trainer.n_gpus_per_node,
    }


# ---------------------------------------------------------------------- dataset


def job_dataset(tokenizer: Any, spec: dict) -> dict:
    """RLHFDataset over the file the overrides name (data.train_files), items through
    verl's collate_fn; the chosen row's columns passed to the loop as verl's worker
    passes them (each non-tensor column's value at the row, agent_name taken out)."""
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        config = compose(config_name="ppo_trainer", overrides=spec["overrides"])
    dataset = RLHFDataset(
        data_files=config.data.train_files, tokenizer=tokenizer, config=config.data
    )
    batch = collate_fn([dataset[i] for i in range(len(dataset))])
    columns = {k: v for k, v in batch.items() if isinstance(v, np.ndarray)}
    items = [{k: v[i] for k, v in columns.items()} for i in range(len(dataset))]
    seen: dict[str, Any] = {
        "train_files": config.data.train_files,
        "rows": len(dataset),
        "columns": sorted(columns),
        "agent_names": [str(item["agent_name"]) for item in items],
        "raw_prompts": [[dict(m) for m in item["raw_prompt"]] for item in items],
        "keys": [[item["extra_info"]["query_id"], item["extra_info"]["session"]] for item in items],
    }
    (kwargs,) = [
        item
        for item in items
        if [item["extra_info"]["query_id"], item["extra_info"]["session"]] == spec["key"]
    ]
    kwargs = dict(kwargs)
    seen["agent_name"] = str(kwargs.pop("agent_name"))
    server = ScriptedServerManager(tokenizer, [spec["script"]], eos_id(tokenizer))
    outputs = asyncio.run(run_loop(tokenizer, server, kwargs, {"temperature": 1.0}))
    seen["turns"] = [
        {
            "fields": o.turn.fields(),
            "user": user_message(tokenizer, o.prompt_ids),
            "response": decode(tokenizer, o.response_ids, special=False),
        }
        for o in outputs
    ]
    return seen


# ------------------------------------------------------------------------- main


def main(spec_path: str) -> dict:
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    gguf, scratch = Path(spec["gguf"]), Path(spec["scratch"])
    started = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    seen: dict[str, Any] = {"tokenizer_s": round(time.monotonic() - started, 1)}
    for job, inputs in spec["jobs"].items():
        t0 = time.monotonic()
        if job == "loop":
            seen[job] = job_loop(tokenizer, gguf)
        elif job == "replay":
            seen[job] = job_replay(tokenizer, inputs)
        elif job == "group":
            seen[job] = job_group(tokenizer, inputs)
        elif job == "compose":
            seen[job] = job_compose(inputs)
        elif job == "dataset":
            seen[job] = job_dataset(tokenizer, inputs)
        elif job == "worker":
            seen[job] = job_worker(tokenizer, gguf, scratch, inputs)
        else:
            raise SystemExit(f"unknown job {job!r}")
        seen[f"{job}_s"] = round(time.monotonic() - t0, 1)
    seen["total_s"] = round(time.monotonic() - started, 1)
    return seen


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), default=str))
