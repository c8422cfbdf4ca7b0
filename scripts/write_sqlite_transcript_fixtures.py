"""Write the SQLite-store transcript fixtures (and OpenCode's and Goose's JSON ones) under
fixtures/transcripts/{cursor,opencode,kilo,goose,zed}/.

Each database is built with the CREATE statements of its tool, written here from
the tool's schema as its source states it (repository, commit and file named
above each), and filled with coding-agent conversations written for these
fixtures (no real user's log). tests/transcripts/test_sqlite_fixtures.py
rebuilds them into a temporary directory and checks that every table's rows and
every JSON file equal the committed ones.

    python scripts/write_sqlite_transcript_fixtures.py [OUT_DIR]   # default fixtures/transcripts
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import zstandard

ROOT = Path(__file__).resolve().parent.parent


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def fresh(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    return sqlite3.connect(path)


def close(conn: sqlite3.Connection) -> None:
    conn.commit()
    conn.execute("VACUUM")
    conn.close()


# ====================================================================== Cursor
# Cursor is closed source: the tables are those every public reader of
# state.vscdb reports (michaeldhood/chatrxiv docs/cursor/storage-reference.md,
# commit d28513a8), the CLI's those of yashas-salankimatt/sidecar
# docs/plans/cursor-cli-adapter.md (commit 4b230572).

CURSOR_KV = """
CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);
CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);
"""
CURSOR_ITEM_ONLY = "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);"
CURSOR_CLI = """
CREATE TABLE blobs (id TEXT PRIMARY KEY, data BLOB);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
"""

COMPOSER = "3f2a9c1e-7b4d-4e0a-9c55-1d2e3f4a5b6c"
SUBCOMPOSER = "8c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"


def cursor_global(path: Path) -> None:
    """Cursor 2.x: headers in composerData, each bubble a row of its own; a sub-composer."""
    conn = fresh(path)
    conn.executescript(CURSOR_KV)
    bubbles = [
        {
            "_v": 3,
            "type": 1,
            "bubbleId": "b-01",
            "text": (
                "The nightly invoice export fails with UnicodeEncodeError on customer names. "
                "Can you fix it?"
            ),
            "createdAt": "2026-03-02T09:14:05.120Z",
            "modelInfo": {"modelName": "claude-4.5-sonnet"},
        },
        {
            "_v": 3,
            "type": 2,
            "bubbleId": "b-02",
            "thinking": {
                "text": (
                    "A UnicodeEncodeError on write usually means the file is opened without an "
                    "encoding. Find the writer first."
                ),
                "signature": "",
            },
            "text": "Let me find where the export writes the CSV.",
            "createdAt": "2026-03-02T09:14:09.540Z",
        },
        {
            "_v": 3,
            "type": 2,
            "bubbleId": "b-03",
            "text": "",
            "toolFormerData": {
                "tool": 41,
                "toolCallId": "toolu_01Grep",
                "status": "completed",
                "name": "grep_search",
                "rawArgs": dumps({"query": "open(", "include_pattern": "billing/export/*.py"}),
                "result": dumps(
                    {
                        "matches": [
                            "billing/export/csv_writer.py:22:    with open(target, 'w') as fh:",
                        ]
                    }
                ),
            },
            "createdAt": "2026-03-02T09:14:11.002Z",
        },
        {"_v": 3, "type": 2, "bubbleId": "b-04", "capabilityType": 15, "text": ""},
        {
            "_v": 3,
            "type": 2,
            "bubbleId": "b-05",
            "text": (
                "The writer opens the file with the locale's encoding. I'll pass "
                "encoding='utf-8' and newline=''."
            ),
            "toolFormerData": {
                "tool": 38,
                "toolCallId": "toolu_02Edit",
                "status": "completed",
                "name": "edit_file",
                "params": dumps(
                    {
                        "target_file": "billing/export/csv_writer.py",
                        "instructions": "Open the CSV with utf-8 and newline=''",
                        "code_edit": (
                            "    with open(target, 'w', encoding='utf-8', newline='') as fh:"
                        ),
                    }
                ),
                "result": dumps({"diff": {"linesAdded": 1, "linesRemoved": 1}}),
            },
            "createdAt": "2026-03-02T09:14:20.310Z",
        },
        {
            "_v": 3,
            "type": 2,
            "bubbleId": "b-06",
            "text": "",
            "toolFormerData": {
                "tool": 15,
                "toolCallId": "toolu_03Run",
                "status": "error",
                "name": "run_terminal_cmd",
                "rawArgs": dumps({"command": "pytest tests/export -q", "is_background": False}),
                "result": dumps(
                    {
                        "output": (
                            "E   ModuleNotFoundError: No module named 'freezegun'\n1 error in 0.41s"
                        ),
                        "exitCode": 4,
                    }
                ),
            },
            "createdAt": "2026-03-02T09:14:31.870Z",
        },
        {
            "_v": 3,
            "type": 1,
            "bubbleId": "b-07",
            "text": (
                "freezegun is a dev dependency, install it with `uv sync --group dev` and rerun."
            ),
            "createdAt": "2026-03-02T09:15:02.000Z",
        },
        {
            "_v": 3,
            "type": 2,
            "bubbleId": "b-08",
            "text": "",
            "toolFormerData": {
                "tool": 15,
                "toolCallId": "toolu_04Run",
                "status": "cancelled",
                "name": "run_terminal_cmd",
                "rawArgs": dumps({"command": "uv sync --group dev && pytest tests/export -q"}),
            },
        },
        {
            "_v": 3,
            "type": 2,
            "bubbleId": "b-09",
            "text": "",
            "toolFormerData": {
                "tool": 15,
                "toolCallId": "toolu_05Run",
                "status": "completed",
                "name": "run_terminal_cmd",
                "rawArgs": dumps({"command": "uv sync --group dev && pytest tests/export -q"}),
                "result": dumps({"output": "12 passed in 0.88s", "exitCode": 0}),
            },
        },
        {
            "_v": 3,
            "type": 2,
            "bubbleId": "b-10",
            "text": (
                "Fixed: the CSV is now written as UTF-8, so names like Øster & Søn export. The "
                "export tests pass (12)."
            ),
        },
    ]
    headers = [{"bubbleId": b["bubbleId"], "type": b["type"]} for b in bubbles]
    headers.insert(6, {"bubbleId": "b-gone", "type": 2})  # pruned by Cursor: counted
    composer = {
        "_v": 10,
        "composerId": COMPOSER,
        "name": "Fix UnicodeEncodeError in invoice export",
        "createdAt": 1772442845000,
        "lastUpdatedAt": 1772442950000,
        "status": "completed",
        "unifiedMode": "agent",
        "modelConfig": {"modelName": "claude-4.5-sonnet", "maxMode": False},
        "fullConversationHeadersOnly": headers,
        "conversationMap": {},
        "subComposerIds": [SUBCOMPOSER],
        "text": "",
    }
    sub_bubbles = [
        {
            "_v": 3,
            "type": 1,
            "bubbleId": "s-01",
            "text": "List every call site that writes customer names to a file.",
        },
        {
            "_v": 3,
            "type": 2,
            "bubbleId": "s-02",
            "text": "",
            "toolFormerData": {
                "tool": 41,
                "toolCallId": "toolu_11Grep",
                "status": "completed",
                "name": "grep_search",
                "rawArgs": dumps({"query": "customer.name"}),
                "result": dumps(
                    {"matches": ["billing/export/csv_writer.py:31", "billing/pdf/header.py:12"]}
                ),
            },
        },
        {
            "_v": 3,
            "type": 2,
            "bubbleId": "s-03",
            "text": "Two writers: the CSV export and the PDF header.",
        },
    ]
    sub = {
        "_v": 10,
        "composerId": SUBCOMPOSER,
        "name": "Find name writers",
        "createdAt": 1772442900000,
        "fullConversationHeadersOnly": [
            {"bubbleId": b["bubbleId"], "type": b["type"]} for b in sub_bubbles[1:]
        ],
        # a version that kept some bubbles in the header itself
        "conversationMap": {},
    }
    sub["fullConversationHeadersOnly"].insert(0, {"bubbleId": "s-01", "type": 1})
    sub["conversationMap"] = {"s-01": sub_bubbles[0]}
    rows = [("composerData:" + COMPOSER, composer), ("composerData:" + SUBCOMPOSER, sub)]
    rows += [(f"bubbleId:{COMPOSER}:{b['bubbleId']}", b) for b in bubbles]
    rows += [(f"bubbleId:{SUBCOMPOSER}:{b['bubbleId']}", b) for b in sub_bubbles[1:]]
    rows.append(("composerData:0b0b0b0b-dead-4bee-8f00-000000000000", None))  # deleted
    for key, value in rows:
        conn.execute("INSERT INTO cursorDiskKV VALUES (?, ?)", (key, dumps(value).encode()))
    # keys a reader must never touch
    conn.execute(
        "INSERT INTO ItemTable VALUES (?, ?)",
        ("cursorAuth/accessToken", b"fixture-not-a-real-token"),
    )
    conn.execute(
        "INSERT INTO ItemTable VALUES (?, ?)",
        ("workbench.view.extensions.state.hidden", b"[]"),
    )
    close(conn)


def cursor_inline(path: Path) -> None:
    """Cursor 0.4x: the composer's bubbles inline in composerData.conversation."""
    conn = fresh(path)
    conn.executescript(CURSOR_KV)
    composer = {
        "_v": 2,
        "composerId": "c0de0001-1111-4222-8333-444455556666",
        "name": "Rate limit the webhook endpoint",
        "createdAt": 1731660000000,
        "lastUpdatedAt": 1731660240000,
        "conversation": [
            {
                "type": 1,
                "bubbleId": "i-1",
                "text": "Add a per-IP rate limit of 30 requests a minute to POST /webhooks/stripe.",
            },
            {
                "type": 2,
                "bubbleId": "i-2",
                "text": (
                    "I'll add a token bucket keyed by client IP in "
                    "`app/middleware/ratelimit.py`:\n\n```python\nbucket = "
                    "TokenBucket(rate=30, per=60)\n```"
                ),
                "codeBlocks": [
                    {"content": "bucket = TokenBucket(rate=30, per=60)", "languageId": "python"}
                ],
            },
            {
                "type": 1,
                "bubbleId": "i-3",
                "text": "Behind the load balancer the IP is in X-Forwarded-For.",
            },
            {
                "type": 2,
                "bubbleId": "i-4",
                "text": (
                    "Then the key must be the first X-Forwarded-For address, trusted only from "
                    "the balancer's subnet."
                ),
            },
        ],
    }
    conn.execute(
        "INSERT INTO cursorDiskKV VALUES (?, ?)",
        ("composerData:" + composer["composerId"], dumps(composer).encode()),
    )
    close(conn)


