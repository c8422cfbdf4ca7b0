"""The counts of a judge run, or of the labels stage's merge of its shards: pairs,
labels (yes, no), pairs left unjudged and why, and the line a job's log shows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def judge_counts(
    evidence: Sequence[bool],
    unjudged: Sequence[str],
    counters: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Pairs, labelled (yes, no: the labels' `evidence`) and unjudged by reason (the
    unjudged pairs' `reason`); with the client's `counters`, also the requests sent and
    those the cache answered."""
    out = {
        "pairs": len(evidence) + len(unjudged),
        "labelled": len(evidence),
        "yes": sum(1 for e in evidence if e),
        "no": sum(1 for e in evidence if not e),
        "unparsed": sum(1 for r in unjudged if r == "unparsed"),
        "request_failed": sum(1 for r in unjudged if r == "request_failed"),
        "budget": sum(1 for r in unjudged if r == "budget"),
    }
    if counters is not None:
        out["from_cache"] = counters["cache_hits"]
        out["sent"] = counters["answered"] + counters["failed"]
    return out


def format_judge_counts(stats: Mapping[str, int], out: str, unjudged: str) -> str:
    """The counts as one line for the job's log; pairs without a label say what follows."""
    text = (
        f"judge: {stats['labelled']}/{stats['pairs']} pairs labelled (yes {stats['yes']}, "
        f"no {stats['no']}) -> {out}; unparsed {stats['unparsed']}, request failed "
        f"{stats['request_failed']}, over budget {stats['budget']} -> {unjudged}"
    )
    if "sent" in stats:
        text += f"; requests sent {stats['sent']}, from cache {stats['from_cache']}"
    missing = stats["pairs"] - stats["labelled"]
    if missing:
        text += (
            f". {missing} pair(s) have no label: the export will refuse to run until they do"
            " (see the unjudged file; rerun the judge to resend failed requests)"
        )
    return text
