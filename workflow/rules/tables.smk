# Tables: our numbers beside the paper's (pretraining heldout metrics are in
# pretrain.smk; downstream Table 2/3 here).


rule downstream_table:
    input:
        task_results(),
    output:
        md="results/tables/downstream.md",
        csv="results/tables/downstream.csv",
        runs="results/tables/downstream_runs.csv",
    log:
        "logs/tables/downstream.log",
    localrule: True
    shell:
        "{ELMOC} tables downstream --inputs {input} --output {output.md} --csv {output.csv}"
        " --runs-csv {output.runs} > {log} 2>&1"


FINAL_OUTPUT_HOOKS.append(lambda: ["results/tables/downstream.md"] if task_results() else [])
