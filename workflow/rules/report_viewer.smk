rule report_viewer:
    input:
        turn_log="results/{project}/log.jsonl",
        trajectories="results/{project}/corpus/trajectories.jsonl",
        template=TEMPLATE,
    output:
        report(
            "results/{project}/report/viewer.html",
            caption="../report/viewer.rst",
            category="Corpus",
            subcategory="{project}",
            labels={"project": "{project}", "plot": "trajectory viewer"},
        ),
    log:
        "logs/report_viewer/{project}.log",
    benchmark:
        "benchmarks/report_viewer/{project}.tsv"
    conda:
        "../../environment.yml"
    shell:
        "grumem report-viewer --turn-log {input.turn_log} --trajectories {input.trajectories}"
        " --template {input.template:q} --project {wildcards.project} --out {output} 2> {log}"
