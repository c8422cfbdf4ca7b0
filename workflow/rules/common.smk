import functools
import glob
import json
import os
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from grumem.config.settings import (
    check_config_files,
    project_split,
    split_connection,
    validate_config,
)
from grumem.core.split import SPLITS, split_file
from grumem.errors import GrumemError
from grumem.io.paths import TEMPLATES_DIR
from grumem.io.jsonl import RecordError
from grumem.llm.endpoints import total_concurrency
from grumem.core.shards import glob_root, project_shards
from grumem.transcripts.redact import detector_label

# The config is validated once, here, by grumem's validator (the schema is
# workflow/schemas/config.schema.yaml): it fills defaults also in each project's
# entry, so jobs and DAG agree, and it never echoes a value that may be a key
# pasted in the wrong place, as snakemake.utils.validate's message would.
# Snakemake's loader keeps the last of two duplicate keys; grumem's refuses them.
try:
    check_config_files(workflow.configfiles)
    validate_config(config, "config")
except RecordError as e:
    raise WorkflowError(f"invalid config: {e}")


# Rules call the `grumem` of the Python running Snakemake (the project's venv),
# also when that venv is not activated, and on SLURM nodes that re-run Snakemake.
os.environ["PATH"] = os.pathsep.join(
    [str(Path(sys.executable).parent), os.environ["PATH"]]
)

# The templates the library reads (grumem.io.paths), not a path under
# workflow.basedir: that is the directory of the main Snakefile, another
# workflow's when this one is used as a module.
TEMPLATE = str(TEMPLATES_DIR / "gru-mem.txt")
JUDGE_TEMPLATE = str(TEMPLATES_DIR / "judge.txt")
PROJECTS = sorted(config["projects"])
# the chunk stage's secret detector, `kingfisher-secret-scanner==1.5.0+patterns.1`
REDACTION_DETECTOR = detector_label()


wildcard_constraints:
    # names cannot hold a path separator or start with a dot: they stay in results/
    project="[A-Za-z0-9][A-Za-z0-9_.-]*",
    # s000, s001, ... (shard_rule `sorted`) or s + 12 hex digits (`stable`, grumem.core.shards)
    shard="s[0-9a-f]+",
    # an evaluated policy's name (evaluate.policies), a directory under results/{project}/eval/
    policy="[A-Za-z0-9][A-Za-z0-9_.-]*",


def project_config(project):
    return config["projects"][project]


# Snakemake calls input functions once per job: a project's files are globbed,
# sorted and cut into shards once per run (grumem.core.shards), and every input
# function below is a lookup, not a scan of the project.
@functools.cache
def project_layout(project):
    """The project's chunks, units and shards (grumem.core.shards.ProjectShards)."""
    p = project_config(project)
    pattern = p["chunks"] if "chunks" in p else p["transcripts"]["glob"]
    files = glob.glob(pattern)
    if not files:
        raise WorkflowError(f"project {project}: no files match {pattern!r}")
    try:
        return project_shards(
            project,
            files,
            chunked="chunks" in p,
            shard_size=config["shard_size"],
            shard_rule=config["shard_rule"],
            root=glob_root(pattern),
        )
    except GrumemError as e:
        raise WorkflowError(str(e))


def shards(project):
    return list(project_layout(project).shards)


def chunked(project, shards):
    """The inputs of a rule reading the chunks of `shards`, what it waits on and
    what its command reads. For a `chunks` project, the chunk files; for a
    `transcripts` project, the `chunk` rule's manifests (the unit directories are
    no rule's declared output, see workflow/rules/chunk.smk), which the stages
    read for the chunk files: a command line of 100,000 paths would pass the
    kernel's ARG_MAX, and Snakemake formats a job's params a few times a job."""
    layout = project_layout(project)
    if not layout.units:
        return [c for s in shards for c in layout.shard(s)]
    return [f"results/{project}/chunked/{s}.json" for s in shards]


def shard_chunk_inputs(wildcards):
    try:
        return chunked(wildcards.project, [wildcards.shard])
    except GrumemError as e:
        raise WorkflowError(str(e))


def project_chunk_inputs(wildcards):
    return chunked(wildcards.project, shards(wildcards.project))


def shard_transcripts(wildcards):
    """The transcript files of one shard, in the order of their unit directories."""
    layout = project_layout(wildcards.project)
    try:
        units = layout.shard(wildcards.shard)
        return [layout.transcript(Path(u).name) for u in units]
    except GrumemError as e:
        raise WorkflowError(str(e))


