# One project's training run: verl's own trainer with grumem's online loop on the
# export's training split, validated on its validation split (`train:` settings).
# The target `train` (Snakefile) runs every project that has a `train:` section.
# checkpoints/ beside the outputs is no declared output: Snakemake would remove
# it before a rerun, and a rerun (more steps) resumes from it.
rule train_project:
    input:
        train="results/{project}/corpus/sessions-train.parquet",
        val="results/{project}/corpus/sessions-val.parquet",
    output:
        metrics="results/{project}/train/metrics.jsonl",
        command="results/{project}/train/command.txt",
        config="results/{project}/train/config.yaml",
    log:
        "logs/train/{project}.log",
    benchmark:
        "benchmarks/train/{project}.tsv"
    conda:
        "../../environment.yml"
    resources:
        # the interpreter that has verl: a resource, so that another path reruns nothing
        train_python=train_python,
        gpu=train_gpus,
    params:
        settings=train_settings,
        out_dir="results/{project}/train",
    shell:
        "grumem train --settings {params.settings:q} --project {wildcards.project}"
        " --train {input.train:q} --val {input.val:q} --python {resources.train_python:q}"
        " --out-dir {params.out_dir} 2> {log}"
