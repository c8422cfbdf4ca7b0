rule log:
    input:
        prompts=shard_files("prompts"),
        responses=shard_files("responses"),
        gates=shard_files("gates"),
    output:
        "results/{project}/log.jsonl",
    log:
        "logs/log/{project}.log",
    benchmark:
        "benchmarks/log/{project}.tsv"
    conda:
        "../../environment.yml"
    params:
        settings=settings("llm", "loop"),
    shell:
        "grumem log --settings {params.settings:q} --prompts {input.prompts}"
        " --responses {input.responses} --gates {input.gates} --out {output} 2> {log}"
