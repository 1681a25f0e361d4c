#!/usr/bin/env bash
# Paper-shaped rehearsal: config/rehearsal.yaml (= config/paper.yaml with the sizes shrunk)
# end to end on CPU, in a fresh temporary folder: every variant pretrained by
# torch.distributed.run with 2 gloo processes (ELMo-C and its ablations forward and backward,
# ELMo-A and ELMo-Sub as one joint bi-LM each; ELMo is the released test model), features,
# all five tasks, the bench and the tables. Needs ../shared/data beside the repository and the venv
# (make .venv/bin/.elmoc-installed). Then the opt-in blocks (issue 43.3) in a second work folder:
# config/rehearsal-methods.yaml over config/rehearsal.yaml, on ELMo-C and sst5 (fine_tune with each
# recipe, lm_finetune, distill, prune with its ticket and control, compress and the compression
# table), and `elmoc predict` on a task model saved by `elmoc task --save-model`; each output checked.
# Usage: .ci/rehearsal.sh [extra snakemake args, for the paper-shaped run]
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
"$PY" "$REPO/.ci/rule_times.py" "$TMP/work" || true   # where the time went, by rule
if [ "$status" -ne 0 ]; then exit "$status"; fi
"$PY" - "$TMP/work" <<'PY'
import json, sys
from pathlib import Path
work = Path(sys.argv[1])
paper = ["elmo", "elmo-c", "elmo-a", "elmo-sub", "elmo-c-oneb", "elmo-c-rnd", "elmo-c-cnn", "elmo-c-cnn-cc", "elmo-c-cc-cnn"]
beyond = ["trans-base-c-tnf", "trans-base-sampled", "mlm-c-tupe", "mlm-sampled"]   # pretrain.extra_variants (issues 25, 35)
variants = paper + beyond
joint = {"elmo-a", "elmo-sub", "trans-base-sampled"}   # train.directions: joint (one run, results/rehearsal/lm/{v}/joint)
masked = {"mlm-c-tupe", "mlm-sampled"}   # train.objective: masked_lm (one run, results/rehearsal/lm/{v}/masked)
runs = [(v, d) for v in variants
        for d in (("joint",) if v in joint else ("masked",) if v in masked else ("forward", "backward"))]
for v, d in runs:
    heldout = json.loads((work / f"results/rehearsal/lm/{v}/{d}/heldout.json").read_text())
    assert (work / f"results/rehearsal/lm/{v}/{d}/model.pt").is_file(), (v, d)
    if d == "joint":
        assert heldout["direction"] == "joint" and {"forward", "backward"} <= heldout.keys(), (v, sorted(heldout))
    others = {"forward", "backward", "joint", "masked"} - ({"forward", "backward"} if d in ("forward", "backward") else {d})
    assert not [o for o in others if (work / f"results/rehearsal/lm/{v}/{o}").exists()], (v, d)
table = (work / "results/rehearsal/tables/beyond.md").read_text()
assert all(f"| {v} |" in table for v in beyond + ["elmo-c"]), table
tasks = [json.loads(p.read_text()) for p in sorted(work.glob("results/rehearsal/tasks/*/*/seed*.json"))]
assert len(tasks) == 5 * (len(variants) + 1), len(tasks)
bad = [(r["task"], r["variant"], r["status"]) for r in tasks if r["status"] != "ok"]
assert not bad, bad
left = sorted(str(p) for p in work.glob("results/rehearsal/features/*/*.hdf5"))
assert not left, f"temporary features were not deleted: {left}"
print(f"rehearsal: {len(runs)} LM runs (ELMo released; ELMo-A, ELMo-Sub, trans-base-sampled joint; mlm-c-tupe, mlm-sampled "
      f"masked), {len(tasks)} task runs ok, the beyond table, features deleted after use")
PY

# --- the opt-in blocks: fine-tuning, lm_finetune, distillation, pruning, compression, predict ------
mkdir "$TMP/methods"
PY="$PY" bash "$REPO/.ci/rehearsal-methods.sh" "$TMP/methods"
rm -rf "$TMP"
