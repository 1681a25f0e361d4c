# Speed tables (paper Tables 4 and 5): one `elmoc bench` run, so every ratio is
# measured side by side on the same machine.  Not a default target unless
# `bench.enabled` (it occupies the machine for ~10 minutes at the default scale on 2 CPU cores).


rule bench:
    output:
        md=f"{RESULTS}/tables/speed.md",
        table4=f"{RESULTS}/tables/table4.csv",
        table5=f"{RESULTS}/tables/table5.csv",
        lstm=f"{RESULTS}/tables/lstm_kernel.csv",
        json=f"{RESULTS}/tables/bench.json",
    log:
        f"{LOGS}/bench/bench.log",
    threads: (config["bench"].get("threads") or 1) * bench_processes()
    resources:
        bench=1,
        gpu=bench_gpus(),
        mem_mb=RESOURCES["bench"]["mem_mb"],
        runtime=RESOURCES["bench"]["runtime"],
        slurm_partition=slurm_partition(bench_gpus()),
    params:
        elmoc=ELMOC,
        section=section_json(config["bench"]),
        with_gpus=with_gpus(bench_gpus()),
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.with_gpus} {params.elmoc} bench --section-json {params.section:q}" f" --output-dir {RESULTS}/tables" " > {log} 2>&1"


FINAL_OUTPUT_HOOKS.append(lambda: [f"{RESULTS}/tables/speed.md"] if config.get("bench", {}).get("enabled") else [])
