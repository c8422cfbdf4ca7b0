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
    shell:
        "grumem sessions --out {output} {input:q} 2> {log}"
