"""A home directory holding the transcript fixtures where each agent keeps its logs:
what `grumem discover --home` is tested on, Linux and macOS layouts both.

Every format that lists LOCATIONS has fixtures here, and every place its LOCATIONS
name (but those a `${VAR}` override names) holds at least one of them: a fixture is
copied to a second place where a format has fewer fixtures than places
(tests/tools/test_discover.py checks both). SQLite stores are copied whole, with
what a store reads beside it (OpenCode's storage tree)."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.transcripts import T

APP = "Library/Application Support"  # macOS
CONFIG = ".config"  # XDG_CONFIG_HOME's default, on Linux
DATA = ".local/share"  # XDG_DATA_HOME's default (OpenCode, Kilo, Goose and Amp: on macOS too)
TASK = "tasks/{stem}/api_conversation_history.json"  # a Cline-layout task
CHAT = "chatSessions/{name}"  # Copilot Chat: a window with a folder
EMPTY = "emptyWindowChatSessions/{name}"  # and one without

# (format, fixture in fixtures/transcripts/<format>/ (a unique name prefix), where the
# tool keeps it: {name} is the fixture's file name, {stem} its name without suffix)
PLACES: tuple[tuple[str, str, str], ...] = (
    ("claude-code", "7f3c2a10", ".claude/projects/-home-ana-src-invoices/{name}"),
    ("codex-cli", "rollout-2025-11-03", ".codex/archived_sessions/{name}"),
    ("codex-cli", "rollout-2025-11-04", ".codex/sessions/2025/11/04/{name}"),
    ("gemini-cli", "session-2026-05-06", ".gemini/tmp/9d3f5a2e0c1b/chats/{name}"),
    ("gemini-cli", "session-2026-06-01", ".gemini/tmp/9d3f5a2e0c1b/chats/{name}"),
    ("gemini-cli", "session-2026-09-14", ".gemini/tmp/9d3f5a2e0c1b/chats/{name}"),
    ("mini-swe-agent", "django", f"{CONFIG}/mini-swe-agent/last_mini_run.traj.json"),
    ("mini-swe-agent", "astropy", f"{APP}/mini-swe-agent/last_mini_run.traj.json"),
    # Cline 3, Roo Code and Kilo Code (a fork of Roo Code) tasks, in several editors of
    # the VS Code family, and Cline CLI's
    (
        "anthropic",
        "invoice-pager",
        f"{CONFIG}/Code/User/globalStorage/saoudrizwan.claude-dev/{TASK}",
    ),
    ("anthropic", "docs-ci", f"{APP}/Cursor/User/globalStorage/rooveterinaryinc.roo-cline/{TASK}"),
    ("anthropic", "docs-ci", f"{CONFIG}/VSCodium/User/globalStorage/kilocode.kilo-code/{TASK}"),
    ("anthropic", "invoice-pager", f".cline/data/{TASK}"),
    ("continue", "5b2f0c1e", ".continue/sessions/{name}"),
    ("continue", "c81d4e2a", ".continue/sessions/{name}"),
    ("continue", "e4a7b9c2", ".continue/sessions/{name}"),
    ("continue", "sessions.json", ".continue/sessions/{name}"),  # the index, no session
    # a lead session with its subagent beside it, and another session
    ("cline", "1784094053271", ".cline/data/sessions/1784094053271_p8pzo/{name}"),
    ("cline", "search", ".cline/data/sessions/1784094053271_p8pzo/{name}"),
    ("cline", "1777000321904", ".cline/data/sessions/1777000321904_k2mfa/{name}"),
    ("amp", "T-019b9d03", f"{DATA}/amp/threads/{{name}}"),  # the CLI's
    ("amp", "T-38c593cf", f"{APP}/Code/User/globalStorage/sourcegraph.amp/threads3/{{name}}"),
    ("copilot-cli", "d2f8a6c4", ".copilot/session-state/{stem}/events.jsonl"),  # CLI 1.0
    ("copilot-cli", "7c1e4a2b", ".copilot/session-state/{name}"),  # the older CLI's layout
    ("copilot-chat", "b4e1c9a2", f"{CONFIG}/Code/User/workspaceStorage/5f1c0a9e/{CHAT}"),
    ("copilot-chat", "6a0f3e1d", f"{APP}/Code/User/workspaceStorage/2b7d4e6f/{CHAT}"),
    ("copilot-chat", "6a0f3e1d", f"{CONFIG}/Code - Insiders/User/globalStorage/{EMPTY}"),
    ("copilot-chat", "b4e1c9a2", f"{APP}/VSCodium/User/globalStorage/{EMPTY}"),
    # Cursor's own user directory; its chat panel before Composer in a workspace's store
    ("cursor", "globalStorage/", f"{CONFIG}/Cursor/User/globalStorage/state.vscdb"),
    ("cursor", "workspaceStorage-chat/", f"{CONFIG}/Cursor/User/workspaceStorage/a41e/state.vscdb"),
    ("cursor", "globalStorage-0.44/", f"{APP}/Cursor/User/globalStorage/state.vscdb"),
    ("cursor", "workspaceStorage-chat/", f"{APP}/Cursor/User/workspaceStorage/c93b/state.vscdb"),
    ("cursor", "chats/", ".cursor/chats/6e0f1b2a/93d7b323-695c-4b84-8b69-d48bb88ae780/store.db"),
    ("opencode", "opencode.db", f"{DATA}/opencode/opencode.db"),
    ("opencode", "opencode.db", f"{DATA}/opencode/opencode-dev.db"),  # a preview channel's
    ("kilo", "kilo.db", f"{DATA}/kilo/kilo.db"),
    ("kilo", "kilo.db", f"{DATA}/kilo/kilo-dev.db"),
    ("goose", "sessions.db", f"{DATA}/goose/sessions/sessions.db"),
    ("goose", "20250612", f"{DATA}/goose/sessions/{{name}}"),
    ("zed", "threads.db", f"{DATA}/zed/threads/threads.db"),
    ("zed", "legacy/", f"{APP}/Zed/threads/threads.db"),
)


def fixture(fmt: str, prefix: str) -> Path:
    """The one file of the format's fixtures whose path under its folder starts so."""
    folder = T / fmt
    (found,) = [
        p
        for p in sorted(folder.rglob("*"))
        if p.is_file()
        and p.relative_to(folder).as_posix().startswith(prefix)
        and p.name != "SOURCES.md"
    ]
    return found


def fake_home(root: Path) -> dict[str, list[Path]]:
    """Copies of the fixtures under `root`, placed as each tool places its logs;
    format -> the transcript files placed (what discovery should find)."""
    placed: dict[str, list[Path]] = {}
    for fmt, prefix, target in PLACES:
        source = fixture(fmt, prefix)
        path = root / target.format(name=source.name, stem=source.name.split(".")[0])
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, path)
        placed.setdefault(fmt, []).append(path)
    # OpenCode before 1.2: a session file, and its messages and parts beside it
    storage = root / DATA / "opencode" / "storage"
    shutil.copytree(T / "opencode" / "storage", storage)
    placed["opencode"] += sorted((storage / "session").glob("*/*.json"))
    return placed
