rule report_plots:
    input:
        turn_log="results/{project}/log.jsonl",
        trajectories="results/{project}/corpus/trajectories.jsonl",
    output:
        r_update=report(
            "results/{project}/report/r_update_by_t.svg",
            caption="../report/r_update_by_t.rst",
            category="Corpus",
            subcategory="{project}",
            labels={"project": "{project}", "plot": "r_update per t"},
        ),
        t_last_evidence=report(
            "results/{project}/report/t_last_evidence.svg",
            caption="../report/t_last_evidence.rst",
            category="Corpus",
            subcategory="{project}",
            labels={"project": "{project}", "plot": "t_last_evidence"},
        ),
        parse_rate=report(
            "results/{project}/report/parse_rate_by_t.svg",
            caption="../report/parse_rate_by_t.rst",
            category="Corpus",
            subcategory="{project}",
            labels={"project": "{project}", "plot": "parse rate per t"},
        ),
        latency=report(
            "results/{project}/report/latency.svg",
            caption="../report/latency.rst",
            category="Corpus",
            subcategory="{project}",
            labels={"project": "{project}", "plot": "latency"},
        ),
    log:
        "logs/report_plots/{project}.log",
    benchmark:
        "benchmarks/report_plots/{project}.tsv"
    conda:
        "../../environment.yml"
    params:
        out_dir="results/{project}/report",
    shell:
        "grumem report-plots --turn-log {input.turn_log} --trajectories {input.trajectories}"
        " --out-dir {params.out_dir} 2> {log}"
