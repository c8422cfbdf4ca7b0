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
        budget=config["budget"]["section"],
    shell:
        "grumem chunk --format {params.format} {params.drop} --budget {params.budget}"
        " --out {output} {input:q} 2> {log}"
