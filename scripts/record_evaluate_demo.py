#!/usr/bin/env python
"""Record the demo's `snakemake evaluate` with the embedded model: the response cache
entries of fixtures/evaluate/cache/, which tests/workflow/test_workflow_evaluate.py
replays.

The demo's config.yaml, its two policies (the embedded SmolLM2-135M-Instruct with
its gate grammar, `grammar`, and without, `free`) run live at L2 on the demo's test
split in a scratch directory; the cache entries of every request in their turn logs
(the final ask of each turn and its earlier asks) are copied into the fixture, and
nothing else: a replay of the same config asks exactly these requests.

    .venv/bin/python scripts/record_evaluate_demo.py            # ~5 minutes on 2 cores

Prints the scratch directory's compare.md.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from grumem.io.jsonl import read_jsonl

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "fixtures" / "evaluate" / "cache"


def requests_of(log: Path) -> set[str]:
    """The request sha256 of every ask a turn log records."""
    shas = set()
    for line in read_jsonl(log, "log"):
        if line["request"] is not None:
            shas.add(line["request"]["sha256"])
        shas.update(ask["request"]["sha256"] for ask in line["earlier_asks"])
    return shas


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="grumem-evaluate-") as tmp:
        work = Path(tmp)
        config = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
        cache = work / "cache"
        for llm in [config["llm"], *config["evaluate"]["policies"].values()]:
            llm["cache_dir"] = str(cache)
        (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), "utf-8")
        (work / "fixtures").symlink_to(REPO / "fixtures")
        subprocess.run(
            [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile")]
            + ["--configfile", "config.yaml", "--cores", str(args.cores), "evaluate"],
            cwd=work,
            check=True,
        )
        shas: set[str] = set()
        for log in sorted((work / "results/demo/eval").glob("*/log.jsonl")):
            shas |= requests_of(log)
        if FIXTURE.exists():
            shutil.rmtree(FIXTURE)
        for sha in sorted(shas):
            entry = cache / sha[:2] / f"{sha}.json"
            (FIXTURE / sha[:2]).mkdir(parents=True, exist_ok=True)
            shutil.copy(entry, FIXTURE / sha[:2] / entry.name)
        print((work / "results/demo/eval/compare.md").read_text(encoding="utf-8"))
        print(f"{len(shas)} cache entries recorded in {FIXTURE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
