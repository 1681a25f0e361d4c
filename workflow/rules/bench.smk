# Speed tables (paper Tables 4 and 5): one `elmoc bench` run, so every ratio is
# measured side by side on the same machine.  Not a default target unless
# `bench.enabled` (it occupies the machine for ~10 minutes at the default scale on 2 CPU cores).


def bench_processes():
    """Processes the bench runs at once: `world` for the data-parallel scenario S3 (default 2), else 1."""
    b = config["bench"]
    return (b.get("world") or 2) if b.get("s3", True) else 1


def bench_gpus():
    """One GPU per process when the bench runs on CUDA."""
    return bench_processes() if str(config["bench"].get("device", "cpu")).startswith("cuda") else 0


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
    log:
        "logs/bench/bench.log",
    threads: (config["bench"].get("threads") or 1) * bench_processes()
    resources:
        bench=1,
        gpu=bench_gpus(),
        mem_mb=RESOURCES["bench"]["mem_mb"],
        runtime=RESOURCES["bench"]["runtime"],
        slurm_partition=slurm_partition(bench_gpus()),
    params:
        options=bench_options(),
        with_gpus=with_gpus(bench_gpus()),
    shell:
        "{params.with_gpus} {ELMOC} bench {params.options} --out-dir results/tables > {log} 2>&1"


FINAL_OUTPUT_HOOKS.append(lambda: ["results/tables/speed.md"] if config.get("bench", {}).get("enabled") else [])
