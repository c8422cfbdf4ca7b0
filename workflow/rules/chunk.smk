# One job per shard, not per transcript, so jobs grow with shards: the shard's
# transcripts are turned into their directories results/{project}/chunks/{unit},
# whose paths the other rules take from project_layout(). Snakemake cannot declare
# them as this rule's outputs (an output cannot be a function of {shard}, and the
# chunk file names are the session ids inside the transcripts), so the declared
# output is the shard's manifest and the rules reading chunks wait on it
# (common.smk's chunked).
rule chunk:
    input:
        shard_transcripts,
    output:
        "results/{project}/chunked/{shard}.json",
    log:
        "logs/chunk/{project}/{shard}.log",
    benchmark:
        "benchmarks/chunk/{project}/{shard}.tsv"
    conda:
        "../../environment.yml"
    params:
        format=lambda wc: project_config(wc.project)["transcripts"]["format"],
        drop=lambda wc: (
            "--drop-thinking"
            if project_config(wc.project)["transcripts"]["drop_thinking"]
            else ""
        ),
        options=lambda wc: transcript_options(wc.project),
        redact=lambda wc: redaction(wc.project),
        budget=config["budget"]["section"],
        root="results/{project}/chunks",
    shell:
        "grumem chunk --format {params.format} {params.drop} {params.options} {params.redact}"
        " --budget {params.budget} --units-under {params.root} --manifest {output}"
        " {input:q} 2> {log}"
