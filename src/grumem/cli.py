"""`grumem`: one subcommand per workflow rule, plus tools for looking at prompts and parses.

Argument definitions only. Each subcommand is `add_<name>(subparsers)`, naming
its handler as "module:function": rule `gates` -> `grumem gates` ->
grumem.stages.gates:main; commands that are no rule live in grumem.tools (or
beside the module they wrap). The handler is imported only when its command
runs, so `grumem --help` loads no stage. An option several commands share is
declared once, by the helper whose name says what it is (add_llm_job_options,
add_chunk_inputs, add_corpus_inputs); a command's own required options go
through add_required.

`--log` only ever names a progress log the command appends to (and where
its error goes too); an input that is a log, such as log.jsonl, has its own
flag (`--turn-log`). No command writes to a file it reads.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import Any

from grumem.config.settings import add_settings_arguments
from grumem.core.split import SPLITS
from grumem.errors import GrumemError
from grumem.io.progress import stderr_also_to

CHUNK_INPUTS = "chunk files, directories of them, or chunk manifests (.json)"


def add_llm_job_options(p: argparse.ArgumentParser) -> None:
    """What a command sending LLM requests takes besides its files: its settings and
    connection, the requests it keeps in flight, and `--log`, the progress log it
    appends to and the only file its error handler may write (see main)."""
    add_settings_arguments(p)
    p.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="requests in flight, the job's llm_slots (with one URL in llm.base_url it "
        "overrides llm.concurrency; with a list, it caps their total)",
    )
    p.add_argument(
        "--log",
        dest="progress_log",
        default=None,
        help="also append everything written to stderr (progress, statistics, errors) to this file",
    )


def add_required(p: argparse.ArgumentParser, **options: str) -> None:
    """Required options, each named by its keyword (`out_dir` is `--out-dir`), with its help."""
    for name, help in options.items():
        p.add_argument(f"--{name.replace('_', '-')}", required=True, help=help)


def add_chunk_inputs(p: argparse.ArgumentParser, *flag: str, **kw: Any) -> None:
    """The chunks a command reads, one or more: positional, or the option `flag`."""
    p.add_argument(*(flag or ["chunks"]), nargs="+", **{"help": CHUNK_INPUTS, **kw})


def add_corpus_inputs(p: argparse.ArgumentParser) -> None:
    """What the report's commands read: the turn log and the corpus trajectories."""
    add_required(
        p, turn_log="log.jsonl, the turn log (read only)", trajectories="corpus/trajectories.jsonl"
    )


