"""Regenerate the demo project's evidence labels and calibration labels.

The judgements are kept here, keyed by (session, index, query_id), rather
than by chunk_sha: editing a chunk's text changes its sha, and this script
then writes the new shas without anyone relabelling by hand. A chunk edit
that changes a chunk's meaning still needs its row below re-judged.

    .venv/bin/python scripts/make_demo_labels.py [--out DIR]

writes DIR/labels.jsonl (every chunk x query, annotator "demo-author") and
DIR/calibration.jsonl (a 24-pair second opinion, annotator "demo-calibrator"),
both sorted by query_id, then session, then index.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

from grumem.config.settings import load_queries
from grumem.errors import GrumemError
from grumem.io.chunk_files import iter_sessions
from grumem.io.jsonl import write_jsonl

# this script runs from the checkout; the package knows only its package data
FIXTURES_DIR = Path(__file__).resolve().parents[1] / "fixtures"

DEMO_DIR = FIXTURES_DIR / "demo"
ERRORS = "errors-and-fixes"
ENV = "environment"

S1 = "demo-01-k8s-namespace"
S2 = "demo-02-slugify-unicode"
S3 = "demo-03-npm-peer-deps"
S4 = "demo-04-git-rebase-conflict"
S5 = "demo-05-ci-postgres"

# One row per chunk: (session, index, errors-and-fixes, environment), then why.
# "environment" counts only what a future agent could not guess: a bare
# `pytest` or `git log` is not evidence, a port, an env var or a version is.
_ROWS: list[tuple[str, int, bool, bool]] = [
    (S1, 0, False, True),  # the task; kubectl version, context, cluster, manifests dir
    (S1, 1, True, False),  # namespaces "shop" not found on apply
    (S1, 2, True, True),  # cause: staging is shop-staging; rule: apply the overlay with -k
    (S1, 3, True, True),  # overlay applies; rollout times out; the apply -k command
    (S1, 4, True, True),  # ImagePullBackOff, manifest unknown; the staging registry path
    (S1, 5, True, True),  # fix: tags carry a v prefix (v2.4.1); rollout succeeds
    (S1, 6, False, False),  # lunch chit-chat
    (S2, 0, True, False),  # failing test_slugify_accents, pytest output
    (S2, 1, True, False),  # cause: regex deletes non-ASCII letters
    (S2, 2, True, False),  # fix: NFKD + drop combining marks; 4 passed
    (S2, 3, True, False),  # ß/Æ/ø still dropped; fixed with a transliteration table
    (S2, 4, False, False),  # listing the repo root
    (S3, 0, True, True),  # ERESOLVE peer conflict; node/npm versions
    (S3, 1, True, True),  # fix: swap to @hello-pangea/dnd; CI runs npm ci, keep the lock in sync
    (S3, 2, True, True),  # Cannot find module, imports rewritten; npm test needs --watchAll=false
    (S4, 0, False, False),  # greeting, the task, listing the branch's commits
    (S4, 1, True, False),  # rebase stops: conflict in billing/invoice.py
    (S4, 2, True, False),  # conflict resolved by keeping main's quantize
    (S4, 3, True, False),  # second conflict in tests, both blocks kept; rebase done
    (S4, 4, True, False),  # test_total_rounds_half_up fails (half-even vs half-up)
    (S4, 5, True, False),  # fix: ROUND_HALF_UP (a business rule, not environment)
    (S4, 6, True, False),  # compaction summary restates conflicts and the fix; push
    (S4, 7, False, False),  # --force vs --force-with-lease, general knowledge
    (S4, 8, False, False),  # branch log, goodbye
    (S5, 0, True, True),  # CI connection refused on 5432; Python/Poetry/Docker versions
    (S5, 1, True, True),  # reproduced; test DB is postgres:15.6 on host port 55432
    (S5, 2, True, True),  # cause: CI sets TEST_DATABASE_URL, conftest reads DATABASE_URL
    (S5, 3, True, True),  # #311 intent: TEST_DATABASE_URL wins, drop the fallback
    (S5, 4, True, True),  # conftest fixed; docker compose -f docker-compose.test.yml up -d db
    (S5, 5, True, True),  # alembic cannot locate revision; the full test command
    (S5, 6, True, False),  # cause: down_revision points at a squashed revision
    (S5, 7, True, False),  # fix: repoint to 5b1d0c9e7f21; 12 passed
    (S5, 8, True, True),  # compaction summary of both fixes, DB command and port; suite green
    (S5, 9, False, True),  # skipped test needs FX_API_KEY
    (S5, 10, False, False),  # book recommendation
    (S5, 11, False, False),  # git status, wrap-up
]

LABELS: dict[tuple[str, int, str], bool] = {
    key: value
    for session, index, errors, env in _ROWS
    for key, value in (((session, index, ERRORS), errors), ((session, index, ENV), env))
}

# The second, independent pass over 24 pairs. It disagrees with LABELS on
# three borderline chunks, marked; the rest agree.
CALIBRATION: dict[tuple[str, int, str], bool] = {
    (S1, 0, ERRORS): False,
    (S1, 1, ERRORS): True,
    (S1, 6, ERRORS): False,
    (S2, 0, ERRORS): True,
    (S2, 4, ERRORS): False,
    (S3, 1, ERRORS): True,
    (S4, 0, ERRORS): False,
    (S4, 6, ERRORS): False,  # disagrees: a summary is not the agent hitting an error
    (S4, 7, ERRORS): False,
    (S5, 5, ERRORS): True,
    (S5, 9, ERRORS): False,
    (S5, 11, ERRORS): False,
    (S1, 0, ENV): True,
    (S1, 6, ENV): False,
    (S2, 1, ENV): False,
    (S2, 4, ENV): True,  # disagrees: counts the repo layout as environment
    (S3, 0, ENV): True,
    (S3, 2, ENV): True,
    (S4, 3, ENV): False,
    (S4, 5, ENV): False,
    (S5, 2, ENV): True,
    (S5, 7, ENV): True,  # disagrees: counts "never edit the baseline migration"
    (S5, 9, ENV): True,
    (S5, 10, ENV): False,
}


def _label(query_id: str, sha: str, evidence: bool, annotator: str) -> dict:
    return {"query_id": query_id, "chunk_sha": sha, "evidence": evidence, "annotator": annotator}


def chunk_shas(chunks_dir: Path) -> dict[tuple[str, int], str]:
    """(session, index) -> chunk_sha for every chunk under `chunks_dir`."""
    return {
        (session, c.index): c.sha for session, chunks in iter_sessions([chunks_dir]) for c in chunks
    }


def check_tables(shas: dict[tuple[str, int], str], query_ids: list[str]) -> None:
    """The tables must judge exactly the chunks and queries on disk, nothing more."""
    wanted = {(s, i, q) for (s, i) in shas for q in query_ids}
    missing = sorted(wanted - LABELS.keys())
    extra = sorted(LABELS.keys() - wanted)
    if missing or extra:
        raise GrumemError(
            f"LABELS does not match the chunk files: unjudged {missing[:5]}, "
            f"no such chunk {extra[:5]}; edit the table in {__file__}"
        )
    stray = sorted(CALIBRATION.keys() - wanted)
    if stray:
        raise GrumemError(f"CALIBRATION names chunks that do not exist: {stray[:5]}")
    # labels join on chunk_sha: two chunks rendering alike would share one label
    seen: dict[str, tuple[str, int]] = {}
    for key, sha in shas.items():
        if sha in seen:
            raise GrumemError(
                f"chunks {seen[sha]} and {key} render identically: labels would collide"
            )
        seen[sha] = key


def _rows(
    table: dict[tuple[str, int, str], bool], shas: dict[tuple[str, int], str], annotator: str
) -> Iterator[dict]:
    for session, index, query_id in sorted(table, key=lambda k: (k[2], k[0], k[1])):
        yield _label(query_id, shas[(session, index)], table[(session, index, query_id)], annotator)


def make(chunks_dir: Path, queries_path: Path, out_dir: Path) -> tuple[int, int]:
    """Write labels.jsonl and calibration.jsonl into `out_dir`; return their line counts."""
    shas = chunk_shas(chunks_dir)
    query_ids = [q["id"] for q in load_queries(queries_path)]
    check_tables(shas, query_ids)
    n_labels = write_jsonl(out_dir / "labels.jsonl", _rows(LABELS, shas, "demo-author"), "label")
    n_cal = write_jsonl(
        out_dir / "calibration.jsonl", _rows(CALIBRATION, shas, "demo-calibrator"), "label"
    )
    return n_labels, n_cal


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--chunks", type=Path, default=DEMO_DIR / "chunks", help="chunk files directory"
    )
    ap.add_argument("--queries", type=Path, default=DEMO_DIR / "queries.yaml")
    ap.add_argument("--out", type=Path, default=DEMO_DIR, help="where to write the two label files")
    args = ap.parse_args(argv)
    try:
        n_labels, n_cal = make(args.chunks, args.queries, args.out)
    except GrumemError as e:
        print(f"make_demo_labels: {e}", file=sys.stderr)
        return 1
    print(f"wrote {n_labels} labels and {n_cal} calibration labels to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