def cursor_chat_panel(path: Path) -> None:
    """The chat panel before Composer: tabs in a workspace ItemTable, no cursorDiskKV."""
    conn = fresh(path)
    conn.executescript(CURSOR_ITEM_ONLY)
    chat = {
        "tabs": [
            {
                "tabId": "tab-5e1f",
                "chatTitle": "Why does the migration lock the table?",
                "lastSendTime": 1715155200000,
                "bubbles": [
                    {
                        "type": "user",
                        "id": "u1",
                        "text": (
                            "Why does `ALTER TABLE orders ADD COLUMN note text DEFAULT ''` "
                            "lock orders for minutes on Postgres 10?"
                        ),
                    },
                    {
                        "type": "ai",
                        "id": "a1",
                        "rawText": (
                            "Before Postgres 11 a column with a default rewrites the whole "
                            "table under an ACCESS EXCLUSIVE lock. Add the column without a "
                            "default, then set the default, then backfill in batches."
                        ),
                        "modelType": "gpt-4",
                    },
                    {"type": "user", "id": "u2", "text": "And on 11+?"},
                    {
                        "type": "ai",
                        "id": "a2",
                        "text": (
                            "On 11 and later a constant default is stored in the catalog: the "
                            "ALTER is instant."
                        ),
                    },
                ],
            }
        ]
    }
    conn.execute(
        "INSERT INTO ItemTable VALUES (?, ?)",
        ("workbench.panel.aichat.view.aichat.chatdata", dumps(chat)),
    )
    conn.execute("INSERT INTO ItemTable VALUES (?, ?)", ("aiService.prompts", dumps([])))
    close(conn)


def _wire(field: int, value: bytes) -> bytes:
    key = (field << 3) | 2
    out = bytearray([key])
    size = len(value)
    while size >= 0x80:
        out.append((size & 0x7F) | 0x80)
        size >>= 7
    out.append(size)
    return bytes(out) + value


def cursor_cli(path: Path) -> None:
    """cursor-agent: meta row 0 (hex JSON), content-addressed blobs, a protobuf root."""
    conn = fresh(path)
    conn.executescript(CURSOR_CLI)
    messages = [
        {"role": "system", "content": "You are a coding agent running in the user's terminal."},
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "<user_query>\nwhy is `make lint` failing on main?\n</user_query>",
                }
            ],
            "providerOptions": {"cursor": {"requestId": "5a0c2f1e-3b44-4c21-9d0e-7f6a5b4c3d2e"}},
        },
        {
            "id": "1",
            "role": "assistant",
            "content": [
                {
                    "type": "reasoning",
                    "text": "Run the linter and read its first error.",
                    "signature": "sig",
                },
                {
                    "type": "tool-call",
                    "toolCallId": "toolu_cli_1",
                    "toolName": "Shell",
                    "args": {"command": "make lint", "description": "Run the linters"},
                },
            ],
        },
        {
            "role": "tool",
            "id": "toolu_cli_1",
            "content": [
                {
                    "type": "tool-result",
                    "toolName": "Shell",
                    "toolCallId": "toolu_cli_1",
                    "result": (
                        "Exit code: 1\n\nCommand output:\nsrc/api/routes.py:88:5: F841 local "
                        "variable 'resp' is assigned to but never used"
                    ),
                }
            ],
        },
        {
            "id": "2",
            "role": "assistant",
            "content": [
                {
                    "type": "text",
                    "text": (
                        "ruff reports an unused variable `resp` in src/api/routes.py line 88, "
                        "added by yesterday's merge."
                    ),
                }
            ],
        },
    ]
    ids = []
    for m in messages:
        data = dumps(m).encode()
        blob_id = hashlib.sha256(data).hexdigest()
        conn.execute("INSERT INTO blobs VALUES (?, ?)", (blob_id, data))
        ids.append(blob_id)
    protobuf_message = b"\x0a\x05hello"  # a 2025 build's protobuf message: counted, not guessed
    pid = hashlib.sha256(protobuf_message).hexdigest()
    conn.execute("INSERT INTO blobs VALUES (?, ?)", (pid, protobuf_message))
    root = b"".join(_wire(1, bytes.fromhex(i)) for i in ids[:4] + [pid] + ids[4:])
    root += _wire(9, b"/home/dev/shop-api")
    root_id = hashlib.sha256(root).hexdigest()
    conn.execute("INSERT INTO blobs VALUES (?, ?)", (root_id, root))
    meta = {
        "agentId": "93d7b323-695c-4b84-8b69-d48bb88ae780",
        "latestRootBlobId": root_id,
        "name": "Lint failure on main",
        "mode": "auto-run",
        "createdAt": 1767396459642,
        "lastUsedModel": "gpt-5",
    }
    conn.execute("INSERT INTO meta VALUES ('0', ?)", (dumps(meta).encode().hex(),))
    close(conn)


