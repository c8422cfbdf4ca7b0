"""verl's platform `cpu`: training on a machine without an accelerator.

verl 0.9.1 finds its device through a platform (verl.plugin.platform); on a
machine without a GPU it falls back to `nvidia` and fails at the first CUDA call.
CpuPlatform is registered as `cpu` (PlatformRegistry) and selected with
VERL_PLATFORM=cpu; grumem.verl.plugin registers it in every process that imports
verl (VERL_USE_EXTERNAL_MODULES, which Ray's workers inherit).

What it answers, and why:
- the device is `cpu`, its collectives `gloo`;
- Ray's resource name is `GPU`: verl's resource pools ask Ray for an accelerator
  per trainer process, so the embedded backend starts Ray with logical GPUs
  (one a process; ray_init.num_gpus), which name a slot, not a device;
- the device module is torch.cpu, plus what verl calls on a CUDA module that
  torch.cpu lacks (empty_cache, memory statistics, rng state): no-ops or the
  process's own figures.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import torch
from verl.plugin.platform import PlatformBase, PlatformRegistry

PLATFORM = "cpu"
RAY_RESOURCE = "GPU"  # a logical slot a process: verl's pools insist on one


class CpuDevice:
    """torch.cpu, completed with the CUDA-module calls verl makes on any device."""

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.cpu, name)

    @staticmethod
    def empty_cache() -> None:
        return None

    @staticmethod
    def ipc_collect() -> None:
        return None

    @staticmethod
    def get_device_name(device: Any = None) -> str:
        return PLATFORM

    @staticmethod
    def get_rng_state(device: Any = None) -> torch.Tensor:
        return torch.get_rng_state()

    @staticmethod
    def set_rng_state(state: torch.Tensor, device: Any = None) -> None:
        torch.set_rng_state(state)

    @staticmethod
    def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
        return None

    @staticmethod
    def mem_get_info(device: Any = None) -> tuple[int, int]:
        """(free, total) bytes of the machine's memory, as CUDA's answers for a GPU."""
        page = os.sysconf("SC_PAGE_SIZE")
        return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page

    @staticmethod
    def memory_allocated(device: Any = None) -> int:
        return 0

    @staticmethod
    def memory_reserved(device: Any = None) -> int:
        return 0

    @staticmethod
    def max_memory_allocated(device: Any = None) -> int:
        return 0

    @staticmethod
    def max_memory_reserved(device: Any = None) -> int:
        return 0

    @staticmethod
    def reset_peak_memory_stats(device: Any = None) -> None:
        return None


DEVICE = CpuDevice()


@PlatformRegistry.register(platform=PLATFORM)
class CpuPlatform(PlatformBase):  # type: ignore[misc]  # verl's class: Any to mypy
    @property
    def device_name(self) -> str:
        return PLATFORM

    @property
    def vendor_name(self) -> str:
        return PLATFORM

    @property
    def device_module(self) -> ModuleType:
        return DEVICE  # type: ignore[return-value]  # duck-typed as verl uses it

    def is_available(self) -> bool:
        return True

    def current_device(self) -> int:
        # verl passes it to .to(device=...) and torch.empty(device=...): 0 would be cuda:0
        return PLATFORM  # type: ignore[return-value]  # as torch.cpu.current_device()

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        # Ray sets it for the logical GPUs; nothing on a CPU reads it
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str) -> Iterator[None]:
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return RAY_RESOURCE

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None


def selected() -> bool:
    """Whether this process runs verl on the CPU platform (VERL_PLATFORM=cpu)."""
    return os.environ.get("VERL_PLATFORM", "").strip().lower() == PLATFORM
