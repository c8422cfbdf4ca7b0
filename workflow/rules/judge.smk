rule judge:
    input:
        chunks=shard_chunk_inputs,
        queries=queries_file,
        template=JUDGE_TEMPLATE,
    output:
        labels="results/{project}/judge/{shard}.jsonl",
        unparsed="results/{project}/judge/{shard}.unparsed.jsonl",
    log:
        "logs/judge/{project}/{shard}.log",
    benchmark:
        "benchmarks/judge/{project}/{shard}.tsv"
    conda:
        "../../environment.yml"
    resources:
        llm_slots=judge_llm_slots,
        # a resource, not a param: a changed connection setting reruns no job
        llm_connection=LLM_CONNECTION,
    params:
        settings=judge_settings,
    shell:
        "grumem judge --settings {params.settings:q} --connection {resources.llm_connection:q}"
        " --project {wildcards.project}"
        " --queries {input.queries:q} --template {input.template:q} --out {output.labels}"
        " --unparsed {output.unparsed} --concurrency {resources.llm_slots} --log {log}"
        " {input.chunks:q}"