# ==================================================================== OpenCode
# anomalyco/opencode packages/opencode/src/session/session.sql.ts (commit
# 063e8306): the drizzle tables, written as drizzle emits them; the project
# table of packages/opencode/src/project/project.sql.ts; Kilo-Org/kilocode's
# copy of session.sql.ts (commit 18369fa0) adds current_state, recent_progress,
# session_entry and task.

OPENCODE_PROJECT = """
CREATE TABLE `project` (
  `id` text PRIMARY KEY, `worktree` text NOT NULL, `vcs` text, `name` text,
  `icon_url` text, `icon_color` text, `time_created` integer NOT NULL,
  `time_updated` integer NOT NULL, `time_initialized` integer, `sandboxes` text NOT NULL
);
"""
OPENCODE_MESSAGES = """
CREATE TABLE `message` (
  `id` text PRIMARY KEY, `session_id` text NOT NULL, `time_created` integer NOT NULL,
  `time_updated` integer NOT NULL, `data` text NOT NULL,
  FOREIGN KEY (`session_id`) REFERENCES `session`(`id`) ON DELETE CASCADE
);
CREATE TABLE `part` (
  `id` text PRIMARY KEY, `message_id` text NOT NULL, `session_id` text NOT NULL,
  `time_created` integer NOT NULL, `time_updated` integer NOT NULL, `data` text NOT NULL,
  FOREIGN KEY (`message_id`) REFERENCES `message`(`id`) ON DELETE CASCADE
);
CREATE TABLE `todo` (
  `session_id` text NOT NULL, `content` text NOT NULL, `status` text NOT NULL,
  `priority` text NOT NULL, `position` integer NOT NULL, `time_created` integer NOT NULL,
  `time_updated` integer NOT NULL, PRIMARY KEY(`session_id`, `position`)
);
CREATE INDEX `message_session_time_created_id_idx` ON `message` (`session_id`,`time_created`,`id`);
CREATE INDEX `part_message_id_id_idx` ON `part` (`message_id`,`id`);
CREATE INDEX `part_session_idx` ON `part` (`session_id`);
"""
OPENCODE_SESSION = """
CREATE TABLE `session` (
  `id` text PRIMARY KEY, `project_id` text NOT NULL, `workspace_id` text, `parent_id` text,
  `slug` text NOT NULL, `directory` text NOT NULL, `path` text, `title` text NOT NULL,
  `version` text NOT NULL, `share_url` text, `summary_additions` integer,
  `summary_deletions` integer, `summary_files` integer, `summary_diffs` text,
  `cost` real DEFAULT 0 NOT NULL, `tokens_input` integer DEFAULT 0 NOT NULL,
  `tokens_output` integer DEFAULT 0 NOT NULL, `tokens_reasoning` integer DEFAULT 0 NOT NULL,
  `tokens_cache_read` integer DEFAULT 0 NOT NULL, `tokens_cache_write` integer DEFAULT 0 NOT NULL,
  `revert` text, `permission` text, `goal` text, `agent` text, `model` text,
  `time_created` integer NOT NULL, `time_updated` integer NOT NULL,
  `time_compacting` integer, `time_archived` integer,
  FOREIGN KEY (`project_id`) REFERENCES `project`(`id`) ON DELETE CASCADE
);
CREATE TABLE `session_message` (
  `id` text PRIMARY KEY, `session_id` text NOT NULL, `type` text NOT NULL,
  `time_created` integer NOT NULL, `time_updated` integer NOT NULL, `data` text NOT NULL
);
"""
KILO_SESSION = """
CREATE TABLE `session` (
  `id` text PRIMARY KEY, `project_id` text NOT NULL, `workspace_id` text, `parent_id` text,
  `slug` text NOT NULL, `directory` text NOT NULL, `title` text NOT NULL,
  `version` text NOT NULL, `share_url` text, `summary_additions` integer,
  `summary_deletions` integer, `summary_files` integer, `summary_diffs` text,
  `revert` text, `permission` text, `current_state` text, `recent_progress` text,
  `time_created` integer NOT NULL, `time_updated` integer NOT NULL,
  `time_compacting` integer, `time_archived` integer,
  FOREIGN KEY (`project_id`) REFERENCES `project`(`id`) ON DELETE CASCADE
);
CREATE TABLE `session_entry` (
  `id` text PRIMARY KEY, `session_id` text NOT NULL, `type` text NOT NULL,
  `time_created` integer NOT NULL, `time_updated` integer NOT NULL, `data` text NOT NULL
);
CREATE TABLE `task` (
  `id` text PRIMARY KEY, `session_id` text NOT NULL, `title` text NOT NULL,
  `description` text DEFAULT '' NOT NULL, `status` text DEFAULT 'open' NOT NULL,
  `priority` text DEFAULT 'medium' NOT NULL, `assignee` text, `depends_on` text,
  `worktree` text, `pr` text, `summary` text,
  `time_created` integer NOT NULL, `time_updated` integer NOT NULL
);
"""

T0 = 1768990000000  # ms


def _user_info(t: int, model: str = "claude-sonnet-4-5") -> dict:
    return {
        "role": "user",
        "time": {"created": t},
        "agent": "build",
        "model": {"providerID": "anthropic", "modelID": model},
    }


def _assistant_info(t: int, parent: str, model: str = "claude-sonnet-4-5", **extra: Any) -> dict:
    return {
        "role": "assistant",
        "time": {"created": t, "completed": t + 4000},
        "parentID": parent,
        "modelID": model,
        "providerID": "anthropic",
        "mode": "build",
        "agent": "build",
        "path": {"cwd": "/home/dev/tilecache", "root": "/home/dev/tilecache"},
        "cost": 0.0123,
        "tokens": {
            "input": 1840,
            "output": 212,
            "reasoning": 0,
            "cache": {"read": 9000, "write": 0},
        },
        **extra,
    }


