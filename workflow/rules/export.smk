# One project's corpus. The card's `snakemake export` is the collecting target
# `export` (Snakefile); this rule, which has a {project} wildcard, cannot be one.
rule export_project:
    input:
        turn_log="results/{project}/log.jsonl",
        labels=labels_file,
        kappa="results/{project}/kappa.json",
        # whole sessions: an L2 trajectory that exits before evidence it never
        # read scores as early, not on time
        chunks=project_chunk_inputs,
        # named in the dataset card (its sha256): the file the prompts were filled from
        template=TEMPLATE,
        # sessions.parquet: one row per (query, session), for online training
        queries=queries_file,
    output:
        expand("results/{{project}}/corpus/{file}", file=CORPUS_FILES),
    log:
        "logs/export/{project}.log",
    benchmark:
        "benchmarks/export/{project}.tsv"
    conda:
        "../../environment.yml"
    params:
        out_dir="results/{project}/corpus",
        settings=export_settings,
    shell:
        "grumem export --settings {params.settings:q} --turn-log {input.turn_log}"
        " --labels {input.labels:q} --kappa {input.kappa}"
        " --chunks {input.chunks:q} --template {input.template:q}"
        " --queries {input.queries:q} --project {wildcards.project}"
        " --out-dir {params.out_dir} 2> {log}"
