#!/usr/bin/env bash
# The GPU check (issue 33): a thin wrapper of benchmarks/gpu_check.py (see its --help).
#   benchmarks/gpu_check.sh --device cpu --tiny --out /tmp/gpu-check    # the CPU rehearsal
#   benchmarks/gpu_check.sh --steps A --out /tmp/gpu-check               # on a GPU (docs/full-run.md, "On a GPU")
# Python: $PYTHON, else the repository's .venv, else python3 (the device machine's, which holds torch).
# elmoc is imported from src/ (PYTHONPATH), so the device machine needs no install.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
  if [[ -x "$root/.venv/bin/python" ]]; then python="$root/.venv/bin/python"; else python="$(command -v python3)"; fi
fi
export PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}"
exec "$python" "$root/benchmarks/gpu_check.py" "$@"
