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
    shell:
        "grumem gates --prompts {input.prompts} --responses {input.responses}"
        " --out {output} 2> {log}"
