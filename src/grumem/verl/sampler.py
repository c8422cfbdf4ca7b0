"""grumem's replay buffer (trainer.v1.sampler.custom_sampler, path
`pkg://grumem.verl.sampler`, name GrumemReplayBuffer): verl's own sampling,
plus grumem's metrics of the sampled rows in the step's metrics dict.

verl's v1 trainer logs what its sampler returns beside each batch; the
training rows' extra_fields["grumem"] (set by the group step) give the parse
rate, the update-gate agreement with the labels, exit on time / early / late,
the mean memory tokens and the groups without variance (grumem.verl.group_step
.step_metrics). Building this sampler is also what imports grumem's estimator
in the trainer's process.
"""

from __future__ import annotations

from typing import Any

import transfer_queue as tq
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

import grumem.verl.estimator  # noqa: F401  registers algorithm.adv_estimator=grumem
from grumem.verl.group_step import step_metrics


class GrumemReplayBuffer(ReplayBuffer):  # type: ignore[misc]  # verl's class: Any to mypy
    def sample(
        self, global_steps: int, partition_id: str, batch_size: int
    ) -> tuple[Any, dict[str, Any]]:
        batch, metrics = super().sample(global_steps, partition_id, batch_size)
        metrics.update(batch_metrics(batch))
        return batch, metrics


def batch_metrics(batch: Any) -> dict[str, float]:
    """step_metrics over a sampled KVBatchMeta's grumem rows (padding rows left out)."""
    data = tq.kv_batch_get(
        keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"]
    )
    rows = []
    for key, value, tag in zip(batch.keys, data["extra_fields"], batch.tags, strict=True):
        fields = getattr(value, "data", value)
        if isinstance(fields, dict) and "grumem" in fields and not tag.get("is_padding", False):
            rows.append((key, fields["grumem"]))
    prefix = "training" if batch.partition_id == "train" else "validation"
    return step_metrics(rows, prefix)
