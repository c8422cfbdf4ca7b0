"""The group step inside verl's v1 rollout: an agent-loop worker and its manager.

verl's AgentLoopWorkerTQ runs the rollout.n rollouts of one dataset row in one
`_run_prompt`, each through `_run_agent_loop`, whose `_agent_loop_postprocess`
puts the rollout's outputs into TransferQueue. Stock postprocess copies the
last output's reward onto the earlier ones, so per-turn values would not
survive it, and it runs per rollout, before the group is complete.

GrumemAgentLoopWorker (a subclass; GrumemAgentLoopManager names it, and
`actor_rollout_ref.rollout.agent.agent_loop_manager_class` names the manager)
holds each rollout of a grumem row at postprocess until all n of its row have
arrived; the last to arrive runs the group step (grumem.verl.group_step) and
sets every turn's score (TurnOutput.turn_score, which reaches rm_scores
whatever the copy does); then each rollout goes on through verl's own
postprocess. A rollout that fails releases its siblings with the error, so the
row fails as a whole, with no training row of it stored: grumem's sampler then
evicts the group and has a fresh row drawn in its place (verl's refill of failed
groups), so a batch is never short of a row.

A row that cannot run whatever the policy writes (a prompt over the budget by
its question or a chunk, the agent loop's TurnBudgetError; or not a grumem row,
RolloutRowError) is dropped for the rest of the run: the worker that meets the
error marks the row in TransferQueue (partition DROPPED, one key a row, the
error in its tag), every worker answers a later draw of a marked row as failed
at once without rolling it out (verl refills it), and grumem's sampler reports
each marked row once. The marks are TransferQueue's, so they reach every worker;
verl's sync trainer does not checkpoint TransferQueue, so a resumed run meets
such a row once more, and drops it again. A prompt over the budget by the memory
the policy wrote is the rollout's failure, not the row's: the group is refilled,
the row stays.

Each turn's training row holds the dataset row's columns (verl copies them
in); the chunk texts are dropped from that copy: a 200-chunk session would
otherwise be carried by each of its 200 turns' rows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import ray
import transfer_queue as tq
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ, AgentLoopWorkerTQ

import grumem.verl.estimator  # noqa: F401  registers algorithm.adv_estimator=grumem
from grumem.errors import GroupFailed, RolloutRowError, TurnBudgetError
from grumem.records.rollout_row import RolloutRow
from grumem.verl.agent_loop import TurnOutput
from grumem.verl.group_step import group_step, turn_fields
from grumem.verl.rollout import plain, read_rollout_row, without_chunk_texts

DROPPED = "grumem_dropped"  # TransferQueue partition: one key a dropped row
DROPPED_DRAW = "grumem_dropped_row"  # a failed prompt's tag: a draw of a dropped row


def row_key(columns: Mapping[str, Any]) -> str | None:
    """The row a prompt is (project/query_id/session), from its extra_info; None when it
    names none (not a grumem row)."""
    info = plain(columns.get("extra_info"))
    if not isinstance(info, Mapping):
        return None
    parts = [info.get(k) for k in ("project", "query_id", "session")]
    names = [p for p in parts if isinstance(p, str)]
    return "/".join(names) if len(names) == len(parts) else None


def is_the_rows(error: BaseException) -> bool:
    """An error every rollout of the row meets, whatever the policy writes."""
    if isinstance(error, TurnBudgetError):
        return error.component != "memory"
    return isinstance(error, RolloutRowError)


def dropped_key(partition: str, row: str) -> str:
    """A dropped row's key in DROPPED: its partition (train, val) and the row."""
    return f"{partition}:{row}"


