rule sessions:
    input:
        project_chunk_inputs,
    output:
        "results/{project}/sessions.jsonl",
    log:
        "logs/sessions/{project}.log",
    benchmark:
        "benchmarks/sessions/{project}.tsv"
    conda:
        "../../environment.yml"
    params:
        chunks=project_chunks,
    shell:
        "grumem sessions --out {output} {params.chunks:q} 2> {log}"
