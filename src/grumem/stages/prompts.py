"""The `prompts` stage: every (trajectory, t) of a shard, question and section
filled, memory slot open; over-budget input fails here, before any request is paid for."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Mapping, Sequence

from grumem.core.template import PromptBuilder
from grumem.errors import BudgetError, GrumemError
from grumem.io.chunk_files import iter_sessions
from grumem.io.session_index import check_session, read_session_index
from grumem.records.prompt import PromptRecord, TokenCounts


def trajectory_id(project: str, query_id: str, session: str, sample: int) -> str:
    return f"{project}/{query_id}/{session}/{sample}"


def plan(
    project: str,
    chunk_paths: Sequence[str | os.PathLike[str]],
    queries: Sequence[dict],
    builder: PromptBuilder,
    samples: int,
    index: Mapping[str, str] | None = None,
    index_path: str = "",
) -> Iterator[PromptRecord]:
    """Prompt records in plan order: query, session (file order), sample, then t.

    With the project's session index (grumem.io.session_index), a session that another
    chunk file of the project also holds fails here, before it is paid for."""
    sessions = list(iter_sessions(chunk_paths))
    if not sessions:
        raise GrumemError(f"project {project}: no chunks in {', '.join(map(str, chunk_paths))}")
    if index is not None:
        for session, chunks in sessions:
            check_session(index, index_path, session, chunks[0].path, chunks[0].line)
    for q in queries:
        q_tokens = builder.tokens.count(q["question"])
        if q_tokens > builder.budget.question:
            raise GrumemError(
                f"query {q['id']}: over budget: question is {q_tokens} tokens, "
                f"limit {builder.budget.question}"
            )
        for session, chunks in sessions:
            halves = []
            for c in chunks:
                section = c.text
                try:
                    # the worst the memory slot can legally hold is checked per turn later;
                    # here the fixed parts must leave room for it and the response
                    prompt = builder.build(q["question"], section, None)
                    room = dict(prompt.tokens, memory=builder.budget.memory)
                    room["total"] += builder.budget.memory
                    builder.check(room)
                except BudgetError as e:
                    raise GrumemError(
                        f"{c.path}:{c.line}: chunk {c.index} of session {session!r} "
                        f"(query {q['id']}): {e}"
                    ) from None
                prefix, suffix = builder.split(q["question"], section)
                halves.append((c, prefix, suffix, prompt.tokens))
            for k in range(samples):
                tid = trajectory_id(project, q["id"], session, k)
                for c, prefix, suffix, tokens in halves:
                    yield PromptRecord(
                        trajectory_id=tid,
                        project=project,
                        query_id=q["id"],
                        session=session,
                        sample=k,
                        t=c.t,
                        chunk_sha=c.sha,
                        chunk_file=c.path,
                        chunk_line=c.line,
                        system=builder.system,
                        prefix=prefix,
                        suffix=suffix,
                        tokens=TokenCounts(
                            question=tokens["question"],
                            section=tokens["section"],
                            fixed=tokens["total"] - tokens["memory"],
                        ),
                    )


def main(args: argparse.Namespace) -> int:
    """`grumem prompts`: every (trajectory, t) of a shard, its count to stderr (the job's log)."""
    from grumem.config.settings import load_queries, settings_from_args
    from grumem.core.template import Budget
    from grumem.io.template_files import GRU_MEM_TEMPLATE, load_prompt_builder
    from grumem.io.typed import write_records

    s = settings_from_args(args)
    builder = load_prompt_builder(
        args.template or GRU_MEM_TEMPLATE, s["llm"]["system"], Budget.from_config(s["budget"])
    )
    index = read_session_index(args.sessions) if args.sessions else None
    records = plan(
        args.project,
        args.chunks,
        load_queries(args.queries),
        builder,
        s["loop"]["samples"],
        index,
        args.sessions or "",
    )
    n = write_records(args.out, records, PromptRecord)
    print(f"prompts: {n} turns written to {args.out}", file=sys.stderr)
    return 0
