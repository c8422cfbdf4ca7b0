"""`grumem`: one subcommand per workflow rule, plus tools for looking at prompts and parses.

Each subcommand is `add_<name>(subparsers)` registering a `run` function;
keep them thin: parse arguments, call the module that does the work.

`--log` only ever names a progress log the command appends to (and where
its error goes too); an input that is a log, such as log.jsonl, has its own
flag (`--turn-log`). No command writes to a file it reads.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable, Sequence

from grumem.config import add_settings_arguments, settings_from_args
from grumem.errors import GrumemError


def add_progress_log(p: argparse.ArgumentParser) -> None:
    """`--log`: the progress log this command appends to, and the only file its
    error handler may write (see main)."""
    p.add_argument(
        "--log",
        dest="progress_log",
        default=None,
        help="also append progress (and any error) to this file",
    )


def add_prompt(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prompt", help="print the exact user message of one turn")
    p.add_argument("--question", help="the standing question")
    p.add_argument("--chunk-file", help="a chunk file (JSON Lines)")
    p.add_argument("--index", type=int, help="chunk index in the file's session (t = index + 1)")
    p.add_argument("--session", help="session, when the chunk file holds several")
    p.add_argument("--memory", default=None, help="M_{t-1}; omitted means 'No previous memory'")
    p.add_argument("--template", default=None, help="template file (default templates/gru-mem.txt)")
    p.set_defaults(run=run_prompt)


def run_prompt(args: argparse.Namespace) -> int:
    from grumem.chunk_files import read_chunk_file
    from grumem.template import DEFAULT_TEMPLATE, PromptBuilder

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
    builder = PromptBuilder.from_file(args.template or DEFAULT_TEMPLATE)
    prompt = builder.build(args.question, chunks[0].text, args.memory)
    sys.stdout.buffer.write(prompt.user.encode("utf-8"))
    sys.stdout.flush()
    return 0


def add_parse(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("parse", help="strictly parse one gate response (exit 2 when malformed)")
    p.add_argument("file", nargs="?", help="the response text (default: stdin)")
    p.set_defaults(run=run_parse)


def run_parse(args: argparse.Namespace) -> int:
    from grumem.gate_parser import ParseError, parse_gate_response
    from grumem.jsonl import dumps

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


def add_fake_server(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fake-server", help="serve a scripted fake OpenAI-compatible LLM locally")
    p.add_argument("--script", required=True, help="the script, a YAML or JSON file")
    p.add_argument("--host", default="127.0.0.1", help="a loopback address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port; 0 picks a free one (default)")
    p.add_argument("--port-file", default=None, help="also write the bound port to this file")
    p.set_defaults(run=run_fake_server)


def run_fake_server(args: argparse.Namespace) -> int:
    from grumem.llm.fake_server import run

    return run(args)


def add_prompts(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prompts", help="stage `prompts`: every (trajectory, t) of a shard")
    add_settings_arguments(p)
    p.add_argument("--project", required=True)
    p.add_argument("--queries", required=True, help="queries YAML")
    p.add_argument("--template", default=None, help="default templates/gru-mem.txt")
    p.add_argument("--sessions", default=None, help="the project's session index (grumem sessions)")
    p.add_argument("--out", required=True)
    p.add_argument("chunks", nargs="+", help="chunk files, or directories of them")
    p.set_defaults(run=run_prompts)


def run_prompts(args: argparse.Namespace) -> int:
    from grumem.config import load_queries
    from grumem.jsonl import write_jsonl
    from grumem.stages.prompts import plan
    from grumem.stages.sessions import read_session_index
    from grumem.template import DEFAULT_TEMPLATE, Budget, PromptBuilder

    s = settings_from_args(args)
    builder = PromptBuilder.from_file(
        args.template or DEFAULT_TEMPLATE, s["llm"]["system"], Budget.from_config(s["budget"])
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
    n = write_jsonl(args.out, records, "prompt")
    print(f"prompts: {n} turns written to {args.out}", file=sys.stderr)
    return 0


def add_sessions(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sessions", help="stage `sessions`: a project's session index")
    p.add_argument("--out", required=True, help="the index (JSON Lines: session, file, line)")
    p.add_argument("chunks", nargs="+", help="every chunk file of the project, or directories")
    p.set_defaults(run=run_sessions)


def run_sessions(args: argparse.Namespace) -> int:
    from grumem.jsonl import write_jsonl
    from grumem.stages.sessions import session_index

    n = write_jsonl(args.out, session_index(args.chunks), "session")
    print(f"sessions: {n} sessions indexed in {args.out}", file=sys.stderr)
    return 0


def add_responses(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("responses", help="stage `responses`: the gated loop over a shard")
    add_settings_arguments(p)
    p.add_argument("--prompts", required=True)
    p.add_argument("--out", required=True)
    add_progress_log(p)
    p.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="requests in flight (overrides llm.concurrency: the job's llm_slots)",
    )
    p.set_defaults(run=run_responses)


def run_responses(args: argparse.Namespace) -> int:
    from grumem.stages.responses import run

    settings = settings_from_args(args)
    if args.concurrency is not None:
        # Snakemake may scale the job's llm_slots down to the global cap; the
        # job then keeps exactly that many requests in flight
        settings["llm"]["concurrency"] = max(1, args.concurrency)
    stats = run(args.prompts, args.out, settings, args.progress_log, label=args.prompts)
    print(f"responses: {stats}", file=sys.stderr)
    return 0


def add_gates(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gates", help="stage `gates`: strict offline re-parse of the recording")
    add_settings_arguments(p)
    p.add_argument("--prompts", required=True)
    p.add_argument("--responses", required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(run=run_gates)


def run_gates(args: argparse.Namespace) -> int:
    from grumem.jsonl import write_jsonl
    from grumem.stages.gates import regate

    memory_budget = settings_from_args(args)["budget"]["memory"]
    n = write_jsonl(args.out, regate(args.prompts, args.responses, memory_budget), "gate")
    print(f"gates: {n} asks re-parsed into {args.out}", file=sys.stderr)
    return 0


def add_log(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("log", help="stage `log`: one line per turn, the export's input")
    add_settings_arguments(p)
    p.add_argument("--prompts", nargs="+", required=True, help="per shard, in shard order")
    p.add_argument("--responses", nargs="+", required=True, help="per shard, same order")
    p.add_argument("--gates", nargs="+", required=True, help="per shard, same order")
    p.add_argument("--out", required=True)
    p.set_defaults(run=run_log)


def run_log(args: argparse.Namespace) -> int:
    from grumem.jsonl import write_jsonl
    from grumem.stages.log import join

    s = settings_from_args(args)
    if not len(args.prompts) == len(args.responses) == len(args.gates):
        raise GrumemError(
            "grumem log: --prompts, --responses and --gates need one file per shard each"
        )
    shards = list(zip(args.prompts, args.responses, args.gates, strict=True))
    n = write_jsonl(args.out, join(shards, s["loop"]["level"], s["llm"]["model"]), "log")
    print(f"log: {n} turns written to {args.out}", file=sys.stderr)
    return 0


def add_kappa(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("kappa", help="stage `kappa` (M5.2): Cohen's kappa of labels vs calibration")
    p.add_argument("--labels", required=True, help="labels.jsonl")
    p.add_argument("--calibration", required=True, help="an independent labelling of a sample")
    p.add_argument("--queries", required=True, help="the project's queries YAML")
    p.add_argument(
        "--chunks",
        nargs="+",
        required=True,
        help="the project's chunk files or directories: calibration pairs must be among them",
    )
    p.add_argument(
        "--min-calibration",
        type=int,
        default=20,
        help="fewest overlapping pairs (export.min_calibration)",
    )
    p.add_argument("--out", required=True, help="kappa.json")
    p.set_defaults(run=run_kappa)


def run_kappa(args: argparse.Namespace) -> int:
    from grumem.kappa import run_kappa as compute

    r = compute(
        args.labels,
        args.calibration,
        args.min_calibration,
        args.out,
        queries_path=args.queries,
        chunk_paths=args.chunks,
    )
    print(
        f"kappa: {r['kappa']:.4f} over {r['n']} pairs (observed {r['observed_agreement']:.4f},"
        f" expected {r['expected_agreement']:.4f}) -> {args.out}",
        file=sys.stderr,  # the job's log: a rule captures stderr only
    )
    return 0


def add_export(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="stage `export` (M5.3): the verl corpus from log + labels")
    p.add_argument("--turn-log", required=True, help="log.jsonl, the turn log (read only)")
    p.add_argument("--labels", required=True, help="labels.jsonl")
    p.add_argument("--kappa", required=True, help="kappa.json from `grumem kappa` (required)")
    p.add_argument("--min-kappa", type=float, default=0.6, help="export.min_kappa")
    p.add_argument("--data-source", default="grumem", help="verl data_source (export.data_source)")
    p.add_argument(
        "--chunks",
        nargs="+",
        default=(),
        help="chunk files or directories: t_last_evidence over whole sessions",
    )
    p.add_argument(
        "--out-dir", required=True, help="writes trajectories.jsonl, turns.parquet, summary.json"
    )
    p.set_defaults(run=run_export)


def run_export(args: argparse.Namespace) -> int:
    from grumem.stages.export import ExportInputs, export, format_summary

    summary = export(
        ExportInputs(
            log=args.turn_log,
            labels=args.labels,
            kappa=args.kappa,
            out_dir=args.out_dir,
            min_kappa=args.min_kappa,
            data_source=args.data_source,
            chunks=tuple(args.chunks),
        )
    )
    print(format_summary(summary), file=sys.stderr)  # the job's log: a rule captures stderr
    return 0


TRANSCRIPT_FORMATS = ("auto", "claude-code", "mini-swe-agent", "swe-agent", "openai", "records")
TRANSCRIPT_FORMATS += ("openhands", "codex-cli")
TRANSCRIPT_FORMATS += ("aider", "gemini-cli")


def add_chunk(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chunk", help="stage `chunk`: transcripts -> token-budgeted chunk files")
    p.add_argument(
        "--format",
        default="auto",
        choices=TRANSCRIPT_FORMATS,
        help="transcript format (default: detect per file)",
    )
    p.add_argument(
        "--drop-thinking",
        action="store_true",
        help="leave out thinking / reasoning blocks (kept by default)",
    )
    p.add_argument(
        "--budget",
        type=int,
        default=5000,
        help="section budget: max cl100k tokens of a rendered chunk (>= 50)",
    )
    p.add_argument("--out", required=True, help="directory for <session>.jsonl chunk files")
    p.add_argument("files", nargs="+", metavar="FILE", help="transcript files")
    p.set_defaults(run=run_chunk)


def run_chunk(args: argparse.Namespace) -> int:
    from grumem.stages.chunk import run

    return run(args)


def add_serve_local(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve-local", help="run the embedded llama.cpp model server until Ctrl-C")
    p.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--n-ctx", type=int, default=8192, help="context size in tokens")
    p.add_argument("--startup-timeout", type=float, default=120.0, help="seconds to wait for it")
    p.set_defaults(run=run_serve_local)


def run_serve_local(args: argparse.Namespace) -> int:
    import signal

    from grumem.llm.local_server import LocalServer

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
        try:
            code = server.proc.wait()
        except KeyboardInterrupt:
            return 0
        raise GrumemError(f"the llama.cpp server exited with status {code}:\n{server.log_tail()}")


def add_judge(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("judge", help="stage `judge`: evidence labels from an LLM judge")
    add_settings_arguments(p)
    p.add_argument("--project", required=True, help="the project (its labels section)")
    p.add_argument("--queries", required=True, help="queries YAML")
    p.add_argument("--template", default=None, help="default templates/judge.txt")
    p.add_argument("--out", required=True, help="labels JSONL, sorted by (query_id, chunk_sha)")
    p.add_argument("--unparsed", required=True, help="side file: the pairs left without a label")
    p.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="requests in flight (overrides llm.concurrency: the job's llm_slots)",
    )
    add_progress_log(p)
    p.add_argument("chunks", nargs="+", help="chunk files, or directories of them")
    p.set_defaults(run=run_judge)


def run_judge(args: argparse.Namespace) -> int:
    from grumem.stages.judge import DEFAULT_TEMPLATE, format_summary, run, settings_from_args

    settings = settings_from_args(args)
    if args.concurrency is not None:
        settings["llm"]["concurrency"] = max(1, args.concurrency)
    stats = run(
        args.chunks,
        args.queries,
        args.out,
        args.unparsed,
        settings,
        log_path=args.progress_log,
        label=f"judge {args.project}",
        template_path=args.template or DEFAULT_TEMPLATE,
    )
    text = format_summary(stats, args.out, args.unparsed)
    print(text, file=sys.stderr)
    if args.progress_log:
        with open(args.progress_log, "a", encoding="utf-8") as log:
            print(text, file=log)
    return 0


def add_judge_merge(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("judge-merge", help="one labels file from the judge's shard outputs")
    p.add_argument("--labels", nargs="+", required=True, help="per shard labels files")
    p.add_argument("--unparsed", nargs="+", required=True, help="per shard side files")
    p.add_argument("--out", required=True, help="labels.jsonl")
    p.add_argument("--unparsed-out", required=True, help="the merged side file")
    p.set_defaults(run=run_judge_merge)


def run_judge_merge(args: argparse.Namespace) -> int:
    from grumem.stages.judge import format_summary
    from grumem.stages.labels import merge

    stats = merge(args.labels, args.unparsed, args.out, args.unparsed_out)
    print(format_summary(stats, args.out, args.unparsed_out), file=sys.stderr)
    return 0


def add_calibrate_sample(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate-sample", help="draw a stratified sample of (query, chunk) to label by hand"
    )
    p.add_argument("--queries", required=True, help="queries YAML")
    p.add_argument("--labels", required=True, help="the judge's labels.jsonl")
    p.add_argument("--n", type=int, required=True, help="pairs to draw (export.min_calibration+)")
    p.add_argument("--seed", type=int, required=True, help="the same seed draws the same sample")
    p.add_argument("--out", required=True, help="sample JSONL, `evidence: null` to fill")
    p.add_argument("chunks", nargs="+", help="chunk files, or directories of them")
    p.set_defaults(run=run_calibrate_sample)


def run_calibrate_sample(args: argparse.Namespace) -> int:
    from grumem.calibration import format_sample_stats, write_sample

    stats = write_sample(args.queries, args.labels, args.chunks, args.n, args.seed, args.out)
    print(format_sample_stats(stats, args.n, args.out), file=sys.stderr)
    return 0


def add_calibrate_finalize(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate-finalize", help="a filled calibration sample -> the calibration file"
    )
    p.add_argument("--sample", required=True, help="the sample, every `evidence` true or false")
    p.add_argument("--annotator", required=True, help="who labelled it (not the judge)")
    p.add_argument("--out", required=True, help="the calibration file (label schema)")
    p.set_defaults(run=run_calibrate_finalize)


def run_calibrate_finalize(args: argparse.Namespace) -> int:
    from grumem.calibration import finalize

    n = finalize(args.sample, args.annotator, args.out)
    print(f"calibrate-finalize: {n} labelled pairs -> {args.out}", file=sys.stderr)
    return 0


def add_report_plots(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report-plots", help="rule `report_plots`: the corpus plots as SVG files")
    p.add_argument("--turn-log", required=True, help="log.jsonl, the turn log (read only)")
    p.add_argument("--trajectories", required=True, help="corpus/trajectories.jsonl")
    p.add_argument(
        "--out-dir", required=True, help="writes the SVG files of grumem.stages.report.PLOTS"
    )
    p.set_defaults(run=run_report_plots)


def run_report_plots(args: argparse.Namespace) -> int:
    from grumem.stages.report import write_plots

    for path in write_plots(args.turn_log, args.trajectories, args.out_dir):
        print(f"report-plots: wrote {path}", file=sys.stderr)
    return 0


COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    add_prompt,
    add_prompts,
    add_sessions,
    add_responses,
    add_gates,
    add_log,
    add_parse,
    add_fake_server,
    add_kappa,
    add_export,
    add_chunk,
    add_serve_local,
    add_judge,
    add_judge_merge,
    add_calibrate_sample,
    add_calibrate_finalize,
    add_report_plots,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grumem", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    return parser


def progress_log_clash(args: argparse.Namespace) -> str | None:
    """The other argument naming the same file as the progress log, if any: the
    command would append its progress to a file it reads or writes."""
    import os

    log = getattr(args, "progress_log", None)
    if not log or not os.path.exists(log):
        return None
    for name, value in vars(args).items():
        values = value if isinstance(value, list | tuple) else [value]
        for v in values:
            if (
                name != "progress_log"
                and isinstance(v, str)
                and os.path.exists(v)
                and os.path.samefile(v, log)
            ):
                return f"--{name.replace('_', '-')}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    progress_log = getattr(args, "progress_log", None)
    clash = progress_log_clash(args)
    if clash:
        print(
            f"grumem {args.command}: error: --log {progress_log} is also {clash}: the progress"
            " log must be a file of its own (no command writes to a file it reads)",
            file=sys.stderr,
        )
        return 1
    try:
        return args.run(args)
    except GrumemError as e:
        message = f"grumem {args.command}: error: {e}"
        print(message, file=sys.stderr)
        # a job that shows progress on the terminal also keeps its error in its
        # progress log; only a file declared as one (add_progress_log), never an input
        if progress_log:
            with open(progress_log, "a", encoding="utf-8") as log:
                print(message, file=log)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception:
        # a bug, not bad input: the traceback goes to stderr as usual, and also to
        # the progress log of a job whose rule sends only progress there
        if progress_log:
            with open(progress_log, "a", encoding="utf-8") as log:
                print(f"grumem {args.command}: internal error:", file=log)
                traceback.print_exc(file=log)
        raise


if __name__ == "__main__":
    sys.exit(main())
