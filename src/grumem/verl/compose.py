"""verl's trainer config as `python -m verl.trainer.main_ppo OVERRIDES` composes it, resolved,
as YAML on stdout: `python -m grumem.verl.compose OVERRIDES` (in the interpreter that
has verl; grumem train writes it to results/{project}/train/config.yaml).

Composing is what verl's entry point does first, with the same Hydra config module,
so an override verl would refuse is refused here, before Ray starts. `hydra.*`
overrides set Hydra's own run, not the trainer's config: leave them out.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

CONFIG_MODULE = "verl.trainer.config"  # where verl's main_ppo finds ppo_trainer.yaml
CONFIG_NAME = "ppo_trainer"


def composed_yaml(overrides: Sequence[str]) -> str:
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    with initialize_config_module(config_module=CONFIG_MODULE, version_base=None):
        config = compose(config_name=CONFIG_NAME, overrides=list(overrides))
    text: str = OmegaConf.to_yaml(config, resolve=True)
    return text


if __name__ == "__main__":
    sys.stdout.write(composed_yaml(sys.argv[1:]))
