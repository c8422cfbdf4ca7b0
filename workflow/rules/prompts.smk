rule prompts:
    input:
        chunks=shard_chunks,
        queries=queries_file,
        template=TEMPLATE,
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
        " --queries {input.queries} --template {input.template} --out {output}"
        " {input.chunks} 2> {log}"
