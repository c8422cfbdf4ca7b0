"""The judge's settings as a rule passes them, for the tests of the judge's parts."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from grumem.config.settings import settings_from_args


def make_settings(
    base_url: str | None,
    cache_dir: Path,
    mode: str = "live",
    judge: dict[str, Any] | None = None,
    llm: dict[str, Any] | None = None,
    budget: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What a rule passes as --settings, validated the way `grumem judge` does."""
    data = {
        "llm": {
            "base_url": base_url,
            "model": "rollout-model",  # the judge's own model wins: see the annotator
            "cache_dir": str(cache_dir),
            "mode": mode,
            "concurrency": 4,
            "timeout": 10,
            "retries": 0,
            "backoff": 0.01,
            **(llm or {}),
        },
        "budget": budget or {},
        "labels": {"source": "judge", "judge": {"model": "fake-judge", **(judge or {})}},
    }
    args = argparse.Namespace(settings=json.dumps(data), config=None, project="demo")
    return settings_from_args(args, labels_of=args.project)
