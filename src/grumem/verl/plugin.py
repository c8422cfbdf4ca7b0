"""grumem's CPU backend for verl, loaded by verl itself in every process that imports
it: `VERL_USE_EXTERNAL_MODULES=grumem.verl.plugin` (verl/__init__ imports the
modules it names; Ray's workers inherit the variable), with `VERL_PLATFORM=cpu`.

Importing it registers, through verl's own registries:
- the platform `cpu` (grumem.verl.cpu_platform; PlatformRegistry);
- verl's FSDP engines for device `cpu` (EngineRegistry: verl registers them for
  cuda and npu only; FSDP2 runs on the CPU as it is);
- the rollout `grumem_cpu`: its replica (RolloutReplicaRegistry, loaded when the
  trainer asks for it) and its in-worker adapter (grumem.verl.private);
- plain `gloo` as the process group's backend on the CPU platform
  (grumem.verl.private).
It refuses any verl but the pinned one first.
"""

from __future__ import annotations

from typing import Any

from grumem.verl.private import register_rollout_adapter, require_pinned_verl, use_plain_gloo

require_pinned_verl()

from grumem.verl import cpu_platform  # noqa: E402  registers the platform `cpu`

ROLLOUT_NAME = "grumem_cpu"
ADAPTER = "grumem.verl.cpu_rollout.CpuRolloutAdapter"


def _load_replica() -> Any:
    from grumem.verl.cpu_rollout import CpuReplica

    return CpuReplica


def _register() -> None:
    from verl.workers.engine import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import (
        FSDPEngineWithLMHead,
        FSDPEngineWithValueHead,
    )
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    use_plain_gloo(cpu_platform.selected)
    for model_type, engine in (
        ("language_model", FSDPEngineWithLMHead),
        ("value_model", FSDPEngineWithValueHead),
    ):
        EngineRegistry.register(model_type=model_type, backend=["fsdp", "fsdp2"], device="cpu")(
            engine
        )
    RolloutReplicaRegistry.register(ROLLOUT_NAME, _load_replica)
    register_rollout_adapter(ROLLOUT_NAME, ADAPTER)


_register()
