"""grumem: GRU-Mem rollouts over agent transcripts, recorded byte for byte, exported for verl.

Targets: `export` (the card's `snakemake export`): every project's corpus under
results/{project}/corpus/; `all` (the default): the corpus, and the plots and the
trajectory viewer under results/{project}/report/
"""

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

min_version("9.0")


# config.yaml is the bundled demo. A config of your own (--configfile) replaces
# it instead of being merged with it: the demo's project never runs on your
# server, and what your file leaves out takes the schema's defaults.
# workflow.overwrite_configfiles (the command line's config files) is no
# documented API, but Snakemake's own --replace-workflow-config (9.27) also drops
# config.yaml under a bare --config and is not passed on to cluster jobs.
if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


if not config.get("projects"):
    raise WorkflowError(
        "no projects in the config: name yours in a config file "
        "(snakemake --configfile my.yaml, see the README's Configuration); "
        "`make run` runs the bundled demo"
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


rule export:
    input:
        all_corpus_files(),
    localrule: True


# the report's files are the outputs the report rules declare, for every project
rule all:
    default_target: True
    input:
        rules.export.input,
        expand(rules.report_plots.output, project=PROJECTS),
        expand(rules.report_viewer.output, project=PROJECTS),
    localrule: True
