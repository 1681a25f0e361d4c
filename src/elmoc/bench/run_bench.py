"""``elmoc bench``'s run: its settings checked, Tables 4/5 and the LSTM kernels timed, the files written."""
from __future__ import annotations

from typing import Any


def run_bench(args: Any) -> str:
    """``elmoc bench`` with its parsed options (module :mod:`elmoc.commands.bench`): the tables run in
    ``args.scratch`` (a temporary folder when None), bench.json/speed.md/the CSVs written into
    ``args.output_dir`` when given; the Markdown tables."""
    import json
    import os
    import tempfile
    from pathlib import Path

    from elmoc.bench.report import rows_to_csv, to_markdown
    from elmoc.bench.speed import BenchSettings, run_all
    from elmoc.errors import ConfigError

    args.device = args.device or "cpu"
    tables = tuple(t.strip() for t in args.tables.split(",") if t.strip())
    bad = sorted(set(tables) - {"4", "5", "lstm"})
    if bad or not tables:
        raise ConfigError(f"--tables takes a comma-separated subset of 4, 5, lstm; got {args.tables!r}")
    overrides = {k: v for k, v in {
        "device": args.device, "width_scale": args.width_scale, "vocab_scale": args.vocab_scale,
        "memory_budget_mb": args.memory_budget_mb, "repeats": args.repeats, "world": args.world,
        "table5_batch": args.table5_batch, "threads": args.threads, "skip_s3": args.no_s3 or None,
        "table5_protocol": args.table5_protocol,
        "table4_rows": _list(args.table4_rows), "scenarios": _list(args.scenarios),
        "s1_interleave": args.s1_interleave or None,
    }.items() if v is not None}
    settings = BenchSettings.quick(**overrides) if args.quick else BenchSettings(**overrides)

    def go(scratch: Path) -> dict:
        return run_all(settings, scratch, tables)

    if args.scratch:
        result = go(Path(args.scratch))
    else:
        with tempfile.TemporaryDirectory(prefix="elmoc-bench-") as tmp:
            result = go(Path(tmp))
    markdown = to_markdown(result)
    if args.output_dir:
        out = Path(args.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        files = {"bench.json": json.dumps(result, indent=2), "speed.md": markdown}
        for key, name in (("table4", "table4"), ("table5", "table5"), ("lstm", "lstm_kernel")):
            if key in result:
                files[f"{name}.csv"] = rows_to_csv(result[key])
        for name, text in files.items():
            tmp = out / f".{name}.tmp"
            tmp.write_text(text)
            os.replace(tmp, out / name)
    return markdown


def _list(text: str | None) -> list[str] | None:
    return None if text is None else [x.strip() for x in text.split(",") if x.strip()]