def _tool(call: str, tool: str, inp: dict, t: int, **state: Any) -> dict:
    return {"type": "tool", "callID": call, "tool": tool, "state": {"input": inp, **state}}


def _done(output: str, title: str, t: int, **extra: Any) -> dict:
    return {
        "status": "completed",
        "output": output,
        "title": title,
        "metadata": {},
        "time": {"start": t, "end": t + 300, **extra},
    }


def opencode_conversation(sid: str, child: str) -> list[tuple[str, dict, list[tuple[str, dict]]]]:
    """(message id, info, [(part id, part)]) of the main session, in order."""
    return [
        (
            "msg_01JH0001",
            _user_info(T0),
            [
                (
                    "prt_01JH0001a",
                    {
                        "type": "text",
                        "text": (
                            "The tile cache grows without bound in production. Find why "
                            "eviction never runs."
                        ),
                    },
                ),
                (
                    "prt_01JH0001b",
                    {
                        "type": "file",
                        "mime": "text/plain",
                        "filename": "evict.go",
                        "url": "file:///home/dev/tilecache/cache/evict.go",
                    },
                ),
                (
                    "prt_01JH0001c",
                    {
                        "type": "text",
                        "synthetic": True,
                        "text": (
                            'Called the Read tool with {"filePath":"cache/evict.go"}\n<file>\n'
                            "00041| if c.bytes > c.limit && c.limit != 0 {\n</file>"
                        ),
                    },
                ),
                (
                    "prt_01JH0001d",
                    {
                        "type": "file",
                        "mime": "image/png",
                        "filename": "grafana.png",
                        "url": "data:image/png;base64," + "iVBORw0KGgo" * 12,
                    },
                ),
            ],
        ),
        (
            "msg_01JH0002",
            _assistant_info(T0 + 1000, "msg_01JH0001"),
            [
                ("prt_01JH0002a", {"type": "step-start", "snapshot": "4b825dc6"}),
                (
                    "prt_01JH0002b",
                    {
                        "type": "reasoning",
                        "text": (
                            "The condition compares bytes to limit; if limit is read before "
                            "config load it is 0 and eviction is skipped."
                        ),
                        "time": {"start": T0 + 1000, "end": T0 + 1500},
                    },
                ),
                (
                    "prt_01JH0002c",
                    {"type": "text", "text": "I'll check where `limit` is set."},
                ),
                (
                    "prt_01JH0002d",
                    _tool(
                        "toolu_01Grep",
                        "grep",
                        {"pattern": "limit\\s*=", "path": "cache"},
                        T0 + 1600,
                        **_done(
                            (
                                "cache/cache.go:19: c.limit = cfg.MaxBytes\ncache/cache.go:7: "
                                "var defaultLimit = 0"
                            ),
                            "limit\\s*=",
                            T0 + 1600,
                        ),
                    ),
                ),
                (
                    "prt_01JH0002e",
                    _tool(
                        "toolu_02Read",
                        "read",
                        {"filePath": "cache/config.go"},
                        T0 + 2000,
                        status="error",
                        error="File not found: cache/config.go",
                        time={"start": T0 + 2000, "end": T0 + 2010},
                    ),
                ),
                (
                    "prt_01JH0002f",
                    {
                        "type": "step-finish",
                        "reason": "tool-calls",
                        "cost": 0.0123,
                        "tokens": {
                            "input": 1840,
                            "output": 212,
                            "reasoning": 0,
                            "cache": {"read": 9000, "write": 0},
                        },
                    },
                ),
            ],
        ),
        (
            "msg_01JH0003",
            _assistant_info(T0 + 5000, "msg_01JH0001"),
            [
                (
                    "prt_01JH0003a",
                    _tool(
                        "toolu_03Task",
                        "task",
                        {
                            "description": "Find config loading order",
                            "prompt": "Where is cfg loaded relative to NewCache?",
                            "subagent_type": "explore",
                        },
                        T0 + 5000,
                        **_done(
                            "NewCache runs in init(), before main() loads cfg: limit is always 0.",
                            "Find config loading order",
                            T0 + 5000,
                        ),
                    ),
                ),
                (
                    "prt_01JH0003b",
                    {
                        "type": "text",
                        "text": (
                            "Found it: `NewCache` runs in `init()`, before the config is "
                            "loaded, so `limit` is 0 and the `c.limit != 0` guard disables "
                            "eviction. Moving the construction into `main()` after "
                            "`loadConfig()` fixes it."
                        ),
                    },
                ),
                (
                    "prt_01JH0003c",
                    _tool(
                        "toolu_04Edit",
                        "edit",
                        {"filePath": "cmd/server/main.go"},
                        T0 + 9000,
                        status="running",
                        time={"start": T0 + 9000},
                    ),
                ),
                (
                    "prt_01JH0003d",
                    {"type": "patch", "hash": "9f1c2d", "files": ["cmd/server/main.go"]},
                ),
                ("prt_01JH0003e", {"type": "hologram", "note": "a part kind from the future"}),
            ],
        ),
    ]


def opencode_child(child: str) -> list[tuple[str, dict, list[tuple[str, dict]]]]:
    return [
        (
            "msg_01JH0101",
            _user_info(T0 + 5100, "claude-haiku-4-5"),
            [
                (
                    "prt_01JH0101a",
                    {"type": "text", "text": "Where is cfg loaded relative to NewCache?"},
                )
            ],
        ),
        (
            "msg_01JH0102",
            _assistant_info(T0 + 5200, "msg_01JH0101", "claude-haiku-4-5"),
            [
                (
                    "prt_01JH0102a",
                    _tool(
                        "toolu_11Grep",
                        "grep",
                        {"pattern": "NewCache|loadConfig"},
                        T0 + 5200,
                        **_done(
                            (
                                "cmd/server/main.go:12: func init() { cache = NewCache(cfg) "
                                "}\ncmd/server/main.go:30: cfg = loadConfig()"
                            ),
                            "NewCache|loadConfig",
                            T0 + 5200,
                        ),
                    ),
                ),
                (
                    "prt_01JH0102b",
                    {
                        "type": "text",
                        "text": (
                            "NewCache runs in init(), before main() loads cfg: limit is always 0."
                        ),
                    },
                ),
            ],
        ),
    ]


def _fill_opencode(conn: sqlite3.Connection, sessions: list[tuple[dict, list]]) -> None:
    conn.execute(
        "INSERT INTO project (id, worktree, vcs, name, time_created, time_updated, sandboxes) "
        "VALUES (?, ?, 'git', 'tilecache', ?, ?, '[]')",
        ("a1b2c3d4e5f60718293a4b5c6d7e8f9012345678", "/home/dev/tilecache", T0, T0),
    )
    for session, messages in sessions:
        cols = ", ".join(session)
        conn.execute(
            f"INSERT INTO session ({cols}) VALUES ({', '.join('?' * len(session))})",
            tuple(session.values()),
        )
        for mid, info, parts in messages:
            t = info["time"]["created"]
            conn.execute(
                "INSERT INTO message VALUES (?, ?, ?, ?, ?)",
                (mid, session["id"], t, t, dumps(info)),
            )
            for pid, part in parts:
                conn.execute(
                    "INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                    (pid, mid, session["id"], t, t, dumps(part)),
                )


