rule export:
    input:
        turn_log="results/{project}/log.jsonl",
        labels=labels_file,
        kappa="results/{project}/kappa.json",
        # whole sessions: an L2 trajectory that exits before evidence it never
        # read scores as early, not on time
        chunks=project_chunks,
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
        min_kappa=config["export"]["min_kappa"],
        data_source=config["export"]["data_source"],
    shell:
        "grumem export --turn-log {input.turn_log} --labels {input.labels:q} --kappa {input.kappa}"
        " --min-kappa {params.min_kappa} --data-source {params.data_source}"
        " --chunks {input.chunks:q} --out-dir {params.out_dir} 2> {log}"
