"""`grumem verl-config`: print the Hydra overrides of grumem.verl.turn_overrides (or, with
--online, grumem.verl.online_overrides), one a line, quoted for a shell."""

from __future__ import annotations

import argparse

from grumem.errors import GrumemError
from grumem.verl.turn_overrides import MAX_PROMPT_LENGTH, MAX_RESPONSE_LENGTH, turn_overrides

REWARD_KWARGS = ("w_update", "w_exit", "w_format", "format_failure")
ONLINE_ONLY = ("rollout_n", "level", "batch", "mini_batch", "save_freq", "test_freq")


def main(args: argparse.Namespace) -> int:
    """The overrides for `python -m verl.trainer.main_ppo $(grumem verl-config …)`."""
    kwargs = {k: getattr(args, k) for k in REWARD_KWARGS if getattr(args, k) is not None}
    if args.online:
        lines = _online(args, kwargs)
    else:
        given = [k for k in ONLINE_ONLY if getattr(args, k) is not None]
        if given:
            flags = ", ".join(f"--{k.replace('_', '-')}" for k in given)
            raise GrumemError(f"{flags}: settings of online training; give them with --online")
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
    from grumem.verl.online_overrides import (
        ROLLOUT_N,
        OnlineSettings,
        online_overrides,
        shell_lines,
    )

    if reward_kwargs:
        # online, each turn's value is the group step's advantage: no reward function runs
        flags = ", ".join(f"--{k.replace('_', '-')}" for k in reward_kwargs)
        raise GrumemError(
            f"{flags}: compute_score's weights are for turn-level training; online, the"
            " return's weights are the export's (export.return_weights)"
        )
    settings = OnlineSettings(
        rollout_n=ROLLOUT_N if args.rollout_n is None else args.rollout_n,
        level=args.level,
        batch=args.batch,
        mini_batch=args.mini_batch,
        save_freq=args.save_freq,
        test_freq=args.test_freq,
        max_prompt_length=args.max_prompt_length,
        max_response_length=args.max_response_length,
    )
    return shell_lines(online_overrides(args.corpus, args.val_corpus, settings))
