"""Write fixtures/transcripts/trajectory-dataset/: a Parquet file shaped like
nebius/SWE-agent-trajectories and a JSON Lines file shaped like
SWE-Gym/OpenHands-SFT-Trajectories (column names and message keys as their
dataset cards list them; the trajectories are invented for the tests).

The Parquet file is binary, so it is made by this script, deterministically:
run `python scripts/write_trajectory_dataset_fixtures.py` after changing it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

OUT = Path(__file__).resolve().parent.parent / "fixtures" / "transcripts" / "trajectory-dataset"
SYSTEM = (
    "SETTING: You are an autonomous programmer, and you're working directly in the command line"
    " with a special interface.\nThe special interface consists of a file editor that shows you"
    " 100 lines of a file at a time."
)


def listing(module: str, n: int) -> str:
    """An `open` command's output: n numbered lines of a plausible module."""
    lines = []
    for i in range(n):
        lines.append(f"{i + 1}:def {module}_rule_{i}(value, limit={i + 3}):")
        lines.append(f'{i + 1}:    """Clamp value for rule {i} of {module}."""')
        lines.append(f"{i + 1}:    return min(max(value, {i}), limit)")
    return f"[File: /repo/src/{module}.py ({n * 3} lines total)]\n" + "\n".join(lines)


def step(role: str, text: str) -> dict:
    return {"role": role, "text": text, "system_prompt": SYSTEM, "mask": role != "ai"}


def swe_agent_rows() -> list[dict]:
    long = [step("system", SYSTEM)]
    long.append(
        step(
            "user",
            "We're currently solving the following issue within our repository.\nISSUE:\n"
            "clamp() returns the limit when value equals the lower bound\n(Open file: n/a)",
        )
    )
    for k, module in enumerate(["clamp", "bounds", "limits", "rules"]):
        long.append(
            step(
                "ai",
                f"DISCUSSION\nThe clamp helpers may be defined in src/{module}.py; open it.\n\n"
                f"```\nopen src/{module}.py\n```",
            )
        )
        long.append(step("user", listing(module, 70 + k)))
    long.append(
        step(
            "ai",
            "DISCUSSION\nclamp_rule_0 uses min before max, so equal bounds pick the limit."
            " Swap them.\n\n```\nedit 3:3\n    return max(min(value, limit), 0)\nend_of_edit\n```",
        )
    )
    long.append(step("user", "File updated. Please review the changes.\n(Open file: src/clamp.py)"))
    long.append(step("ai", "DISCUSSION\nThe fix is in place; submit.\n\n```\nsubmit\n```"))
    short = [
        step("system", SYSTEM),
        step("user", "ISSUE:\nREADME badge links to the old CI\n(Open file: n/a)"),
        step("ai", "DISCUSSION\nFind the badge.\n\n```\nsearch_file travis README.md\n```"),
        step("user", 'Found 1 matches for "travis" in /repo/README.md:\nLine 3:[![Build]'),
        step("ai", "DISCUSSION\nReplace it with the Actions badge.\n\n```\nsubmit\n```"),
    ]
    return [
        {
            "instance_id": "pyclamp__pyclamp-118",
            "model_name": "swe-agent-llama-70b",
            "trajectory": long,
            "exit_status": "submitted",
        },
        {
            "instance_id": "pyclamp__pyclamp-131",
            "model_name": "swe-agent-llama-70b",
            "trajectory": short,
            "exit_status": "submitted",
        },
    ]


def openhands_rows() -> list[dict]:
    def call(cid: str, command: str) -> dict:
        return {
            "id": cid,
            "type": "function",
            "function": {"name": "execute_bash", "arguments": json.dumps({"command": command})},
        }

    return [
        {
            "instance_id": "tomlkit__tomlkit-402",
            "resolved": True,
            "messages": [
                {"role": "system", "content": "You are OpenHands agent, a helpful AI assistant."},
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "text",
                            "text": "<uploaded_files>\n/workspace/tomlkit\n</uploaded_files>\n"
                            "Dumping a table with a dotted key loses the quotes around it.",
                        }
                    ],
                },
                {
                    "role": "assistant",
                    "content": "Reproduce it first.",
                    "tool_calls": [call("call_1", "cd /workspace/tomlkit && python repro.py")],
                },
                {
                    "role": "tool",
                    "tool_call_id": "call_1",
                    "name": "execute_bash",
                    "content": "a.b = 1\n[Python Interpreter: /usr/bin/python]\n"
                    'expected: "a.b" = 1',
                },
                {
                    "role": "assistant",
                    "content": "Key.as_string drops the quotes for bare-looking keys; quote any key"
                    " holding a dot.",
                    "tool_calls": [call("call_2", "cd /workspace/tomlkit && pytest -q tests")],
                },
                {
                    "role": "tool",
                    "tool_call_id": "call_2",
                    "name": "execute_bash",
                    "content": "412 passed in 3.10s",
                },
                {"role": "assistant", "content": "Fixed: dotted keys are quoted when dumped."},
            ],
        },
        {
            "instance_id": "tomlkit__tomlkit-377",
            "resolved": False,
            "messages": [
                {"role": "user", "content": "Parsing an empty inline table raises IndexError."},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        call("call_9", "python -c 'import tomlkit; tomlkit.parse(\"a = {}\")'")
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_id": "call_9",
                    "name": "execute_bash",
                    "content": "IndexError: string index out of range",
                },
                {
                    "role": "assistant",
                    "content": "The parser reads past '}' when the table is empty.",
                },
            ],
        },
    ]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(swe_agent_rows())
    pq.write_table(table, OUT / "swe-agent-trajectories.parquet", compression="zstd")
    with open(OUT / "openhands-sft.jsonl", "w", encoding="utf-8") as f:
        for row in openhands_rows():
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