def _session_row(sid: str, title: str, t: int, parent: str | None = None, **extra: Any) -> dict:
    return {
        "id": sid,
        "project_id": "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678",
        "parent_id": parent,
        "slug": title.lower().replace(" ", "-")[:24],
        "directory": "/home/dev/tilecache",
        "title": title,
        "version": "1.2.6",
        "time_created": t,
        "time_updated": t + 9000,
        **extra,
    }


OC_MAIN = "ses_4d585107dffeO9bO3HvMdvLYyC"
OC_CHILD = "ses_4d5851a2c1ffK2mN8pQ4rS6tUv"


def opencode_db(path: Path) -> None:
    conn = fresh(path)
    conn.executescript(OPENCODE_PROJECT + OPENCODE_SESSION + OPENCODE_MESSAGES)
    _fill_opencode(
        conn,
        [
            (
                _session_row(OC_MAIN, "Tile cache never evicts", T0),
                opencode_conversation(OC_MAIN, OC_CHILD),
            ),
            (
                _session_row(
                    OC_CHILD, "Find config loading order (@explore subagent)", T0 + 5100, OC_MAIN
                ),
                opencode_child(OC_CHILD),
            ),
        ],
    )
    conn.execute(
        "INSERT INTO session_message VALUES ('sm_1', ?, 'compaction', ?, ?, '{}')",
        (OC_MAIN, T0, T0),
    )
    close(conn)


def opencode_tree(root: Path) -> None:
    """The JSON tree of OpenCode before 1.2: storage/{session,message,part}/."""
    storage = root / "storage"
    sid = "ses_3e1f0a9b8fffAbCdEfGh012345"
    project = "8e0a7c1d2b3f4a5e6d7c8b9a0f1e2d3c4b5a6978"
    session = {
        "id": sid,
        "version": "0.15.8",
        "projectID": project,
        "directory": "/home/dev/ledger",
        "title": "Flaky test in ledger rounding",
        "time": {"created": 1757400000000, "updated": 1757400090000},
    }
    files: dict[Path, Any] = {storage / "session" / project / f"{sid}.json": session}
    msgs = [
        (
            "msg_9a0b1c2d3001",
            {"id": "msg_9a0b1c2d3001", "sessionID": sid, **_user_info(1757400000000)},
            [{"type": "text", "text": "test_round_half_even fails one run in ten. Why?"}],
        ),
        (
            "msg_9a0b1c2d3002",
            {
                "id": "msg_9a0b1c2d3002",
                "sessionID": sid,
                **_assistant_info(1757400002000, "msg_9a0b1c2d3001"),
            },
            [
                {"type": "step-start"},
                {
                    "type": "tool",
                    "callID": "toolu_t1",
                    "tool": "bash",
                    "state": _done(
                        "1 failed, 99 passed\nAssertionError: Decimal('2.5') != Decimal('2')",
                        "pytest -k round --count 100",
                        1757400002500,
                    )
                    | {
                        "input": {
                            "command": "pytest -k round --count 100",
                            "description": "Repeat the test",
                        }
                    },
                },
                {
                    "type": "text",
                    "text": (
                        "The test builds its Decimal context with getcontext(), which another "
                        "test changes without restoring it. Use localcontext() in the test."
                    ),
                },
                {
                    "type": "step-finish",
                    "reason": "stop",
                    "cost": 0,
                    "tokens": {
                        "input": 1,
                        "output": 1,
                        "reasoning": 0,
                        "cache": {"read": 0, "write": 0},
                    },
                },
            ],
        ),
    ]
    for mid, info, parts in msgs:
        files[storage / "message" / sid / f"{mid}.json"] = info
        for n, part in enumerate(parts):
            pid = f"prt_{mid[4:]}{n:02d}"
            files[storage / "part" / mid / f"{pid}.json"] = {
                "id": pid,
                "sessionID": sid,
                "messageID": mid,
                **part,
            }
    for path, value in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def kilo_db(path: Path) -> None:
    conn = fresh(path)
    conn.executescript(OPENCODE_PROJECT + KILO_SESSION + OPENCODE_MESSAGES)
    sid = "ses_5c7a2e10b8ffQwErTyUiOp9876"
    messages = [
        (
            "msg_01KL0001",
            _user_info(T0 + 100000, "kilo-auto"),
            [
                (
                    "prt_01KL0001a",
                    {"type": "text", "text": "Add a --dry-run flag to the sync command."},
                )
            ],
        ),
        (
            "msg_01KL0002",
            _assistant_info(T0 + 101000, "msg_01KL0001", "kilo-auto"),
            [
                (
                    "prt_01KL0002a",
                    _tool(
                        "call_k1",
                        "read",
                        {"filePath": "cli/sync.py"},
                        T0 + 101000,
                        **_done(
                            "1  import click\n2\n3  @click.command()\n4  def sync(): ...",
                            "cli/sync.py",
                            T0 + 101000,
                        ),
                    ),
                ),
                (
                    "prt_01KL0002b",
                    {
                        "type": "text",
                        "text": (
                            "Added `--dry-run`: sync prints the files it would upload and "
                            "exits without writing."
                        ),
                    },
                ),
            ],
        ),
    ]
    _fill_opencode(
        conn,
        [
            (
                _session_row(
                    sid,
                    "Dry run for sync",
                    T0 + 100000,
                    current_state="done",
                    recent_progress="flag added",
                ),
                messages,
            )
        ],
    )
    conn.execute(
        "INSERT INTO session_entry VALUES ('se_1', ?, 'checkpoint', ?, ?, '{}')",
        (sid, T0 + 100000, T0 + 100000),
    )
    close(conn)


# ======================================================================= Goose
# block/goose crates/goose/src/session/session_manager.rs: schema version 5
# (commit 01643006) and version 9 (commit dbec1655, without its eval_* tables,
# which hold no conversation). Messages are `Vec<MessageContent>` as serialized
# by crates/goose/src/conversation/message.rs (commit 05132966).

