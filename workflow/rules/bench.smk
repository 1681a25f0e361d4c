# Speed tables (paper Tables 4 and 5): one `elmoc bench` run, so every ratio is
# measured side by side on the same machine.  Not a default target unless
# `bench.enabled` (it occupies the machine for ~10 minutes at the default scale on 2 CPU cores).


def bench_options():
    b = config.get("bench", {})
    flags = {"--width-scale": b.get("width_scale"), "--vocab-scale": b.get("vocab_scale"),
             "--memory-budget-mb": b.get("memory_budget_mb"), "--repeats": b.get("repeats"),
             "--world": b.get("world"), "--table5-batch": b.get("table5_batch"), "--threads": b.get("threads")}
    opts = [f"{k} {v}" for k, v in flags.items() if v is not None]
    opts.append(f"--device {shlex.quote(str(b.get('device', 'cpu')))}")
    if b.get("quick", False):
        opts.append("--quick")
    if not b.get("s3", True):
        opts.append("--no-s3")
    return " ".join(opts)


rule bench:
    output:
        md="results/tables/speed.md",
        table4="results/tables/table4.csv",
        table5="results/tables/table5.csv",
        lstm="results/tables/lstm_kernel.csv",
        json="results/tables/bench.json",
    params:
        options=bench_options(),
    log:
        "logs/bench/bench.log",
    threads: workflow.cores
    resources:
        bench=1,
    shell:
        "{ELMOC} bench {params.options} --out-dir results/tables > {log} 2>&1"


FINAL_OUTPUT_HOOKS.append(lambda: ["results/tables/speed.md"] if config.get("bench", {}).get("enabled") else [])
