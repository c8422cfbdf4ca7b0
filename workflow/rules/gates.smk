rule gates:
    input:
        prompts="results/{project}/prompts/{shard}.jsonl",
        responses="results/{project}/responses/{shard}.jsonl",
    output:
        "results/{project}/gates/{shard}.jsonl",
    log:
        "logs/gates/{project}/{shard}.log",
    benchmark:
        "benchmarks/gates/{project}/{shard}.tsv"
    conda:
        "../../environment.yml"
    params:
        # budget.memory: an over-long candidate is a format failure, as in the loop
        settings=settings("budget"),
    shell:
        "grumem gates --settings {params.settings:q} --prompts {input.prompts}"
        " --responses {input.responses}"
        " --out {output} 2> {log}"
