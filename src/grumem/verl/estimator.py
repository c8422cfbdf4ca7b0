"""verl's advantage estimator `grumem` (algorithm.adv_estimator=grumem).

The group step (grumem.verl.worker) has already computed each turn's advantage
Â_t = α·Â_traj + (1−α)·Â_turn and put it in the turn's rm_scores, at its last
response token. verl's v1 trainer hands every training row (one turn) to the
estimator through its own compute_advantage (compute_advantage_for_multi_trajectories
broadcasts only for `grpo`), so the estimator spreads that value over the
row's response tokens: advantages = returns = Â_t on every generated token.
It never normalises again: the group of a turn is its row's rollouts, which the
estimator cannot see (it gets rows and their prompt uid, not turns or sessions).
"""

from __future__ import annotations

from typing import Any

import torch
from verl.trainer.ppo.core_algos import register_adv_est

ESTIMATOR = "grumem"


@register_adv_est(ESTIMATOR)  # type: ignore[untyped-decorator]  # verl's: Any to mypy
def grumem_turn_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    config: Any = None,
    **_verl: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns), each the row's Â_t on its response tokens, 0 elsewhere."""
    if config is not None and getattr(config, "use_kl_in_reward", False):
        # a KL penalty added to the rewards would be summed into Â_t token by token
        raise ValueError(
            "algorithm.adv_estimator=grumem takes the group step's advantages as they are:"
            " set algorithm.use_kl_in_reward=False and use actor_rollout_ref.actor.use_kl_loss"
        )
    per_row = (token_level_rewards * response_mask).sum(dim=-1, keepdim=True)
    advantages = per_row * response_mask
    return advantages, advantages