GOOSE_V5 = """
CREATE TABLE schema_version (
    version INTEGER PRIMARY KEY, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', description TEXT NOT NULL DEFAULT '',
    user_set_name BOOLEAN DEFAULT FALSE, session_type TEXT NOT NULL DEFAULT 'user',
    working_dir TEXT NOT NULL, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, extension_data TEXT DEFAULT '{}',
    total_tokens INTEGER, input_tokens INTEGER, output_tokens INTEGER,
    accumulated_total_tokens INTEGER, accumulated_input_tokens INTEGER,
    accumulated_output_tokens INTEGER, schedule_id TEXT, recipe_json TEXT,
    user_recipe_values_json TEXT
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL, content_json TEXT NOT NULL, created_timestamp INTEGER NOT NULL,
    timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP, tokens INTEGER, metadata_json TEXT
);
CREATE INDEX idx_messages_session ON messages(session_id);
CREATE INDEX idx_messages_timestamp ON messages(timestamp);
CREATE INDEX idx_sessions_updated ON sessions(updated_at DESC);
CREATE INDEX idx_sessions_type ON sessions(session_type);
"""
GOOSE_V9 = """
CREATE TABLE schema_version (
    version INTEGER PRIMARY KEY, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', description TEXT NOT NULL DEFAULT '',
    user_set_name BOOLEAN DEFAULT FALSE, session_type TEXT NOT NULL DEFAULT 'user',
    working_dir TEXT NOT NULL, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, extension_data TEXT DEFAULT '{}',
    total_tokens INTEGER, input_tokens INTEGER, output_tokens INTEGER,
    accumulated_total_tokens INTEGER, accumulated_input_tokens INTEGER,
    accumulated_output_tokens INTEGER, schedule_id TEXT, recipe_json TEXT,
    user_recipe_values_json TEXT, provider_name TEXT, model_config_json TEXT,
    tenant_id TEXT, user_id TEXT
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT,
    session_id TEXT NOT NULL REFERENCES sessions(id), role TEXT NOT NULL,
    content_json TEXT NOT NULL, created_timestamp INTEGER NOT NULL,
    timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP, tokens INTEGER, metadata_json TEXT
);
CREATE INDEX idx_messages_session ON messages(session_id);
CREATE INDEX idx_messages_timestamp ON messages(timestamp);
CREATE INDEX idx_messages_message_id ON messages(message_id);
CREATE INDEX idx_sessions_updated ON sessions(updated_at DESC);
CREATE INDEX idx_sessions_type ON sessions(session_type);
"""

VISIBLE = {"userVisible": True, "agentVisible": True}


def _text(t: str) -> dict:
    return {"type": "text", "text": t}


def _req(call: str, name: str, args: dict) -> dict:
    return {
        "type": "toolRequest",
        "id": call,
        "toolCall": {"status": "success", "value": {"name": name, "arguments": args}},
    }


def _resp(call: str, text: str, is_error: bool = False, legacy: bool = False) -> dict:
    content = [{"type": "text", "text": text}]
    value: Any = content if legacy else {"content": content, "isError": is_error}
    return {"type": "toolResponse", "id": call, "toolResult": {"status": "success", "value": value}}


def goose_conversation(legacy_results: bool) -> list[tuple[str, int, list[dict], dict]]:
    t = 1762502400
    return [
        (
            "user",
            t,
            [_text("The docker build takes 9 minutes. Make it use the layer cache.")],
            VISIBLE,
        ),
        (
            "assistant",
            t + 5,
            [
                {
                    "type": "thinking",
                    "thinking": (
                        "Probably COPY . . before pip install invalidates the cache on every "
                        "change."
                    ),
                    "signature": "EqMBCkgI",
                },
                _text("Let me read the Dockerfile."),
                _req(
                    "toolu_g1",
                    "developer__text_editor",
                    {"command": "view", "path": "/srv/app/Dockerfile"},
                ),
            ],
            VISIBLE,
        ),
        (
            "user",
            t + 6,
            [
                _resp(
                    "toolu_g1",
                    (
                        "FROM python:3.12-slim\nWORKDIR /app\nCOPY . .\nRUN pip install -r "
                        "requirements.txt"
                    ),
                    legacy=legacy_results,
                )
            ],
            VISIBLE,
        ),
        (
            "assistant",
            t + 12,
            [
                _text(
                    "`COPY . .` comes before the install, so any source change reinstalls "
                    "every package. I'll copy requirements.txt first."
                ),
                _req(
                    "toolu_g2",
                    "developer__text_editor",
                    {
                        "command": "str_replace",
                        "path": "/srv/app/Dockerfile",
                        "old_str": "COPY . .\nRUN pip install -r requirements.txt",
                        "new_str": (
                            "COPY requirements.txt .\nRUN pip install -r requirements.txt\nCOPY . ."
                        ),
                    },
                ),
            ],
            VISIBLE,
        ),
        (
            "user",
            t + 13,
            [
                _resp(
                    "toolu_g2",
                    "The file /srv/app/Dockerfile has been edited.",
                    legacy=legacy_results,
                )
            ],
            VISIBLE,
        ),
        (
            "assistant",
            t + 20,
            [_req("toolu_g3", "developer__shell", {"command": "docker build -t app ."})],
            VISIBLE,
        ),
        (
            "user",
            t + 95,
            [
                _resp(
                    "toolu_g3",
                    (
                        "ERROR: failed to solve: failed to read dockerfile: open Dockerfile: "
                        "permission denied"
                    ),
                    is_error=True,
                    legacy=legacy_results,
                )
            ],
            VISIBLE,
        ),
        (
            "assistant",
            t + 96,
            [
                {
                    "type": "systemNotification",
                    "notificationType": "inlineMessage",
                    "msg": "Tool call failed",
                }
            ],
            {"userVisible": True, "agentVisible": False},
        ),
        (
            "assistant",
            t + 100,
            [
                _text(
                    "The build could not read the Dockerfile: the edit left it mode 0600. "
                    "After `chmod 644 Dockerfile` the second build reuses the pip layer."
                ),
                {"type": "redactedThinking", "data": "ErUBCkYIBRgCIkD"},
            ],
            VISIBLE,
        ),
    ]


def _fill_goose(
    conn: sqlite3.Connection, sessions: list[tuple[dict, list]], message_ids: bool
) -> None:
    for row, messages in sessions:
        conn.execute(
            f"INSERT INTO sessions ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            tuple(row.values()),
        )
        for n, (role, created, content, meta) in enumerate(messages):
            stamp = f"2025-11-07 08:{n:02d}:00"
            cols = [
                "session_id",
                "role",
                "content_json",
                "created_timestamp",
                "timestamp",
                "metadata_json",
            ]
            vals: list[Any] = [row["id"], role, dumps(content), created, stamp, dumps(meta)]
            if message_ids:
                cols.insert(0, "message_id")
                vals.insert(0, f"msg_{row['id']}_{n}")
            conn.execute(
                f"INSERT INTO messages ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                vals,
            )


def goose_v5(path: Path) -> None:
    conn = fresh(path)
    conn.executescript(GOOSE_V5)
    conn.execute(
        "INSERT INTO schema_version (version, applied_at) VALUES (5, '2025-10-20 12:00:00')"
    )
    row = {
        "id": "20251020_1",
        "name": "Docker layer cache",
        "description": "",
        "user_set_name": 0,
        "session_type": "user",
        "working_dir": "/srv/app",
        "created_at": "2025-10-20 12:00:00",
        "updated_at": "2025-10-20 12:09:30",
        "extension_data": "{}",
        "accumulated_total_tokens": 18231,
    }
    _fill_goose(conn, [(row, goose_conversation(legacy_results=True))], message_ids=False)
    close(conn)


