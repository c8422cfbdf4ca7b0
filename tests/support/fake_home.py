"""A home directory holding the transcript fixtures where each agent keeps its logs:
what `grumem discover --home` is tested on (Linux and macOS layouts both)."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.transcripts import T

APP = "Library/Application Support"


def fake_home(root: Path) -> dict[str, list[Path]]:
    """Copies of the fixtures under `root`, placed as each tool places its logs;
    format -> the files placed."""
    placed: dict[str, list[Path]] = {}

    def put(fmt: str, source: Path, target: str) -> None:
        path = root / target
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, path)
        placed.setdefault(fmt, []).append(path)

    for f in sorted((T / "claude-code").glob("*.jsonl")):
        put("claude-code", f, f".claude/projects/-home-ana-src-invoices/{f.name}")
    for f in sorted((T / "codex-cli").glob("rollout-*.jsonl")):
        yyyy, mm, dd = f.name[len("rollout-") :].split("T")[0].split("-")
        put("codex-cli", f, f".codex/sessions/{yyyy}/{mm}/{dd}/{f.name}")
    for f in sorted((T / "gemini-cli").glob("session-*")):
        put("gemini-cli", f, f".gemini/tmp/9d3f5a2e0c1b/chats/{f.name}")
    cline, roo = sorted((T / "anthropic").glob("*.json"))
    put(
        "anthropic",
        cline,
        f".config/Code/User/globalStorage/saoudrizwan.claude-dev/tasks/{cline.stem}"
        "/api_conversation_history.json",
    )
    put(
        "anthropic",
        roo,
        f"{APP}/Cursor/User/globalStorage/rooveterinaryinc.roo-cline/tasks/{roo.stem}"
        "/api_conversation_history.json",
    )
    mini = T / "mini-swe-agent" / "django__django-11099.traj.json"
    put("mini-swe-agent", mini, ".config/mini-swe-agent/last_mini_run.traj.json")
    return placed
