"""grumem's replay buffer (trainer.v1.sampler.custom_sampler, path
`pkg://grumem.verl.sampler`, name GrumemReplayBuffer): verl's own sampling, with
failed groups evicted and refilled, grumem's dropped rows reported, and grumem's
metrics of the sampled rows in the step's metrics dict.

- Failed groups. verl's trainer hands a custom sampler none of its own settings
  (v1/trainer_base.py, _build_replay_buffer: sync_refill_failed_groups and
  gen_batch_size go to its built-in buffer only), so without this a group whose
  rollout failed stays "sampleable" with no training row: the batch shrinks, and a
  batch of such groups stops the run ("Sync replay buffer selected terminal groups
  with no materializable trajectories"). This buffer always refills in sync mode:
  verl's own eviction (replay_buffer.py, _terminal_eviction_reasons) drops a failed
  group that stored no row (grumem's worker fails a group as a whole) and asks the
  trainer for a fresh row (refill_fn), so every batch is whole; verl counts each
  eviction (`training/rollout_failure/evicted_samples`). The trainer's dataloader
  fetches one row at a time for it when the config sets
  trainer.v1.sampler.sync_refill_failed_groups=True (`grumem verl-config
  --online` prints it).
- Dropped rows. A row that cannot run (grumem.verl.worker: over the budget) is
  marked once by the worker; a later draw of it fails at once and is refilled.
  Each marked row is reported here once, with its id and error, and counted
  (`training/grumem/rows_dropped_total`). Should every row left be dropped, the
  refills could only draw dropped rows: after more such draws in one sample than
  can happen while any row is left, the run stops saying so. The draws are
  counted where verl decides which groups to evict: ReplayBuffer's
  _terminal_eviction_reasons, a method of verl 0.9.1 (pinned) that this class
  overrides and tests/verl/test_verl_online_rules.py holds.
- Metrics. verl's v1 trainer logs what its sampler returns beside each batch; the
  training rows' extra_fields["grumem"] (set by the group step) give the parse
  rate, the update-gate agreement with the labels, exit on time / early / late,
  the mean memory tokens and the groups without variance
  (grumem.verl.group_step.step_metrics).

Building this sampler is also what imports grumem's estimator in the trainer's
process.
"""

from __future__ import annotations

import logging
from typing import Any

import transfer_queue as tq
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

import grumem.verl.estimator  # noqa: F401  registers algorithm.adv_estimator=grumem
from grumem.errors import GrumemError
from grumem.verl.group_step import step_metrics
from grumem.verl.worker import DROPPED, DROPPED_DRAW

logger = logging.getLogger(__name__)


class GrumemReplayBuffer(ReplayBuffer):  # type: ignore[misc]  # verl's class: Any to mypy
    def __init__(self, *args: Any, **kwargs: Any):
        if kwargs.get("trainer_mode", args[0] if args else None) == "sync":
            # what verl gives its own buffer when sync_refill_failed_groups is set
            kwargs.setdefault("sync_refill_failed_groups", True)
            kwargs.setdefault("gen_batch_size", 1)
        super().__init__(*args, **kwargs)
        self.reported: dict[str, str] = {}  # dropped rows reported: DROPPED key -> partition
        self.dropped_draws = 0  # draws of dropped rows in the current sample
        self.batch_size = 1  # the current sample's

    def sample(
        self, global_steps: int, partition_id: str, batch_size: int
    ) -> tuple[Any, dict[str, Any]]:
        self.dropped_draws, self.batch_size = 0, batch_size
        batch, metrics = super().sample(global_steps, partition_id, batch_size)
        metrics.update(self.dropped_rows(partition_id))
        metrics.update(batch_metrics(batch))
        return batch, metrics

    def _terminal_eviction_reasons(self, global_steps: int, partition_id: str) -> Any:
        reasons = super()._terminal_eviction_reasons(global_steps, partition_id)
        failed = reasons[2]
        if failed:
            tags = tq.kv_list(partition_id=partition_id).get(partition_id, {})
            self.dropped_draws += sum(DROPPED_DRAW in tags.get(uid, {}) for uid in failed)
            self.dropped_rows(partition_id)
            dropped = self.dropped_count(partition_id)
            # while a row is left, one chain of refills draws at most every dropped row
            # twice (the end of an epoch, the start of the next) before it meets one
            if dropped and self.dropped_draws > 2 * dropped * (self.batch_size + 1):
                raise GrumemError(
                    f"every {partition_id} row left is dropped ({dropped} rows, each over the"
                    " budget or not a grumem row, reported above): raise"
                    " data.max_prompt_length or lower the export's budget, and export again"
                )
        return reasons

    def dropped_rows(self, partition_id: str) -> dict[str, int]:
        """Report each dropped row of the partition not reported yet (once, with its id
        and error); how many rows of it are dropped, as a metric."""
        marks = tq.kv_list(partition_id=DROPPED).get(DROPPED, {})
        for key, tag in sorted(marks.items()):
            if tag.get("partition") != partition_id or key in self.reported:
                continue
            logger.warning(
                "sessions row %s is dropped from %s for the rest of the run, never rolled"
                " out again: %s",
                tag.get("row"),
                partition_id,
                tag.get("error"),
            )
            self.reported[key] = partition_id
        prefix = "training" if partition_id == "train" else "validation"
        return {f"{prefix}/grumem/rows_dropped_total": self.dropped_count(partition_id)}

    def dropped_count(self, partition_id: str) -> int:
        return sum(p == partition_id for p in self.reported.values())


def batch_metrics(batch: Any) -> dict[str, float]:
    """step_metrics over a sampled KVBatchMeta's grumem rows (padding rows left out)."""
    if not batch.keys:
        return {}
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
