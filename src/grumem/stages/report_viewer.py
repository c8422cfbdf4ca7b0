"""`grumem report-viewer` (rule `report_viewer`): the trajectory viewer page of a project,
from its corpus and its turn log (grumem.report.viewer)."""

from __future__ import annotations

import argparse
import sys

from grumem.report.viewer import write_viewer


def main(args: argparse.Namespace) -> int:
    stats = write_viewer(
        args.turn_log,
        args.trajectories,
        args.template,
        args.out,
        args.project,
        max_trajectories=args.max_trajectories,
        max_bytes=args.max_bytes,
    )
    print(
        f"report-viewer: {stats.shown} of {stats.trajectories} trajectories"
        f" ({stats.not_exported} aborted before their first answer, not in the corpus),"
        f" {stats.bytes} bytes -> {args.out}",
        file=sys.stderr,
    )
    return 0