def goose_v9(path: Path) -> None:
    conn = fresh(path)
    conn.executescript(GOOSE_V9)
    conn.execute(
        "INSERT INTO schema_version (version, applied_at) VALUES (9, '2026-02-01 10:00:00')"
    )
    model = dumps({"model_name": "claude-sonnet-4-5", "context_limit": 200000, "temperature": None})
    main = {
        "id": "20260201_3",
        "name": "Docker layer cache",
        "description": "",
        "user_set_name": 1,
        "session_type": "user",
        "working_dir": "/srv/app",
        "created_at": "2026-02-01 10:00:00",
        "updated_at": "2026-02-01 10:09:30",
        "extension_data": "{}",
        "provider_name": "anthropic",
        "model_config_json": model,
    }
    sub = {
        "id": "20260201_4",
        "name": "Check base image tags",
        "description": "",
        "session_type": "sub_agent",
        "working_dir": "/srv/app",
        "created_at": "2026-02-01 10:03:00",
        "updated_at": "2026-02-01 10:03:40",
        "extension_data": "{}",
        "provider_name": "anthropic",
        "model_config_json": model,
    }
    sub_messages = [
        ("user", 1769940180, [_text("Is python:3.12-slim published for arm64?")], VISIBLE),
        (
            "assistant",
            1769940190,
            [
                _req(
                    "toolu_s1",
                    "developer__shell",
                    {"command": "docker manifest inspect python:3.12-slim | grep arch"},
                )
            ],
            VISIBLE,
        ),
        (
            "user",
            1769940200,
            [_resp("toolu_s1", '"architecture": "amd64",\n"architecture": "arm64",')],
            VISIBLE,
        ),
        ("assistant", 1769940210, [_text("Yes: the manifest lists amd64 and arm64.")], VISIBLE),
    ]
    _fill_goose(
        conn,
        [(main, goose_conversation(legacy_results=False)), (sub, sub_messages)],
        message_ids=True,
    )
    close(conn)


def goose_jsonl(path: Path) -> None:
    """A session file of Goose before 1.10: metadata line, then one Message a line."""
    meta = {
        "working_dir": "/home/dev/notes-api",
        "description": "Pagination off by one",
        "schedule_id": None,
        "message_count": 4,
        "total_tokens": 6120,
        "input_tokens": 5400,
        "output_tokens": 720,
        "accumulated_total_tokens": 6120,
        "accumulated_input_tokens": 5400,
        "accumulated_output_tokens": 720,
    }
    messages = [
        {
            "id": None,
            "role": "user",
            "created": 1749720930,
            "content": [_text("page=2 returns the last item of page 1 again.")],
            "metadata": VISIBLE,
        },
        {
            "id": None,
            "role": "assistant",
            "created": 1749720934,
            "content": [
                _req("toolu_j1", "developer__shell", {"command": "rg -n 'offset' api/notes.py"})
            ],
            "metadata": VISIBLE,
        },
        {
            "id": None,
            "role": "user",
            "created": 1749720935,
            "content": [_resp("toolu_j1", "44:    offset = (page - 1) * size - 1", legacy=True)],
            "metadata": VISIBLE,
        },
        {
            "id": None,
            "role": "assistant",
            "created": 1749720940,
            "content": [
                _text(
                    "The offset subtracts one: page 2 starts at item size-1. It should be "
                    "`(page - 1) * size`."
                ),
                {"type": "image", "data": "iVBORw0KGgoAAAANSUhEUg" * 4, "mimeType": "image/png"},
            ],
            "metadata": VISIBLE,
        },
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(dumps(x) + "\n" for x in [meta, *messages]), encoding="utf-8")


# ========================================================================= Zed
# zed-industries/zed crates/agent/src/db.rs (commit 0642ec7e): the threads
# table and its ALTERs; the thread JSON of DbThread 0.3.0 (crates/agent/src/
# thread.rs, serde's external tagging) and of legacy_thread.rs (commit 4410b970).

ZED_FIRST = """
CREATE TABLE IF NOT EXISTS threads (
    id TEXT PRIMARY KEY,
    summary TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    data_type TEXT NOT NULL,
    data BLOB NOT NULL
);
"""
ZED_ALTERS = """
ALTER TABLE threads ADD COLUMN parent_id TEXT;
ALTER TABLE threads ADD COLUMN folder_paths TEXT;
ALTER TABLE threads ADD COLUMN folder_paths_order TEXT;
ALTER TABLE threads ADD COLUMN created_at TEXT;
"""


def zstd(value: Any) -> bytes:
    return zstandard.ZstdCompressor(level=3).compress(dumps(value).encode())


ZED_MAIN = "a7c1e3f5-0b2d-4f6a-8c9e-1a2b3c4d5e6f"
ZED_SUB = "b8d2f4a6-1c3e-4a7b-9d0f-2b3c4d5e6f70"


