"""The `sessions` stage: one project's session index (grumem.io.session_index),
made before any prompt, so that a session copied into two chunk files fails
before a request is sent."""

from __future__ import annotations

import argparse
import sys

from grumem.io.session_index import session_index


def main(args: argparse.Namespace) -> int:
    """`grumem sessions`: the project's session index."""
    from grumem.io.jsonl import write_jsonl

    n = write_jsonl(args.out, session_index(args.chunks), "session")
    print(f"sessions: {n} sessions indexed in {args.out}", file=sys.stderr)
    return 0
