#!/usr/bin/env bash
# CI step: one language model over two SLURM nodes (issue 48), on the two-node cluster of
# .ci/slurm-multinode.sh (beside the one-node cluster of .ci/slurm-test.sh; nothing shared).
#
#   bash .ci/slurm-multinode-test.sh     (from the repository root, as root)
#
# 1. starts the two-node cluster (stopped again on exit, whatever happens);
# 2. writes a small config (variant elmo-c, 60 steps, no tasks) with
#    resources.pretrain.variants.elmo-c.nodes: 2 (1 gloo process per node) into one copy of the
#    working tree, and the same with 1 node x 2 processes into another; builds the pretraining
#    job's inputs locally in the first and copies them to the second;
# 3. runs the pretraining job through the real SLURM profile command
#       .venv/bin/snakemake <model.pt> --workflow-profile profiles/slurm --configfile <config>
#    (one SLURM job over n1 and n2, one torchrun agent per node), and locally 1 node x 2
#    processes in the other copy; the two model.pt must be equal tensor for tensor;
# 4. runs the fault cases on the same cluster (tests/workflow/test_slurm_multinode.py: a worker
#    SIGKILLed, one node's agent killed, a node lost with --requeue, the time limit), each
#    resumed model equal to an uninterrupted run's.
# Prints the wall time of each part. The work folder is deleted after a pass (kept after a
# failure, or always with ELMOC_SLURM_KEEP=1).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
T0=$(date +%s)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/elmoc-slurm-mn-test.XXXXXX")
TIMEOUT=${ELMOC_SLURM_TIMEOUT:-480}
log() { echo "[slurm-multinode $(( $(date +%s) - T0 ))s] $*"; }
fail() { log "FAIL: $*"; exit 1; }

LOCAL_PID=
cleanup() {
    local rc=$?
    [ -n "$LOCAL_PID" ] && kill "$LOCAL_PID" 2>/dev/null || true
    bash "$REPO/.ci/slurm-multinode.sh" stop || true
    if [ "$rc" = 0 ] && [ -z "${ELMOC_SLURM_KEEP:-}" ]; then
        rm -rf "$WORK"
    else
        log "work files kept in $WORK"
    fi
    log "wall time $(( $(date +%s) - T0 )) s; exit $rc"
}
trap cleanup EXIT

[ -e .venv/bin/.elmoc-installed ] || make .venv/bin/.elmoc-installed >/dev/null
.venv/bin/python -c "import snakemake_executor_plugin_slurm" 2>/dev/null || .venv/bin/pip install -q -e '.[slurm]'
eval "$(bash .ci/slurm-multinode.sh start | tail -n 1)"   # export SLURM_CONF=... ELMOC_SLURM_CONF=...
[ -n "${ELMOC_SLURM_CONF:-}" ] || fail "the cluster did not start"
sinfo -N
log "cluster up"

. "$REPO/.ci/copy-tree.sh"   # copy_tree DIR
copy_tree "$WORK/slurm"
.venv/bin/python - "$WORK/slurm" <<'EOF'
import sys, yaml
work = sys.argv[1]
cfg = yaml.safe_load(open("config/config.yaml"))
keep = "elmo-c"
cfg["pretrain"]["variants"] = {keep: cfg["pretrain"]["variants"][keep]}
cfg["pretrain"]["variants"][keep].setdefault("overrides", {}).setdefault("train", {}).update(max_steps=60, epochs=1000, checkpoint_every=10,
                                                                eval_every=0)
cfg["tasks"]["run"] = []
cfg["bench"]["enabled"] = False
# 1 CPU per node (the cluster's nodes share this host's 2 cores), memory per node
cfg.setdefault("resources", {})["pretrain"] = {"threads": 1, "gpus": 0, "processes": 1, "mem_mb": 900, "runtime": 10,
                                               "signal_lead_s": 30, "variants": {keep: {"nodes": 2}}}
yaml.safe_dump(cfg, open(f"{work}/config/ci-2x1.yaml", "w"), sort_keys=False)
cfg["resources"]["pretrain"]["variants"] = {keep: {"processes": 2}}
yaml.safe_dump(cfg, open(f"{work}/config/ci-1x2.yaml", "w"), sort_keys=False)
EOF
TARGET=results/demo/lm/elmo-c/forward/model.pt
cd "$WORK/slurm"
# the job's inputs (corpus, vocabulary, vectors, spec), built locally once for both copies
nice -n 5 .venv/bin/snakemake "$TARGET" --cores 2 --omit-from pretrain --configfile config/ci-2x1.yaml \
    > "$WORK/inputs.log" 2>&1 || fail "building the inputs failed; see $WORK/inputs.log"
cp -a "$WORK/slurm" "$WORK/local"
log "inputs built"

# the 1 x 2 reference runs locally at the same time
( cd "$WORK/local" && exec nice -n 5 .venv/bin/snakemake "$TARGET" --cores 2 --configfile config/ci-1x2.yaml \
    > "$WORK/local.log" 2>&1 ) &
LOCAL_PID=$!
t=$(date +%s)
timeout "$TIMEOUT" .venv/bin/snakemake "$TARGET" --workflow-profile profiles/slurm --configfile config/ci-2x1.yaml \
    > "$WORK/slurm.log" 2>&1 || fail "the two-node run failed (exit $?); see $WORK/slurm.log"
log "two-node pretraining job through the SLURM profile: $(( $(date +%s) - t )) s"
grep -E "^elmoc multinode|rank 0\]:.*heldout" logs/demo/pretrain/elmo-c.forward.log | sed 's/^/    /'
rcl=0; wait "$LOCAL_PID" || rcl=$?
LOCAL_PID=
[ "$rcl" = 0 ] || fail "the 1 x 2 local run failed (exit $rcl); see $WORK/local.log"
cd "$REPO"
.venv/bin/python - "$WORK" "${ELMOC_SLURM_MN_DIR:-/tmp/elmoc-slurm-mn}/log/jobcomp.txt" <<'EOF'
import re, sys
import torch
from elmoc.model_file import load_checkpoint
work, jobcomp = sys.argv[1:]
jobs = [dict(re.findall(r"(\w+)=(\S*)", line)) for line in open(jobcomp)]
print("SLURM jobs:", [(j["JobId"], j["JobState"], j["NodeList"], j["NodeCnt"]) for j in jobs])
assert jobs and all(j["JobState"] == "COMPLETED" and j["NodeCnt"] == "2" for j in jobs), jobs
a = load_checkpoint(f"{work}/local/results/demo/lm/elmo-c/forward/model.pt")
b = load_checkpoint(f"{work}/slurm/results/demo/lm/elmo-c/forward/model.pt")
same = a["step"] == b["step"] and a["model"].keys() == b["model"].keys() \
    and all(torch.equal(x, b["model"][k]) for k, x in a["model"].items())
print(f"model.pt, 2 nodes x 1 process (SLURM) vs 1 node x 2 processes (local): {len(a['model'])} tensors,"
      f" step {b['step']} / {a['step']}, {'equal' if same else 'DIFFERENT'}")
sys.exit(0 if same else 1)
EOF
log "two-node job passed"

t=$(date +%s)
ELMOC_SLURM_MN=1 .venv/bin/python -m pytest -q -p no:randomly tests/workflow/test_slurm_multinode.py -rA \
    || fail "a fault case failed"
log "fault cases: $(( $(date +%s) - t )) s"
