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
        min_calibration=config["export"]["min_calibration"],
    shell:
        "grumem kappa --labels {input.labels:q} --calibration {input.calibration:q}"
        " --queries {input.queries:q} --chunks {input.chunks:q}"
        " --min-calibration {params.min_calibration} --out {output} 2> {log}"
