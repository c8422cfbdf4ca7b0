"""grumem: GRU-Mem rollouts over agent transcripts, recorded byte for byte, exported for verl.

Target: `export` (the default): every project's corpus under results/{project}/corpus/
"""

from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config.yaml"


# common.smk puts this interpreter's bin directory first on PATH
envvars:
    "PATH",


validate(config, "workflow/schemas/config.schema.yaml")


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/chunk.smk"
include: "workflow/rules/prompts.smk"
include: "workflow/rules/responses.smk"
include: "workflow/rules/gates.smk"
include: "workflow/rules/log.smk"
include: "workflow/rules/judge.smk"
include: "workflow/rules/kappa.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/export.smk"


rule all:
    default_target: True
    input:
        all_corpus_files(),
