"""`grumem serve-local`: run the embedded llama.cpp model server by hand."""

from __future__ import annotations

import argparse
import signal
import sys

from grumem.errors import GrumemError
from grumem.llm.local_server import LocalServer


def main(args: argparse.Namespace) -> int:
    """`grumem serve-local`: the embedded llama.cpp server until Ctrl-C or SIGTERM."""
    # SIGTERM ends the wait like Ctrl-C, so the server is stopped either way
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with LocalServer(
        n_ctx=args.n_ctx, startup_timeout=args.startup_timeout, port=args.port
    ) as server:
        print(server.base_url, flush=True)
        print(
            f"model {server.model}; set llm.base_url to the URL above; Ctrl-C stops it",
            file=sys.stderr,
            flush=True,
        )
        assert server.proc is not None  # the context manager started it
        try:
            code = server.proc.wait()
        except KeyboardInterrupt:
            return 0
        raise GrumemError(f"the llama.cpp server exited with status {code}:\n{server.log_tail()}")
