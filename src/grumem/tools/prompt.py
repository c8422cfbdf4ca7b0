"""`grumem prompt`: print the exact user message of one turn, for eyeballing what the
model sees."""

from __future__ import annotations

import argparse
import sys

from grumem.errors import GrumemError
from grumem.io.chunk_files import read_chunk_file
from grumem.io.template_files import GRU_MEM_TEMPLATE, load_prompt_builder


def main(args: argparse.Namespace) -> int:
    """`grumem prompt`: the exact user message of one turn, to stdout."""
    if args.question is None or args.chunk_file is None or args.index is None:
        raise GrumemError("grumem prompt needs --question, --chunk-file and --index")
    chunks = [
        c
        for c in read_chunk_file(args.chunk_file)
        if c.index == args.index and args.session in (None, c.session)
    ]
    if len(chunks) != 1:
        what = "no chunk" if not chunks else "several sessions have a chunk"
        raise GrumemError(
            f"{args.chunk_file}: {what} with index {args.index}"
            + ("" if chunks else "")
            + ("; pass --session" if len(chunks) > 1 else "")
        )
    builder = load_prompt_builder(args.template or GRU_MEM_TEMPLATE)
    prompt = builder.build(args.question, chunks[0].text, args.memory)
    sys.stdout.buffer.write(prompt.user.encode("utf-8"))
    sys.stdout.flush()
    return 0
