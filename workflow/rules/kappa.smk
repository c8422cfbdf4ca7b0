rule kappa:
    input:
        labels=labels_file,
        calibration=calibration_file,
        queries=queries_file,
        chunks=project_chunk_inputs,
    output:
        "results/{project}/kappa.json",
    log:
        "logs/kappa/{project}.log",
    benchmark:
        "benchmarks/kappa/{project}.tsv"
    conda:
        "../../environment.yml"
    params:
        # only min_calibration: the export's other settings rerun the export, not this
        settings=settings("export", only={"export": ["min_calibration"]}),
    shell:
        "grumem kappa --settings {params.settings:q} --labels {input.labels:q}"
        " --calibration {input.calibration:q}"
        " --queries {input.queries:q} --chunks {input.chunks:q} --out {output} 2> {log}"
