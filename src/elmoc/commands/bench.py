"""``elmoc bench``: regenerate the paper's speed tables (Tables 4 and 5) on this machine."""
from __future__ import annotations

from elmoc.commands._options import DIR, add_device, add_output

NAME = "bench"
GROUP = "evaluate"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc bench --quick --output-dir results/demo/tables'
HELP = "time real training steps of every output layer and encoder; print Tables 4 and 5"
DESCRIPTION = (
    "Builds each benchmarked LM from an LM spec (synthetic random vector tables and token ids) and "
    "times the trainer's step (forward, backward, clipping, optimizer). Table 4: CONT, FIXED, SUBWORD, "
    "ADAPTIVE and SAMPLED (40K/800K/2000K) on the ELMo encoder in S1 (batch 1; on CUDA in a process of its "
    "own with CUDA_LAUNCH_BLOCKING=1, as the paper's synchronous S1), S2 (largest batch whose "
    "measured peak memory fits --memory-budget-mb) and S3 (--world data-parallel processes; gloo on CPU). "
    "Table 5: LSTM, LSTMx2, TRANS BASE, ELMO, TRANS LARGE and GPT (length 512) with every output layer, "
    "under --table5-protocol: s3 (the paper's: --world data-parallel processes at the largest batch that "
    "fits, OOM where batch 1 does not) or fixed (one process at --table5-batch, the CPU fallback); every "
    "Table 5 caption names the protocol. "
    "Also times the optimized ELMo LSTM against a per-step reference and reports the CONT share and the "
    "model FLOP utilization. Widths are multiplied by --width-scale and vocabularies by --vocab-scale "
    "(1.0 = paper sizes, for a GPU). Prints Markdown; --output-dir also writes .md/.csv/.json files. "
    "The workflow passes the config's `bench` section as --section-json instead of the settings."
)

# config key of the `bench` section -> (flag, type); `quick` and `s3` are the booleans
SECTION_KEYS = {"device": ("--device", str), "width_scale": ("--width-scale", float),
                "vocab_scale": ("--vocab-scale", float), "memory_budget_mb": ("--memory-budget-mb", float),
                "repeats": ("--repeats", int), "world": ("--world", int), "table5_batch": ("--table5-batch", int),
                "threads": ("--threads", int), "table5_protocol": ("--table5-protocol", str)}


# --output-dir and --scratch: written only; nothing is read
INPUTS = ()  # args naming files read; an output among them is refused (cli)
OUTPUTS = ()

def add_arguments(parser) -> None:
    from elmoc.config_section import add_section_argument

    add_section_argument(parser, "bench section")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run in well under a minute: widths x1/32, vocabularies x0.005, 2 repeats, "
                        "2 S2 probes, GPT length 64, S3 skipped")
    parser.add_argument("--tables", default="4,5,lstm",
                        help="comma-separated subset of 4, 5, lstm (default: all)")
    add_device(parser, default=None, what="; default cpu")
    parser.add_argument("--width-scale", type=float, default=None, help="width factor (default 0.125; quick 1/32)")
    parser.add_argument("--vocab-scale", type=float, default=None, help="vocabulary factor (default 0.05)")
    parser.add_argument("--memory-budget-mb", type=float, default=None, help="per-process memory budget of S2 and of Table 5 under s3 (default 768)")
    parser.add_argument("--repeats", type=int, default=None,
                        help=("timed steps per figure, median (default 3; S1 times 5x as many; the LSTM kernel "
                              "figures are the fastest of 3x, the 2000K/40K CONT ratio the median of 10x pairs)"))
    parser.add_argument("--world", type=int, default=None, help="data-parallel processes of S3 and of Table 5 under s3 (default 2)")
    parser.add_argument("--table5-batch", type=int, default=None,
                        help="Table 5 batch of the fixed protocol (default 64)")
    parser.add_argument("--table5-protocol", choices=("auto", "s3", "fixed"), default=None,
                        help=("how Table 5 is timed: s3 = the paper's (--world data-parallel processes, NCCL on "
                              "CUDA, gloo on CPU, each at the largest batch whose measured peak fits "
                              "--memory-budget-mb; OOM where batch 1 does not fit), fixed = one process at "
                              "--table5-batch (the CPU fallback), auto = s3 on CUDA unless --no-s3 or --quick, fixed "
                              "elsewhere (default)"))
    parser.add_argument("--table4-rows", default=None,
                        help=("comma-separated Table 4 rows to measure, e.g. 'CONT,SUBWORD,ADAPTIVE 800K,SAMPLED "
                              "800K' (default: all nine; CONT, the base of the ratios, is always measured)"))
    parser.add_argument("--s1-interleave", action="store_true",
                        help=("interleave the Table 4 models' S1 calls round-robin even at paper size (all models "
                              "in memory at once; default only under 50M parameters in all), so load drift on a "
                              "shared machine hits every row alike"))
    parser.add_argument("--scenarios", default=None,
                        help="comma-separated Table 4 scenarios, a subset of s1, s2, s3 (default: all)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads per process (default 1)")
    parser.add_argument("--no-s3", action="store_true", help="skip the data-parallel scenario S3 (Table 5 auto then times the fixed batch)")
    add_output(parser, DIR, "write table4/table5/lstm .md and .csv and bench.json here", old=("--out-dir",), required=False)
    parser.add_argument("--scratch", default=None,
                        help="folder for the synthetic vector tables (default: a temporary folder)")


def run(args) -> int:
    import sys

    from elmoc.bench.run_bench import run_bench

    if args.section_json is not None:
        _flags_from_section(args)
        if args.device not in (None, "cpu"):  # the section's device, checked as the CLI checks --device
            from elmoc.devices import check_device

            args.device = check_device(args.device)
    sys.stdout.write(run_bench(args))
    return 0


def _flags_from_section(args) -> None:
    """Fill the settings from --section-json (the config's `bench` section)."""
    from elmoc.config_section import Section, refuse_with_section

    refuse_with_section(args, {"--quick": args.quick, "--no-s3": args.no_s3,
                               **{flag: getattr(args, key) for key, (flag, _) in SECTION_KEYS.items()}})
    # `enabled` is the workflow's switch (workflow/rules/bench.smk), passed with the section
    b = Section.parse(args.section_json, "bench", keys=(*SECTION_KEYS, "quick", "s3", "enabled"))
    for key, (_, kind) in SECTION_KEYS.items():
        value = b.get(key, kind)
        setattr(args, key, kind(value) if value is not None else None)
    args.quick = b.get("quick", bool, False)
    args.no_s3 = not b.get("s3", bool, True)
