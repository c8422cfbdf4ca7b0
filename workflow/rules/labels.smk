rule labels:
    input:
        labels=shard_files("judge"),
        unparsed=shard_files("judge", ".unparsed.jsonl"),
    output:
        labels="results/{project}/labels.jsonl",
        unparsed="results/{project}/unjudged.jsonl",
    log:
        "logs/labels/{project}.log",
    benchmark:
        "benchmarks/labels/{project}.tsv"
    conda:
        "../../environment.yml"
    shell:
        "grumem labels --labels {input.labels} --unparsed {input.unparsed}"
        " --out {output.labels} --unparsed-out {output.unparsed} 2> {log}"
