"""Every private name of verl that the embedded CPU backend touches, in one place,
pinned to the verl they were read from.

verl's public seams carry most of the backend (PlatformRegistry, EngineRegistry,
RolloutReplicaRegistry, the config). Two things have none in verl 0.9.1:

- The rollout adapter inside the training worker: ActorRolloutRefWorker looks its
  class up by (rollout.name, rollout.mode) in the module dict
  `verl.workers.rollout.base._ROLLOUT_REGISTRY`, which has no register function.
  `register_rollout_adapter` adds grumem's entry.
- The collective backend: `verl.utils.distributed` builds the process group's
  backend as f"cpu:gloo,{device}:{backend}", which on a CPU platform is
  "cpu:gloo,cpu:gloo", and torch refuses it ("Duplicate device type"). Both
  functions that build it are wrapped so that, with the CPU platform selected,
  the backend reaches torch.distributed.init_process_group as plain `gloo`; the
  wrap replaces the module's attribute and the bindings of the modules that import
  it by name (`FROM_IMPORTS`) when they are already loaded.

`require_pinned_verl` refuses any other verl before anything is touched, and
tests/verl/test_verl_cpu.py holds each name to the shape written here, so a new
verl fails there, loudly, instead of in a training run.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from grumem.errors import VerlVersionError

VERL_VERSION = "0.9.1"
ROLLOUT_REGISTRY = ("verl.workers.rollout.base", "_ROLLOUT_REGISTRY")
DISTRIBUTED = "verl.utils.distributed"
# the process-group functions whose backend string is built from the platform
PROCESS_GROUP_FUNCTIONS = ("initialize_global_process_group_ray", "initialize_global_process_group")
# the modules that bind them by name at import: `from verl.utils.distributed import ...`
FROM_IMPORTS = ("verl.workers.engine_workers", "verl.checkpoint_engine.base")
GLOO = "gloo"
_WRAPPED = "__grumem_gloo__"


def require_pinned_verl() -> None:
    """Refuse a verl other than VERL_VERSION: its private names may have moved."""
    import verl

    found = getattr(verl, "__version__", "unknown")
    if found != VERL_VERSION:
        raise VerlVersionError(
            f"verl {found} is installed, but grumem's CPU training backend touches names"
            f" private to verl {VERL_VERSION} (grumem.verl.private): install"
            f" verl=={VERL_VERSION} (make venv-verl, or pip install -e '.[verl]')"
        )


def rollout_registry() -> dict[tuple[str, str], str]:
    """verl's table of in-worker rollout adapters: (name, mode) -> class path."""
    require_pinned_verl()
    module = __import__(ROLLOUT_REGISTRY[0], fromlist=[ROLLOUT_REGISTRY[1]])
    table: dict[tuple[str, str], str] = getattr(module, ROLLOUT_REGISTRY[1])
    return table


def register_rollout_adapter(name: str, class_path: str, mode: str = "async") -> None:
    """Make `rollout.name=name rollout.mode=mode` build the adapter at `class_path`
    (module.Class) in the training worker."""
    rollout_registry()[(name, mode)] = class_path


def use_plain_gloo(is_cpu: Callable[[], bool]) -> None:
    """Wrap verl's process-group functions: when `is_cpu()` and no backend is given,
    the backend is plain `gloo` (verl's own string is refused by torch on CPU)."""
    require_pinned_verl()
    distributed = __import__(DISTRIBUTED, fromlist=list(PROCESS_GROUP_FUNCTIONS))
    for name in PROCESS_GROUP_FUNCTIONS:
        original = getattr(distributed, name)
        if getattr(original, _WRAPPED, False):
            continue
        wrapped = _gloo_when_cpu(original, is_cpu)
        setattr(distributed, name, wrapped)
        for module_name in FROM_IMPORTS:
            module = sys.modules.get(module_name)
            if module is not None and getattr(module, name, None) is original:
                setattr(module, name, wrapped)


def _gloo_when_cpu(original: Callable[..., Any], is_cpu: Callable[[], bool]) -> Callable[..., Any]:
    if original.__name__ == "initialize_global_process_group":
        # torchrun's variant (verl's SFT trainer) takes no backend: on CPU it is done
        # here as verl does it, with gloo, returning what verl's returns
        @functools.wraps(original)
        def init_torchrun(*args: Any, **kwargs: Any) -> Any:
            if not is_cpu():
                return original(*args, **kwargs)
            return _init_gloo_from_environment()

        setattr(init_torchrun, _WRAPPED, True)
        return init_torchrun

    @functools.wraps(original)
    def init(*args: Any, backend: str | None = None, **kwargs: Any) -> Any:
        if backend is None and is_cpu():
            backend = GLOO
        return original(*args, backend=backend, **kwargs)

    setattr(init, _WRAPPED, True)
    return init


def _init_gloo_from_environment() -> tuple[int, int, int]:
    import os

    import torch.distributed

    torch.distributed.init_process_group(
        backend=GLOO, init_method=os.environ.get("DIST_INIT_METHOD", None)
    )
    return int(os.environ["LOCAL_RANK"]), int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
