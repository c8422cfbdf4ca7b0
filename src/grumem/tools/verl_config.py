"""`grumem verl-config`: print the Hydra overrides of grumem.verl.turn_overrides, one a line."""

from __future__ import annotations

import argparse

from grumem.verl.turn_overrides import MAX_PROMPT_LENGTH, MAX_RESPONSE_LENGTH, turn_overrides

REWARD_KWARGS = ("w_update", "w_exit", "w_format", "format_failure")


def main(args: argparse.Namespace) -> int:
    """The overrides for `python -m verl.trainer.main_ppo $(grumem verl-config …)`."""
    kwargs = {k: getattr(args, k) for k in REWARD_KWARGS if getattr(args, k) is not None}
    if args.online:
        lines = _online(args, kwargs)
    elif args.rollout_n is not None:
        from grumem.errors import GrumemError

        raise GrumemError("--rollout-n is the online group's size: give it with --online")
    else:
        lines = turn_overrides(
            args.corpus,
            args.val_corpus,
            MAX_PROMPT_LENGTH if args.max_prompt_length is None else args.max_prompt_length,
            MAX_RESPONSE_LENGTH if args.max_response_length is None else args.max_response_length,
            kwargs,
        )
    for line in lines:
        print(line)
    return 0


def _online(args: argparse.Namespace, reward_kwargs: dict) -> list[str]:
    from grumem.errors import GrumemError
    from grumem.verl.online_overrides import ROLLOUT_N, online_overrides

    if reward_kwargs:
        # online, each turn's value is the group step's advantage: no reward function runs
        flags = ", ".join(f"--{k.replace('_', '-')}" for k in reward_kwargs)
        raise GrumemError(
            f"{flags}: compute_score's weights are for turn-level training; online, the"
            " return's weights are the export's (export.return_weights)"
        )
    return online_overrides(
        args.corpus,
        args.val_corpus,
        ROLLOUT_N if args.rollout_n is None else args.rollout_n,
        args.max_prompt_length,
        args.max_response_length,
    )
