# `snakemake evaluate`: every policy of evaluate.policies over the sessions of the
# evaluated split, by the workflow's own stages (the same prompts, recording, cache,
# replay and strict parser), then compared. Each rule runs the subcommand of its
# namesake without the prefix, on files under results/{project}/eval/{policy}/.


rule evaluate_prompts:
    input:
        chunks=shard_chunk_inputs,
        queries=queries_file,
        template=TEMPLATE,
        sessions=ancient("results/{project}/sessions.jsonl"),
    output:
        "results/{project}/eval/{policy}/prompts/{shard}.jsonl",
    log:
        "logs/evaluate_prompts/{project}/{policy}/{shard}.log",
    benchmark:
        "benchmarks/evaluate_prompts/{project}/{policy}/{shard}.tsv"
    conda:
        "../../environment.yml"
    params:
        settings=evaluate_settings("llm", "loop", "budget", "split"),
        split=EVALUATE["split"],
    shell:
        "grumem prompts --settings {params.settings:q} --project {wildcards.project}"
        " --queries {input.queries:q} --template {input.template:q}"
        " --sessions {input.sessions} --split {params.split} --out {output}"
        " {input.chunks:q} 2> {log}"


rule evaluate_responses:
    input:
        "results/{project}/eval/{policy}/prompts/{shard}.jsonl",
    output:
        "results/{project}/eval/{policy}/responses/{shard}.jsonl",
    log:
        "logs/evaluate_responses/{project}/{policy}/{shard}.log",
    benchmark:
        "benchmarks/evaluate_responses/{project}/{policy}/{shard}.tsv"
    conda:
        "../../environment.yml"
    resources:
        llm_slots=policy_llm_slots,
        # a resource, not a param: a changed connection setting reruns no job
        llm_connection=policy_connection,
    params:
        settings=evaluate_settings("llm", "loop", "budget"),
    shell:
        "grumem responses --settings {params.settings:q} --connection {resources.llm_connection:q}"
        " --prompts {input} --policy {wildcards.policy}"
        " --concurrency {resources.llm_slots} --out {output} --log {log}"


rule evaluate_gates:
    input:
        prompts="results/{project}/eval/{policy}/prompts/{shard}.jsonl",
        responses="results/{project}/eval/{policy}/responses/{shard}.jsonl",
    output:
        "results/{project}/eval/{policy}/gates/{shard}.jsonl",
    log:
        "logs/evaluate_gates/{project}/{policy}/{shard}.log",
    benchmark:
        "benchmarks/evaluate_gates/{project}/{policy}/{shard}.tsv"
    conda:
        "../../environment.yml"
    params:
        settings=evaluate_settings("budget"),
    shell:
        "grumem gates --settings {params.settings:q} --prompts {input.prompts}"
        " --responses {input.responses}"
        " --out {output} 2> {log}"


rule evaluate_log:
    input:
        prompts=evaluate_files("prompts"),
        responses=evaluate_files("responses"),
        gates=evaluate_files("gates"),
    output:
        "results/{project}/eval/{policy}/log.jsonl",
    log:
        "logs/evaluate_log/{project}/{policy}.log",
    benchmark:
        "benchmarks/evaluate_log/{project}/{policy}.tsv"
    conda:
        "../../environment.yml"
    params:
        settings=evaluate_settings("llm", "loop"),
    shell:
        "grumem log --settings {params.settings:q} --prompts {input.prompts}"
        " --responses {input.responses} --gates {input.gates} --out {output} 2> {log}"


rule evaluate_compare:
    input:
        logs=evaluate_logs,
        labels=labels_file,
        # whole sessions: t_last_evidence and the chunks an early exit left unread
        chunks=project_chunk_inputs,
    output:
        json="results/{project}/eval/compare.json",
        md="results/{project}/eval/compare.md",
        exit_timing=report(
            "results/{project}/eval/exit_timing.svg",
            caption="../report/exit_timing.rst",
            category="Evaluation",
            subcategory="{project}",
            labels={"project": "{project}", "plot": "exit timing"},
        ),
        chunks_read=report(
            "results/{project}/eval/chunks_read.svg",
            caption="../report/chunks_read.rst",
            category="Evaluation",
            subcategory="{project}",
            labels={"project": "{project}", "plot": "chunks read"},
        ),
        memory=report(
            "results/{project}/eval/memory_tokens_by_t.svg",
            caption="../report/memory_tokens_by_t.rst",
            category="Evaluation",
            subcategory="{project}",
            labels={"project": "{project}", "plot": "memory tokens by t"},
        ),
    log:
        "logs/evaluate_compare/{project}.log",
    benchmark:
        "benchmarks/evaluate_compare/{project}.tsv"
    conda:
        "../../environment.yml"
    params:
        runs=evaluate_runs,
        plots_dir="results/{project}/eval",
    shell:
        "grumem evaluate-compare {params.runs} --labels {input.labels:q}"
        " --chunks {input.chunks:q} --out-json {output.json} --out-md {output.md}"
        " --plots-dir {params.plots_dir} 2> {log}"
