# The functions of bench.smk.

def bench_json():
    return [f"{RESULTS}/tables/bench.json"] if config.get("bench", {}).get("enabled") else []


def bench_processes():
    """Processes the bench runs at once: `world` for the data-parallel scenario S3 (default 2), else 1."""
    b = config["bench"]
    return (b.get("world") or 2) if b.get("s3", True) else 1


def bench_gpus():
    """One GPU per process when the bench runs on CUDA."""
    return bench_processes() if str(config["bench"].get("device", "cpu")).startswith("cuda") else 0


def bench_option(wildcards, input):
    """`--bench results/<run>/tables/bench.json` for a table command when the bench runs (bench_json), else nothing."""
    return f"--bench {input.bench}" if input.bench else ""
