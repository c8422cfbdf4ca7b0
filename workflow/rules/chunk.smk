rule chunk:
    input:
        transcript_file,
    output:
        directory("results/{project}/chunks/{unit}"),
    log:
        "logs/chunk/{project}/{unit}.log",
    benchmark:
        "benchmarks/chunk/{project}/{unit}.tsv"
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
        budget=config["budget"]["section"],
    shell:
        "grumem chunk --format {params.format} {params.drop} {params.options}"
        " --budget {params.budget} --out {output} {input:q} 2> {log}"
