"""The `sessions` stage: one project's session index (grumem.io.session_index),
made before any prompt, so that a session copied into two chunk files fails
before a request is sent."""

from __future__ import annotations

import argparse
import sys

from grumem.io.session_index import session_index
from grumem.io.typed import write_records
from grumem.records.session_index import SessionIndexEntry


def main(args: argparse.Namespace) -> int:
    """`grumem sessions`: the project's session index."""
    n = write_records(args.out, session_index(args.chunks), SessionIndexEntry)
    print(f"sessions: {n} sessions indexed in {args.out}", file=sys.stderr)
    return 0
