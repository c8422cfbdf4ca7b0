"""`grumem parse`: strictly parse one gate response, as the loop does."""

from __future__ import annotations

import argparse
import sys

from grumem.core.gate_parser import parse_gate_response
from grumem.core.json_text import dumps
from grumem.errors import GrumemError, ParseError


def main(args: argparse.Namespace) -> int:
    """`grumem parse`: the strict parse of one response as JSON; exit 2 when malformed."""
    # bytes, not text mode: universal newlines would rewrite \r\n inside the memory
    if args.file is None:
        data, name = sys.stdin.buffer.read(), "<stdin>"
    else:
        try:
            with open(args.file, "rb") as f:
                data, name = f.read(), args.file
        except OSError as e:
            raise GrumemError(f"{args.file}: cannot read: {e.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GrumemError(f"{name}: not UTF-8 ({e.reason} at byte {e.start})") from None
    try:
        out: dict = parse_gate_response(text).to_json()
        code = 0
    except ParseError as e:
        out, code = {"error": e.to_json()}, 2
        print(f"grumem parse: error: {name}: {e}", file=sys.stderr)
    sys.stdout.buffer.write((dumps(out) + "\n").encode("utf-8"))
    sys.stdout.flush()
    return code