def add_prompt(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prompt", help="print the exact user message of one turn")
    p.add_argument("--question", help="the standing question")
    p.add_argument("--chunk-file", help="a chunk file (JSON Lines)")
    p.add_argument("--index", type=int, help="chunk index in the file's session (t = index + 1)")
    p.add_argument("--session", help="session, when the chunk file holds several")
    p.add_argument("--memory", default=None, help="M_{t-1}; omitted means 'No previous memory'")
    p.add_argument("--template", default=None, help="template file (default templates/gru-mem.txt)")
    p.set_defaults(handler="grumem.tools.prompt:main")


def add_parse(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("parse", help="strictly parse one gate response (exit 2 when malformed)")
    p.add_argument("file", nargs="?", help="the response text (default: stdin)")
    p.set_defaults(handler="grumem.tools.parse:main")


def add_prompts(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prompts", help="stage `prompts`: every (trajectory, t) of a shard")
    add_settings_arguments(p)
    add_required(p, project="the project", queries="queries YAML")
    p.add_argument("--template", default=None, help="default templates/gru-mem.txt")
    p.add_argument("--sessions", default=None, help="the project's session index (grumem sessions)")
    p.add_argument(
        "--split",
        choices=SPLITS,
        default=None,
        help="only the sessions of this split (by the settings' `split`): an evaluation's",
    )
    add_required(p, out="the shard's prompts (JSON Lines)")
    add_chunk_inputs(p)
    p.set_defaults(handler="grumem.stages.prompts:main")


def add_sessions(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sessions", help="stage `sessions`: a project's session index")
    add_required(p, out="the index (JSON Lines: session, file, line)")
    add_chunk_inputs(p, help=f"every one of the project: {CHUNK_INPUTS}")
    p.set_defaults(handler="grumem.stages.sessions:main")


def add_responses(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("responses", help="stage `responses`: the gated loop over a shard")
    add_llm_job_options(p)
    add_required(
        p, prompts="the shard's prompts (grumem prompts)", out="the shard's responses (JSON Lines)"
    )
    p.add_argument(
        "--policy",
        default=None,
        help="the evaluated policy whose llm block --settings holds: errors name it",
    )
    p.set_defaults(handler="grumem.stages.responses:main")


def add_gates(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gates", help="stage `gates`: strict offline re-parse of the recording")
    add_settings_arguments(p)
    add_required(
        p,
        prompts="the shard's prompts",
        responses="the shard's responses, as recorded",
        out="the shard's gates (JSON Lines)",
    )
    p.set_defaults(handler="grumem.stages.gates:main")


def add_log(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("log", help="stage `log`: one line per turn, the export's input")
    add_settings_arguments(p)
    p.add_argument("--prompts", nargs="+", required=True, help="per shard, in shard order")
    p.add_argument("--responses", nargs="+", required=True, help="per shard, same order")
    p.add_argument("--gates", nargs="+", required=True, help="per shard, same order")
    add_required(p, out="log.jsonl, the turn log")
    p.set_defaults(handler="grumem.stages.log:main")


def add_kappa(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("kappa", help="stage `kappa`: Cohen's kappa of labels vs calibration")
    add_required(
        p,
        labels="labels.jsonl",
        calibration="an independent labelling of a sample",
        queries="the project's queries YAML",
    )
    among = "calibration pairs among them"
    add_chunk_inputs(p, "--chunks", required=True, help=f"the project's {CHUNK_INPUTS}: {among}")
    add_settings_arguments(p, required=False, connection=False)
    add_required(p, out="kappa.json")
    p.set_defaults(handler="grumem.stages.kappa:main")


def add_export(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="stage `export`: the verl corpus from log + labels")
    add_required(
        p,
        turn_log="log.jsonl, the turn log (read only)",
        labels="labels.jsonl",
        kappa="kappa.json from `grumem kappa` (required)",
    )
    add_settings_arguments(p, required=False, connection=False)
    sessions = "t_last_evidence over whole sessions"
    add_chunk_inputs(p, "--chunks", default=(), help=f"{CHUNK_INPUTS}: {sessions}")
    add_required(
        p,
        out_dir="writes trajectories.jsonl, turns.parquet, summary.json, README.md (the card),"
        " sessions.parquet with --queries",
    )
    p.add_argument(
        "--template",
        default=None,
        help="the prompts' template: its sha256 goes in the card and in sessions.parquet",
    )
    p.add_argument(
        "--queries",
        default=None,
        help="the project's queries: also write sessions.parquet (needs --chunks, --project)",
    )
    p.add_argument("--project", default=None, help="the project, named in sessions.parquet")
    p.set_defaults(handler="grumem.stages.export:main")


def add_verl_config(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "verl-config",
        help="print the Hydra overrides that train verl on a corpus with grumem's rewards",
    )
    add_required(
        p,
        corpus="an export's directory (its train split, turns-train.parquet; sessions-train"
        ".parquet with --online), or a parquet file to train on",
    )
    p.add_argument(
        "--val-corpus",
        help="an export's directory (its val split) or a file to validate on (default: the"
        " corpus's val split)",
    )
    p.add_argument(
        "--online",
        action="store_true",
        help="train the loop itself (the paper's algorithm) from sessions.parquet, not turns",
    )
    p.add_argument(
        "--rollout-n",
        type=int,
        help="--online: rollouts of a row, the advantages' group (default 4, at least 2)",
    )
    p.add_argument(
        "--level",
        choices=("L1", "L2"),
        help="--online: the rollouts' level (L2 stops at the policy's exit gate; default:"
        " each row's, the export's loop.level)",
    )
    p.add_argument(
        "--batch",
        type=int,
        help="--online: sessions rows a training step, data.train_batch_size (default 32, or"
        " every training row when fewer); each gives rollout-n rollouts of one training row"
        " per turn",
    )
    p.add_argument(
        "--mini-batch",
        type=int,
        help="--online: sessions rows an optimiser step (default: the batch, one step a"
        " batch); a divisor of the batch. verl counts actor.ppo_mini_batch_size in training"
        " rows (x rollout.n), and a grumem row is a turn: it is printed as this times the"
        " turns a row reads (its chunks, rounded up)",
    )
    p.add_argument(
        "--save-freq",
        type=int,
        help="--online: a checkpoint every N steps, and at the last (default: once an epoch)",
    )
    p.add_argument(
        "--test-freq",
        type=int,
        help="--online: validate every N steps, and at the last (default: once an epoch)",
    )
    p.add_argument(
        "--max-prompt-length",
        type=int,
        help="data.max_prompt_length (default: the corpus budget, 32768 - 2048)",
    )
    p.add_argument(
        "--max-response-length",
        type=int,
        help="data.max_response_length (default: the corpus budget's response, 2048)",
    )
    for name in ("w_update", "w_exit", "w_format", "format_failure"):
        p.add_argument(
            f"--{name.replace('_', '-')}",
            type=float,
            help=f"compute_score's {name} (default: grumem.verl.reward's)",
        )
    p.set_defaults(handler="grumem.tools.verl_config:main")


def add_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="stage `train`: verl's own trainer with grumem's online loop on a project's split",
    )
    add_settings_arguments(p, connection=False)
    add_required(
        p,
        project="the project (its train section, its name in verl's logs)",
        train="the training split (sessions-train.parquet)",
        val="the validation split (sessions-val.parquet), never the training file",
        out_dir="the run's directory: config.yaml, command.txt, metrics.jsonl, checkpoints/",
    )
    p.add_argument(
        "--python",
        default=None,
        help="the interpreter with verl 0.9.1 and grumem (default: train.python, else"
        " .venv-verl/bin/python)",
    )
    p.add_argument(
        "--print",
        dest="print_only",
        action="store_true",
        help="print the trainer's command line (the variables grumem sets first), run nothing",
    )
    p.set_defaults(handler="grumem.stages.train:main")


TRANSCRIPT_FORMATS: tuple[str, ...] = ("auto", "claude-code", "mini-swe-agent", "swe-agent")
TRANSCRIPT_FORMATS += ("openai", "records")
TRANSCRIPT_FORMATS += ("openhands", "codex-cli")
TRANSCRIPT_FORMATS += ("aider", "gemini-cli")
TRANSCRIPT_FORMATS += ("anthropic", "trajectory-dataset")
TRANSCRIPT_FORMATS += ("continue", "cline", "amp", "copilot-cli", "copilot-chat")
TRANSCRIPT_FORMATS += ("cursor", "opencode", "kilo", "goose", "zed")


def add_chunk(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chunk", help="stage `chunk`: transcripts -> token-budgeted chunk files")
    # no argparse choices: a plugin's format (entry point group grumem.transcript_formats)
    # is a valid name too; an unknown one is refused when the first file is read
    p.add_argument(
        "--format",
        default="auto",
        help=f"transcript format: {', '.join(TRANSCRIPT_FORMATS)} or a plugin's"
        " (default: auto, detect per file)",
    )
    for flag, what in (
        ("--messages-field", "the column of messages (default: messages, else trajectory)"),
        ("--id-field", "the column naming a session (default: <file stem>-<row>)"),
        (
            "--text-field",
            "the message key of its text: content or text (default: content, else text)",
        ),
    ):
        p.add_argument(flag, default=None, help=f"trajectory-dataset: {what}")
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
    p.add_argument(
        "--redact",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="replace secrets (API keys, tokens, private keys, passwords) in the records by"
        " [REDACTED:<kind>:<hash>] before chunking (default: on)",
    )
    p.add_argument(
        "--detector",
        default=None,
        metavar="LABEL",
        help="the secret detector expected (the chunk rule passes the one the workflow was"
        " planned with): another installed detector is an error, not other chunks",
    )
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument("--out", help="directory for <session>.jsonl chunk files")
    out.add_argument(
        "--units-under",
        metavar="ROOT",
        help="a directory per file for its chunk files: ROOT/<unit name> (the workflow layout)",
    )
    p.add_argument(
        "--manifest", help="JSON listing each file's directory and the chunk files written"
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="transcript files")
    p.set_defaults(handler="grumem.stages.chunk:main")


def add_discover(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "discover", help="find the agent logs on this machine; --write a config for them"
    )
    p.add_argument(
        "--home",
        default=None,
        metavar="DIR",
        help="look under DIR as the home directory, without the environment's overrides"
        " (XDG_*, a tool's own variable); default: your home, with them",
    )
    p.add_argument(
        "--write",
        default=None,
        metavar="FILE",
        help="write a config with one project per place found (and beside it a starter"
        " queries.yaml and empty calibration files, when absent)",
    )
    p.add_argument("--force", action="store_true", help="replace an existing --write FILE")
    p.set_defaults(handler="grumem.tools.discover:main")


def add_redact(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("redact", help="copy chunk files into --out with their secrets redacted")
    p.add_argument("--out", required=True, help="the directory of the redacted copies")
    p.add_argument("files", nargs="+", metavar="FILE", help="chunk files (JSON Lines)")
    p.set_defaults(handler="grumem.tools.redact:main")


def add_serve_local(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve-local", help="run the embedded llama.cpp model server until Ctrl-C")
    p.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--n-ctx", type=int, default=8192, help="context size in tokens")
    p.add_argument("--startup-timeout", type=float, default=120.0, help="seconds to wait for it")
    p.set_defaults(handler="grumem.tools.serve_local:main")


def add_judge(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("judge", help="stage `judge`: evidence labels from an LLM judge")
    add_llm_job_options(p)
    add_required(p, project="the project (its labels section)", queries="queries YAML")
    p.add_argument("--template", default=None, help="default templates/judge.txt")
    add_required(
        p,
        out="labels JSONL, sorted by (query_id, chunk_sha)",
        unparsed="side file: the pairs left without a label",
    )
    add_chunk_inputs(p)
    p.set_defaults(handler="grumem.stages.judge:main")


def add_labels(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("labels", help="stage `labels`: one labels file from the judge's shards")
    p.add_argument("--labels", nargs="+", required=True, help="per shard labels files")
    p.add_argument("--unparsed", nargs="+", required=True, help="per shard side files")
    add_required(p, out="labels.jsonl", unparsed_out="the merged side file")
    p.set_defaults(handler="grumem.stages.labels:main")


def add_calibrate_sample(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate-sample", help="draw a stratified sample of (query, chunk) to label by hand"
    )
    add_required(p, queries="queries YAML", labels="the judge's labels.jsonl")
    p.add_argument("--n", type=int, required=True, help="pairs to draw (export.min_calibration+)")
    p.add_argument("--seed", type=int, required=True, help="the same seed draws the same sample")
    add_required(p, out="sample JSONL, `evidence: null` to fill")
    add_chunk_inputs(p)
    p.set_defaults(handler="grumem.tools.calibrate:main_sample")


def add_calibrate_finalize(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate-finalize", help="a filled calibration sample -> the calibration file"
    )
    add_required(
        p,
        sample="the sample, every `evidence` true or false",
        annotator="who labelled it (not the judge)",
        out="the calibration file (label schema)",
    )
    p.set_defaults(handler="grumem.tools.calibrate:main_finalize")


def add_calibrate_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate-serve", help="label a calibration sample in a browser, one key a pair"
    )
    add_required(
        p,
        sample="the sample; each answer is saved in it",
        annotator="who labels it (not the judge)",
    )
    p.add_argument(
        "--out",
        default=None,
        help="the calibration file the finalize command will name (default: calibration.jsonl"
        " beside the sample)",
    )
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    p.set_defaults(handler="grumem.tools.calibrate_serve:main")


def add_report_plots(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report-plots", help="rule `report_plots`: the corpus plots as SVG files")
    add_corpus_inputs(p)
    plots = "r_update_by_t.svg, t_last_evidence.svg, parse_rate_by_t.svg and latency.svg"
    add_required(p, out_dir=f"writes {plots}")
    p.set_defaults(handler="grumem.stages.report_plots:main")


def add_report_viewer(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report-viewer", help="rule `report_viewer`: the trajectory viewer, one HTML page"
    )
    add_corpus_inputs(p)
    p.add_argument("--template", default=None, help="the prompts' template (default gru-mem.txt)")
    add_required(p, project="the project's name, for the page's title")
    p.add_argument(
        "--max-trajectories",
        type=int,
        default=500,
        help="show at most this many, a sample stratified by r_exit, r_format and aborted"
        " (default 500)",
    )
    p.add_argument(
        "--max-bytes",
        type=int,
        default=1_500_000,
        help="the page's size at most, in bytes (0: no limit; the default, 1500000, is what"
        " Chromium shows of a Snakemake report's page)",
    )
    add_required(p, out="the page (HTML)")
    p.set_defaults(handler="grumem.stages.report_viewer:main")


def add_evaluate_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evaluate-compare", help="compare policies from turn logs that exist (sends nothing)"
    )
    p.add_argument(
        "--run",
        action="append",
        required=True,
        metavar="NAME=LOG_JSONL",
        help="a policy's name and its log.jsonl (read only); repeat to compare policies",
    )
    p.add_argument("--labels", required=True, help="labels.jsonl: every chunk of every session")
    p.add_argument(
        "--chunks",
        nargs="+",
        required=True,
        help="the sessions' chunk files, directories or manifests: chunks read against these",
    )
    p.add_argument("--out-json", required=True, help="compare.json")
    p.add_argument("--out-md", required=True, help="compare.md, the side-by-side tables")
    p.add_argument("--plots-dir", default=None, help="writes the comparison's SVG plots there")
    p.set_defaults(handler="grumem.stages.evaluate_compare:main")


COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    add_prompt,
    add_prompts,
    add_sessions,
    add_responses,
    add_gates,
    add_log,
    add_parse,
    add_kappa,
    add_export,
    add_verl_config,
    add_train,
    add_chunk,
    add_discover,
    add_redact,
    add_serve_local,
    add_judge,
    add_labels,
    add_calibrate_sample,
    add_calibrate_finalize,
    add_calibrate_serve,
    add_report_plots,
    add_report_viewer,
    add_evaluate_compare,
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


def _handler(spec: str) -> Callable[[argparse.Namespace], int]:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


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
    with ExitStack() as stack:
        log = None
        if progress_log:
            log = stack.enter_context(open(progress_log, "a", encoding="utf-8"))
            stack.enter_context(stderr_also_to(log))
        try:
            return _handler(args.handler)(args)
        except GrumemError as e:
            # on stderr, so in the progress log too: only a file declared as one
            # (add_llm_job_options), never an input
            print(f"grumem {args.command}: error: {e}", file=sys.stderr)
            return e.exit_code
        except KeyboardInterrupt:
            return 130
        except Exception:
            # a bug, not bad input: the traceback goes to stderr as usual when it is
            # raised on, and also to the progress log of a job whose rule sends only
            # that log to {log}
            if log is not None:
                print(f"grumem {args.command}: internal error:", file=log)
                traceback.print_exc(file=log)
            raise


if __name__ == "__main__":
    sys.exit(main())