def zed_current(path: Path) -> None:
    conn = fresh(path)
    conn.executescript(ZED_FIRST + ZED_ALTERS)
    main = {
        "title": "Borrow checker error in the parser",
        "version": "0.3.0",
        "updated_at": "2026-04-11T16:20:05Z",
        "model": {"provider": "zed.dev", "model": "claude-sonnet-4-5"},
        "profile": "write",
        "messages": [
            {
                "User": {
                    "id": "8f14e45f-ceea-4e67-a1b2-c3d4e5f60718",
                    "content": [
                        {"Text": "Fix the E0502 error in "},
                        {
                            "Mention": {
                                "uri": {"File": {"abs_path": "/home/dev/mdlite/src/parser.rs"}},
                                "content": (
                                    "fn next(&mut self) -> Token {\n    let t = "
                                    "&self.tokens[self.pos];\n    self.advance();\n    "
                                    "t.clone()\n}"
                                ),
                            }
                        },
                    ],
                }
            },
            {
                "Agent": {
                    "content": [
                        {
                            "Thinking": {
                                "text": (
                                    "`t` borrows self.tokens immutably while advance() borrows "
                                    "self mutably."
                                ),
                                "signature": None,
                            }
                        },
                        {
                            "Text": (
                                "`t` keeps an immutable borrow of `self` alive across "
                                "`self.advance()`. Cloning before advancing ends the borrow."
                            )
                        },
                        {
                            "ToolUse": {
                                "id": "toolu_z1",
                                "name": "edit_file",
                                "raw_input": '{"path":"mdlite/src/parser.rs","mode":"edit"}',
                                "input": {
                                    "path": "mdlite/src/parser.rs",
                                    "mode": "edit",
                                    "display_description": "Clone the token before advancing",
                                },
                                "is_input_complete": True,
                            }
                        },
                        {
                            "ToolUse": {
                                "id": "toolu_z2",
                                "name": "terminal",
                                "raw_input": '{"command":"cargo check","cd":"mdlite"}',
                                "input": {"command": "cargo check", "cd": "mdlite"},
                                "is_input_complete": True,
                            }
                        },
                    ],
                    "tool_results": {
                        "toolu_z1": {
                            "tool_use_id": "toolu_z1",
                            "tool_name": "edit_file",
                            "is_error": False,
                            "content": {
                                "Text": (
                                    "Edited mdlite/src/parser.rs:\n-    let t = "
                                    "&self.tokens[self.pos];\n+    let t = "
                                    "self.tokens[self.pos].clone();"
                                )
                            },
                            "output": {"new_text": "...", "old_text": "..."},
                        },
                        "toolu_z2": {
                            "tool_use_id": "toolu_z2",
                            "tool_name": "terminal",
                            "is_error": True,
                            "content": (
                                "error[E0308]: mismatched types\n  --> src/parser.rs:44:5\n   "
                                "|\n44 |     t.clone()\n   |     ^^^^^^^^^ expected `Token`, "
                                "found `&Token`"
                            ),
                            "output": None,
                        },
                    },
                    "reasoning_details": None,
                }
            },
            {
                "Agent": {
                    "content": [
                        {"RedactedThinking": "EqQBCkYIBxgCKkBz"},
                        {
                            "Text": (
                                "The return now clones a second time; returning `t` directly "
                                "fixes the type."
                            )
                        },
                    ],
                    "tool_results": {},
                    "reasoning_details": None,
                }
            },
            "Resume",
            {
                "Agent": {
                    "content": [{"Text": "`cargo check` passes."}],
                    "tool_results": {},
                    "reasoning_details": None,
                }
            },
        ],
    }
    sub = {
        "title": "Find other borrows across advance()",
        "version": "0.3.0",
        "updated_at": "2026-04-11T16:19:00Z",
        "subagent_context": {"parent_thread_id": ZED_MAIN, "tool_use_id": "toolu_z0", "depth": 1},
        "messages": [
            {
                "User": {
                    "id": "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
                    "content": [
                        {
                            "Text": (
                                "Search parser.rs for borrows of self.tokens held across "
                                "self.advance()."
                            )
                        }
                    ],
                }
            },
            {
                "Agent": {
                    "content": [
                        {
                            "ToolUse": {
                                "id": "toolu_y1",
                                "name": "grep",
                                "raw_input": '{"regex":"self\\\\.tokens\\\\["}',
                                "input": {"regex": "self\\.tokens\\["},
                                "is_input_complete": True,
                            }
                        }
                    ],
                    "tool_results": {
                        "toolu_y1": {
                            "tool_use_id": "toolu_y1",
                            "tool_name": "grep",
                            "is_error": False,
                            "content": [
                                {"Text": "src/parser.rs:41: let t = &self.tokens[self.pos];"}
                            ],
                            "output": None,
                        }
                    },
                    "reasoning_details": None,
                }
            },
            {
                "Agent": {
                    "content": [{"Text": "Only line 41 holds such a borrow."}],
                    "tool_results": {},
                    "reasoning_details": None,
                }
            },
        ],
    }
    rows = [
        (ZED_SUB, ZED_MAIN, sub, "2026-04-11T16:18:40+00:00", "2026-04-11T16:19:00+00:00"),
        (ZED_MAIN, None, main, "2026-04-11T16:18:00+00:00", "2026-04-11T16:20:05+00:00"),
    ]
    for tid, parent, thread, created, updated in rows:
        conn.execute(
            "INSERT INTO threads (id, parent_id, folder_paths, folder_paths_order, "
            "summary, updated_at, data_type, data, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, 'zstd', ?, ?)",
            (tid, parent, "/home/dev/mdlite", "0", thread["title"], updated, zstd(thread), created),
        )
    close(conn)


def zed_legacy(path: Path) -> None:
    """threads.db as the first agent panel wrote it: no parent_id or created_at, 0.2.0 and
    unversioned threads, one stored as plain JSON."""
    conn = fresh(path)
    conn.executescript(ZED_FIRST)
    v2 = {
        "version": "0.2.0",
        "summary": "Add a health check route",
        "updated_at": "2025-05-20T11:02:00Z",
        "model": {"provider": "anthropic", "model": "claude-3-7-sonnet-latest"},
        "messages": [
            {
                "id": 0,
                "role": "user",
                "segments": [
                    {"type": "text", "text": "Add GET /healthz returning 200 and the git sha."}
                ],
                "tool_uses": [],
                "tool_results": [],
                "context": (
                    "<files>\n```rs server/src/routes.rs\npub fn routes() -> Router { "
                    "Router::new() }\n```\n</files>"
                ),
                "creases": [],
                "is_hidden": False,
            },
            {
                "id": 1,
                "role": "assistant",
                "segments": [
                    {
                        "type": "thinking",
                        "text": "Read the sha at build time with env!().",
                        "signature": "sig",
                    },
                    {"type": "text", "text": "I'll add the route and embed GIT_SHA at build time."},
                ],
                "tool_uses": [
                    {
                        "id": "toolu_l1",
                        "name": "edit_file",
                        "input": {
                            "path": "server/src/routes.rs",
                            "display_description": "Add /healthz",
                        },
                    }
                ],
                "tool_results": [
                    {
                        "tool_use_id": "toolu_l1",
                        "is_error": False,
                        "content": "Edited server/src/routes.rs",
                        "output": None,
                    }
                ],
                "context": "",
                "creases": [],
                "is_hidden": False,
            },
            {
                "id": 2,
                "role": "assistant",
                "segments": [
                    {"type": "RedactedThinking", "data": "ErcBCkgIBxAB"},
                    {"type": "text", "text": "Done: GET /healthz returns `ok <sha>`."},
                ],
                "tool_uses": [],
                "tool_results": [],
                "context": "",
                "creases": [],
                "is_hidden": False,
            },
        ],
    }
    unversioned = {
        "summary": "Explain the lifetime error",
        "updated_at": "2025-02-03T08:00:00Z",
        "messages": [
            {
                "id": 0,
                "role": "user",
                "text": "What does 'borrowed value does not live long enough' mean here?",
                "tool_uses": [],
                "tool_results": [],
            },
            {
                "id": 1,
                "role": "assistant",
                "text": (
                    "The String is dropped at the end of the loop body while the Vec still "
                    "holds a &str into it. Push owned Strings instead."
                ),
                "tool_uses": [],
                "tool_results": [],
            },
        ],
    }
    conn.execute(
        "INSERT INTO threads VALUES (?, ?, ?, 'zstd', ?)",
        ("c9e3a5b7-2d4f-4b8c-a0e1-3c4d5e6f7a81", v2["summary"], v2["updated_at"], zstd(v2)),
    )
    conn.execute(
        "INSERT INTO threads VALUES (?, ?, ?, 'json', ?)",
        (
            "d0f4b6c8-3e5a-4c9d-b1f2-4d5e6f7a8b92",
            unversioned["summary"],
            unversioned["updated_at"],
            dumps(unversioned).encode(),
        ),
    )
    close(conn)


# ======================================================================= main


def build(out: Path) -> None:
    cursor_global(out / "cursor" / "globalStorage" / "state.vscdb")
    cursor_inline(out / "cursor" / "globalStorage-0.44" / "state.vscdb")
    cursor_chat_panel(out / "cursor" / "workspaceStorage-chat" / "state.vscdb")
    cursor_cli(out / "cursor" / "chats" / "store.db")
    opencode_db(out / "opencode" / "opencode.db")
    opencode_tree(out / "opencode")
    kilo_db(out / "kilo" / "kilo.db")
    goose_v9(out / "goose" / "sessions.db")
    goose_v5(out / "goose" / "goose-1.10" / "sessions.db")
    goose_jsonl(out / "goose" / "20250612_103000.jsonl")
    zed_current(out / "zed" / "threads.db")
    zed_legacy(out / "zed" / "legacy" / "threads.db")


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "fixtures" / "transcripts")
