rule responses:
    input:
        "results/{project}/prompts/{shard}.jsonl",
    output:
        "results/{project}/responses/{shard}.jsonl",
    log:
        "logs/responses/{project}/{shard}.log",
    benchmark:
        "benchmarks/responses/{project}/{shard}.tsv"
    conda:
        "../../environment.yml"
    resources:
        # requests this job keeps in flight; the profile caps the sum over all jobs
        llm_slots=LLM_SLOTS,
        # a resource, not a param: a changed connection setting reruns no job
        llm_connection=LLM_CONNECTION,
    params:
        settings=settings("llm", "loop", "budget"),
    shell:
        # progress goes to the log and, through stderr, to the terminal
        "grumem responses --settings {params.settings:q} --connection {resources.llm_connection:q}"
        " --prompts {input}"
        " --concurrency {resources.llm_slots} --out {output} --log {log}"
