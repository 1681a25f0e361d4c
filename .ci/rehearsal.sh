#!/usr/bin/env bash
# Paper-shaped rehearsal: config/rehearsal.yaml (= config/paper.yaml with the sizes shrunk)
# end to end on CPU, in a fresh temporary folder: every variant pretrained forward and
# backward by torch.distributed.run with 2 gloo processes, features, all five tasks, the
# bench and the tables. Needs ../shared/data beside the repository and the venv
# (make .venv/bin/.elmoc-installed). Usage: .ci/rehearsal.sh [extra snakemake args]
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
PY=${PYTHON_VENV:-$REPO/.venv}/bin/python
SHARED=$(cd "$REPO/.." && pwd)/shared
test -d "$SHARED/data" || { echo "rehearsal: $SHARED/data not found (the shared data folder beside the repository)" >&2; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/elmoc-rehearsal.XXXXXX")
mkdir "$TMP/work"
ln -s "$SHARED" "$TMP/shared"   # config paths ../shared/data/... resolve from the work folder
start=$(date +%s)
status=0
"$PY" -m snakemake --snakefile "$REPO/Snakefile" --configfile "$REPO/config/rehearsal.yaml" \
    --directory "$TMP/work" --cores 2 "$@" || status=$?
echo "rehearsal: snakemake exit $status after $(( $(date +%s) - start )) s (work folder $TMP/work)"
if [ "$status" -ne 0 ]; then exit "$status"; fi
"$PY" - "$TMP/work" <<'PY'
import json, sys
from pathlib import Path
work = Path(sys.argv[1])
variants = ["elmo", "elmo-c", "elmo-a", "elmo-sub", "elmo-c-oneb", "elmo-c-rnd", "elmo-c-cnn", "elmo-c-cnn-cc", "elmo-c-cc-cnn"]
for v in variants:
    for d in ("forward", "backward"):
        json.loads((work / f"results/lm/{v}/{d}/heldout.json").read_text())
        assert (work / f"results/lm/{v}/{d}/model.pt").is_file(), (v, d)
runs = [json.loads(p.read_text()) for p in sorted(work.glob("results/tasks/*/*/seed*.json"))]
assert len(runs) == 5 * (len(variants) + 1), len(runs)
bad = [(r["task"], r["variant"], r["status"]) for r in runs if r["status"] != "ok"]
assert not bad, bad
left = sorted(str(p) for p in work.glob("results/features/*/*.hdf5"))
assert not left, f"temporary features were not deleted: {left}"
print(f"rehearsal: 18 LMs (16 trained, ELMo released), {len(runs)} task runs ok, features deleted after use")
PY
rm -rf "$TMP"