def transcript_options(project):
    """`grumem chunk` flags of the format options a project sets (trajectory datasets)."""
    t = project_config(project)["transcripts"]
    options = ("messages_field", "id_field", "text_field")
    return " ".join(
        f"--{o.replace('_', '-')} {shlex.quote(t[o])}"
        for o in options
        if t.get(o) is not None
    )


def redaction(project):
    """`grumem chunk --redact` with the detector's name and version (a param: another
    detector re-runs the chunk jobs), or `--no-redact` (transcripts.redact: false)."""
    if not project_config(project)["transcripts"]["redact"]:
        return "--no-redact"
    return f"--redact --detector {REDACTION_DETECTOR}"


def queries_file(wildcards):
    return project_config(wildcards.project)["queries"]


def without_connection(sections):
    if "llm" in sections:
        sections["llm"] = split_connection(sections["llm"])[0]
    return sections


def settings(*sections, only=None, project=None):
    """Config sections as JSON for a subcommand's --settings, a param: a change
    reruns the job. The llm connection settings are left out (LLM_CONNECTION);
    `only` keeps the keys a job reads of a section ({"export": ["min_calibration"]}),
    so that a change of another key reruns no job that ignores it. With `project`,
    `split` is that project's (its own, else the top level's)."""
    chosen = {s: config[s] for s in sections}
    for section, keys in (only or {}).items():
        chosen[section] = {k: chosen[section][k] for k in keys}
    if project is not None and "split" in chosen:
        chosen["split"] = project_split(config, project)
    return json.dumps(without_connection(chosen), sort_keys=True)


def export_settings(wildcards):
    """The export's sections: the level, budget and system message the prompts were
    made with (sessions rows), and the project's split."""
    return settings(
        "export",
        "loop",
        "budget",
        "llm",
        "split",
        only={"loop": ["level"], "llm": ["system"]},
        project=wildcards.project,
    )


# The llm connection settings (grumem.config.settings.CONNECTION_KEYS: base_url, timeout,
# concurrency, retries, ...) as JSON for --connection. Rules pass it as a
# resource: Snakemake reruns a job when its params, code, input or software
# change (--rerun-triggers), never when a resource does.
LLM_CONNECTION = json.dumps(split_connection(config["llm"])[1], sort_keys=True)

# A job's llm_slots: the requests it keeps in flight, the sum of its endpoints'
# caps (llm.base_url may list several); the profile caps the sum over all jobs.
try:
    LLM_SLOTS = total_concurrency(config["llm"])
except GrumemError as e:
    raise WorkflowError(f"invalid config: {e}")


def judge_llm_slots(wildcards):
    """The judge's llm_slots: its own endpoints' caps when labels.judge.base_url is set."""
    judge = project_config(wildcards.project)["labels"]["judge"]
    if judge["base_url"] is None:
        return LLM_SLOTS
    return total_concurrency({**config["llm"], "base_url": judge["base_url"]})


def shard_files(stage, suffix=".jsonl"):
    def files(wildcards):
        return expand(
            f"results/{{project}}/{stage}/{{shard}}{suffix}",
            project=wildcards.project,
            shard=shards(wildcards.project),
        )

    return files


def judge_settings(wildcards):
    """The judge's sections: llm and budget, and the project's labels (judge overrides)."""
    sections = without_connection({s: config[s] for s in ("llm", "budget")})
    sections["labels"] = project_config(wildcards.project)["labels"]
    return json.dumps(sections, sort_keys=True)


def labels_file(wildcards):
    labels = project_config(wildcards.project)["labels"]
    if labels.get("source", "file") == "judge":
        return f"results/{wildcards.project}/labels.jsonl"
    if "path" not in labels:
        raise WorkflowError(
            f"project {wildcards.project}: labels.path is not set (labels: {{source: file, path: ...}})"
        )
    return labels["path"]


def calibration_file(wildcards):
    p = project_config(wildcards.project)
    if "calibration" not in p:
        raise WorkflowError(
            f"project {wildcards.project}: no calibration file (projects.{wildcards.project}.calibration): "
            "the export needs κ between the labels and a calibration labelling"
        )
    return p["calibration"]


