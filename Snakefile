"""grumem: GRU-Mem rollouts over agent transcripts, recorded byte for byte, exported for verl.

Targets: `export` (the card's `snakemake export`): every project's corpus under
results/{project}/corpus/; `all` (the default): the corpus, and the plots and the
trajectory viewer under results/{project}/report/; `evaluate`: every policy of
evaluate.policies measured on every project's held-out sessions and compared,
results/{project}/eval/compare.json and compare.md; `train`: verl's trainer on the
training split of every project with a `train:` section, under results/{project}/train/
"""

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

min_version("9.0")


# config.yaml is the bundled demo, read only when the command line gives no config:
# a config of your own (--configfile, or --config) replaces it instead of being
# merged with it, so the demo's project never runs on your server, and what you
# leave out takes the schema's defaults. `config` holds what the command line gave
# before any `configfile:` is read, and cluster jobs are given the main job's
# --configfile and --config, so each job makes the same choice.
if not config:

    configfile: "config.yaml"


if not config.get("projects"):
    raise WorkflowError(
        "no projects in the config: name yours in a config file "
        "(snakemake --configfile my.yaml, see the README's Configuration); "
        "`make run` runs the bundled demo, config.yaml, which is read only when the command "
        "line gives no config (to change one of its values: --configfile config.yaml --config ...)"
    )


# common.smk puts this interpreter's bin directory first on PATH
envvars:
    "PATH",


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/chunk.smk"
include: "workflow/rules/sessions.smk"
include: "workflow/rules/prompts.smk"
include: "workflow/rules/responses.smk"
include: "workflow/rules/gates.smk"
include: "workflow/rules/log.smk"
include: "workflow/rules/judge.smk"
include: "workflow/rules/labels.smk"
include: "workflow/rules/kappa.smk"
include: "workflow/rules/export.smk"
include: "workflow/rules/report_plots.smk"
include: "workflow/rules/report_viewer.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/train.smk"


rule export:
    input:
        all_corpus_files(),
    localrule: True


# every policy of evaluate.policies over every project's evaluated split, compared
rule evaluate:
    input:
        evaluate_targets,
    localrule: True


# every project that has a `train:` section: verl's trainer on its training split
rule train:
    input:
        expand(rules.train_project.output, project=TRAIN_PROJECTS),
    localrule: True


# the report's files are the outputs the report rules declare, for every project
rule all:
    default_target: True
    input:
        rules.export.input,
        expand(rules.report_plots.output, project=PROJECTS),
        expand(rules.report_viewer.output, project=PROJECTS),
    localrule: True