class _Group:
    """The rollouts of one row, as they arrive at postprocess."""

    def __init__(self, n: int):
        self.n = n
        self.rollouts: dict[int, list[TurnOutput]] = {}
        self.ready = asyncio.Event()
        self.error: BaseException | None = None

    def fail(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error
        self.ready.set()


def score_group(row: RolloutRow, rollouts: Mapping[int, list[TurnOutput]], validate: bool) -> None:
    """Run the group step over the rollouts (by session id) and set each turn's score:
    Â_t in training, the rollout's return R_i in validation (no group to compare).
    Each turn becomes extra_fields["grumem"] here, as plain values: what verl stores."""
    order = sorted(rollouts)
    values = group_step(row, [[o.turn for o in rollouts[s]] for s in order])
    for session, rollout in zip(order, values.rollouts, strict=True):
        reward_info = rollout.trajectory_fields()
        for output, turn in zip(rollouts[session], rollout.turns, strict=True):
            output.extra_fields["grumem"] = turn_fields(output.turn, rollout, turn, values)
            output.turn_score = rollout.ret if validate else turn.advantage
            # a reward_score keeps verl from scoring the rollout again with a reward function
            output.reward_score = output.turn_score
            output.extra_fields["reward_extra_info"] = reward_info


class GrumemAgentLoopWorker(AgentLoopWorkerTQ.__ray_actor_class__):  # type: ignore[misc]
    """AgentLoopWorkerTQ with the group step of grumem rows (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.grumem_groups: dict[tuple[Any, bool], _Group] = {}

    async def _run_prompt(
        self,
        prompt: dict[str, Any],
        sampling_params: dict[str, Any],
        trajectory: dict[str, Any],
        trace: bool = False,
    ) -> None:
        validate = bool(trajectory["validate"])
        partition = "val" if validate else "train"
        row = row_key(prompt)
        if row is not None and await _is_dropped(partition, row):
            # no rollout: the prompt fails at once, and the sampler draws another
            tag = {"status": "failure", DROPPED_DRAW: row}
            await tq.async_kv_put(key=prompt["uid"], partition_id=partition, tag=tag)
            return
        rollout = self.config.actor_rollout_ref.rollout
        n = prompt.get("__rollout_n__", rollout.val_kwargs.n if validate else rollout.n)
        key = (prompt["uid"], validate)
        self.grumem_groups[key] = _Group(int(n))
        try:
            await super()._run_prompt(prompt, sampling_params, trajectory, trace)
        finally:
            self.grumem_groups.pop(key, None)

    async def _run_agent_loop(
        self,
        sampling_params: dict[str, Any],
        trajectory: dict[str, Any],
        *,
        agent_name: str,
        **kwargs: Any,
    ) -> Any:
        try:
            return await super()._run_agent_loop(
                sampling_params, trajectory, agent_name=agent_name, **kwargs
            )
        except BaseException as e:
            validate = bool(trajectory["validate"])
            group = self.grumem_groups.get((kwargs.get("uid"), validate))
            if group is not None:
                group.fail(e)
            row = row_key(kwargs)
            if row is not None and is_the_rows(e):
                await _drop(row, "val" if validate else "train", e)
            raise

    async def _agent_loop_postprocess(self, output: Any, validate: bool, **kwargs: Any) -> Any:
        outputs = output if isinstance(output, list) else [output]
        if not outputs or not all(isinstance(o, TurnOutput) for o in outputs):
            return await super()._agent_loop_postprocess(output, validate, **kwargs)
        group = self.grumem_groups[kwargs["uid"], bool(validate)]
        group.rollouts[int(kwargs["session_id"])] = outputs
        if len(group.rollouts) == group.n and not group.ready.is_set():
            try:
                score_group(read_rollout_row(kwargs), group.rollouts, bool(validate))
            except BaseException as e:
                group.fail(e)
                raise
            group.ready.set()
        await group.ready.wait()
        if group.error is not None:
            raise GroupFailed(
                f"rollout {kwargs['session_id']} of row {kwargs['uid']} is dropped with its"
                f" group: {group.error}"
            ) from group.error
        return await super()._agent_loop_postprocess(
            outputs, validate, **without_chunk_texts(kwargs)
        )


class GrumemAgentLoopManager(AgentLoopManagerTQ):  # type: ignore[misc]  # verl's: Any
    """AgentLoopManagerTQ whose workers are GrumemAgentLoopWorker."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.agent_loop_workers_class = ray.remote(GrumemAgentLoopWorker)


async def _is_dropped(partition: str, row: str) -> bool:
    marks = await tq.async_kv_list(partition_id=DROPPED)
    return dropped_key(partition, row) in marks.get(DROPPED, {})


async def _drop(row: str, partition: str, error: BaseException) -> None:
    """Mark the row dropped (before verl publishes its prompt's failure, so the sampler
    that evicts the group finds the mark)."""
    tag = {"row": row, "partition": partition, "error": f"{type(error).__name__}: {error}"}
    await tq.async_kv_put(key=dropped_key(partition, row), partition_id=DROPPED, tag=tag)
