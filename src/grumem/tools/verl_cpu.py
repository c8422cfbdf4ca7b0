"""`grumem verl-cpu`: verl's own trainer with grumem's online loop on this CPU machine
(grumem.verl.embedded), run with this interpreter, which must have verl
(`.venv-verl/bin/grumem verl-cpu …`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grumem.verl.cpu_model import model_dir
from grumem.verl.embedded import (
    ENVIRONMENT_KEYS,
    CpuSettings,
    command,
    cpu_environment,
    run,
    shell_line,
)


def main(args: argparse.Namespace) -> int:
    settings = CpuSettings(
        steps=args.steps,
        batch=args.batch,
        rollouts=args.rollouts,
        max_prompt_tokens=args.max_prompt_tokens,
        max_response_tokens=args.max_response_tokens,
        lr=args.lr,
        grammar=args.grammar,
    )
    out = Path(args.out).resolve()
    model = model_dir(args.model)
    argv = command(args.corpus, model, out, settings, args.overrides, python=sys.executable)
    env = cpu_environment(out, threads=settings.threads)
    if args.print_only:
        print(shell_line(argv, env, ENVIRONMENT_KEYS))
        return 0
    out.mkdir(parents=True, exist_ok=True)
    return run(argv, env, out)
