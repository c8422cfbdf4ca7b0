rule sessions:
    input:
        project_chunk_inputs,
    output:
        "results/{project}/sessions.jsonl",
    log:
        "logs/sessions/{project}.log",
    benchmark:
        "benchmarks/sessions/{project}.tsv"
    # a project's one index, read by every shard: on a cluster it runs in the
    # Snakemake process (it only reads the session ids), not as a cluster job
    localrule: True
    conda:
        "../../environment.yml"
    params:
        chunks=project_chunks,
    shell:
        "grumem sessions --out {output} {params.chunks:q} 2> {log}"
