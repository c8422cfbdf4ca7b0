rule prompts:
    input:
        chunks=shard_chunk_inputs,
        queries=queries_file,
        template=TEMPLATE,
        # ancient: a new session reruns the index, not every shard's prompts
        sessions=ancient("results/{project}/sessions.jsonl"),
    output:
        "results/{project}/prompts/{shard}.jsonl",
    log:
        "logs/prompts/{project}/{shard}.log",
    benchmark:
        "benchmarks/prompts/{project}/{shard}.tsv"
    conda:
        "../../environment.yml"
    params:
        settings=settings("llm", "loop", "budget"),
    shell:
        "grumem prompts --settings {params.settings:q} --project {wildcards.project}"
        " --queries {input.queries:q} --template {input.template:q}"
        " --sessions {input.sessions} --out {output}"
        " {input.chunks:q} 2> {log}"
