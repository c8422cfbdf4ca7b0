"""`grumem verl-config`: print the Hydra overrides of grumem.verl.config, one a line."""

from __future__ import annotations

import argparse

from grumem.verl.config import MAX_PROMPT_LENGTH, MAX_RESPONSE_LENGTH, verl_overrides

REWARD_KWARGS = ("w_update", "w_exit", "w_format", "format_failure")


def main(args: argparse.Namespace) -> int:
    """The overrides for `python -m verl.trainer.main_ppo $(grumem verl-config …)`."""
    kwargs = {k: getattr(args, k) for k in REWARD_KWARGS if getattr(args, k) is not None}
    lines = verl_overrides(
        args.corpus,
        args.val_corpus,
        MAX_PROMPT_LENGTH if args.max_prompt_length is None else args.max_prompt_length,
        MAX_RESPONSE_LENGTH if args.max_response_length is None else args.max_response_length,
        kwargs,
    )
    for line in lines:
        print(line)
    return 0