# turns and sessions rows also by split (turns-train.parquet, ...): verl reads whole files
CORPUS_FILES = [
    "trajectories.jsonl",
    "turns.parquet",
    *(split_file("turns.parquet", s) for s in SPLITS),
    "sessions.parquet",
    *(split_file("sessions.parquet", s) for s in SPLITS),
    "summary.json",
    "README.md",
]


def all_corpus_files():
    return expand(
        "results/{project}/corpus/{file}", project=PROJECTS, file=CORPUS_FILES
    )


# ---------------------------------------------------------------- evaluate

EVALUATE = config["evaluate"]
POLICIES = sorted(EVALUATE["policies"])
# the plots of `grumem evaluate-compare` (grumem.report.evaluation_plots.PLOTS)
EVALUATE_PLOTS = ["exit_timing", "chunks_read", "memory_tokens_by_t"]


def policy_llm(policy):
    return EVALUATE["policies"][policy]


def evaluate_settings(*sections):
    """An evaluation job's --settings (a param: a change reruns it): the policy's llm
    block (its connection apart), the loop at evaluate's level and samples (the
    workflow's parse_retries), the budget, and the project's split."""

    def settings_of(wildcards):
        chosen = {
            "llm": split_connection(policy_llm(wildcards.policy))[0],
            "loop": {
                **config["loop"],
                "level": EVALUATE["level"],
                "samples": EVALUATE["samples"],
            },
            "budget": config["budget"],
            "split": project_split(config, wildcards.project),
        }
        return json.dumps({s: chosen[s] for s in sections}, sort_keys=True)

    return settings_of


def policy_connection(wildcards):
    """The policy's connection settings for --connection, a resource (see LLM_CONNECTION)."""
    return json.dumps(split_connection(policy_llm(wildcards.policy))[1], sort_keys=True)


def policy_llm_slots(wildcards):
    """The policy's llm_slots: the sum of its endpoints' caps."""
    try:
        return total_concurrency(policy_llm(wildcards.policy))
    except GrumemError as e:
        raise WorkflowError(
            f"invalid config: evaluate.policies.{wildcards.policy}: {e}"
        )


def evaluate_files(stage):
    """The files of one stage of a policy's evaluation, one per shard of the project."""

    def files(wildcards):
        return expand(
            f"results/{{project}}/eval/{{policy}}/{stage}/{{shard}}.jsonl",
            project=wildcards.project,
            policy=wildcards.policy,
            shard=shards(wildcards.project),
        )

    return files


def evaluate_logs(wildcards):
    return expand(
        "results/{project}/eval/{policy}/log.jsonl",
        project=wildcards.project,
        policy=POLICIES,
    )


def evaluate_runs(wildcards):
    """`grumem evaluate-compare`'s --run NAME=LOG of every policy."""
    return " ".join(
        f"--run {policy}=results/{wildcards.project}/eval/{policy}/log.jsonl"
        for policy in POLICIES
    )


def evaluate_targets(wildcards):
    """Every project's comparison; no policy named is an error, only for `evaluate`."""
    if not POLICIES:
        raise WorkflowError(
            "nothing to evaluate: name the policies in evaluate.policies, each an llm"
            " block (see docs/verl.md, 'Did training help?')"
        )
    return expand(
        "results/{project}/eval/{file}",
        project=PROJECTS,
        file=["compare.json", "compare.md", *(f"{p}.svg" for p in EVALUATE_PLOTS)],
    )


# ---------------------------------------------------------------- train

# Projects with a `train:` section, the ones the target `train` trains.
TRAIN_PROJECTS = [p for p in PROJECTS if "train" in project_config(p)]


def train_settings(wildcards):
    """The project's train section as JSON for --settings, without `python` (a
    resource: the interpreter's path is not a setting of the run)."""
    section = project_config(wildcards.project)["train"]
    return json.dumps(
        {"train": {k: v for k, v in section.items() if k != "python"}}, sort_keys=True
    )


def train_python(wildcards):
    """train.python, else the verl venv of this workflow's directory (make venv-verl)."""
    python = project_config(wildcards.project)["train"]["python"]
    return python or str(Path(workflow.basedir) / ".venv-verl" / "bin" / "python")


def train_gpus(wildcards):
    """GPUs a node for verl's GPU backends (the SLURM profile asks for them); none for
    the embedded one."""
    train = project_config(wildcards.project)["train"]
    return 0 if train["backend"] == "embedded" else train["gpus"]
