#!/usr/bin/env bash
# The opt-in blocks end to end (issue 43.3), run by .ci/rehearsal.sh after the paper-shaped run:
# config/rehearsal-methods.yaml over config/rehearsal.yaml in WORK (a folder with ../shared beside it)
# with the two targets below, which pull in fine_tune (each recipe, sst5), lm_finetune, distill (one
# student), prune (one plan, two rounds, ticket and control), compress and the compression table; then
# a task model saved by `elmoc task --save-model` and `elmoc predict` with it. Each output is checked.
# Usage: .ci/rehearsal-methods.sh WORK (PY: the venv's python, default .venv/bin/python)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-$REPO/.venv/bin/python}
WORK=$(cd "${1:?usage: .ci/rehearsal-methods.sh WORK}" && pwd)
start=$(date +%s)
status=0
"$PY" -m snakemake --snakefile "$REPO/Snakefile" --configfile "$REPO/config/rehearsal.yaml" \
    "$REPO/config/rehearsal-methods.yaml" --directory "$WORK" --cores 2 \
    results/rehearsal/tables/finetune.md results/rehearsal/tables/compression/elmo-c.md || status=$?
echo "rehearsal: opt-in blocks: snakemake exit $status after $(( $(date +%s) - start )) s (work folder $WORK)"
"$PY" "$REPO/.ci/rule_times.py" "$WORK" || true
if [ "$status" -ne 0 ]; then exit "$status"; fi
cd "$WORK"
mkdir -p predict
# a task model saved by a fine-tuning run of the workflow's sst5 section, and `elmoc predict` with it
"$PY" - "$REPO/config/rehearsal.yaml" <<'PY'
import json, sys, yaml
section = yaml.safe_load(open(sys.argv[1]))["tasks"]["sst5"]
section.update(encoder="fine_tune", fine_tune={"recipe": "full"})
with open("predict-sst5.yaml", "w") as f:
    yaml.safe_dump(section, f)
PY
"$PY" -m elmoc.cli task --task sst5 --config predict-sst5.yaml --variant elmo-c --seed 1 --lm results/rehearsal/models/elmo-c \
    --fasttext results/rehearsal/fasttext/cc.bin --output predict/run.json --save-model predict/model --threads 1 > predict/task.log 2>&1 \
    || { tail -n 20 predict/task.log; echo "rehearsal: elmoc task --save-model failed" >&2; exit 1; }
head -n 7 results/rehearsal/tasks/sst5/sentences.txt > predict/input.txt
"$PY" -m elmoc.cli predict predict/input.txt --task-model predict/model --output predict/predictions.jsonl --threads 1
"$PY" - <<'PY'
import json
from pathlib import Path
# fine_tune: each recipe once on sst5 (ulmfit from the LM fine-tuned on sst5's text: lm_finetune), and its table
recipes = {"ulmfit": "results/rehearsal/lm_finetune/elmo-c/sst5/model", "full": "results/rehearsal/models/elmo-c", "frozen": "results/rehearsal/models/elmo-c"}
for recipe, lm in recipes.items():
    r = json.loads(Path(f"results/rehearsal/finetune/sst5/elmo-c/{recipe}/seed1.json").read_text())
    assert (r["status"], r["encoder"], r["recipe"], r["inputs"]["lm"]) == ("ok", "fine_tune", recipe, lm), r
    assert isinstance(r["test"], float) and isinstance(r["dev"], float), r
assert Path("results/rehearsal/lm_finetune/elmo-c/sst5/model/elmoc-model.json").is_file()
table = Path("results/rehearsal/tables/finetune.md").read_text()
assert all(recipe in table for recipe in recipes) and "features" in table, table
# distill: one student, both directions trained against the teacher, exported
for d in ("forward", "backward"):
    h = json.loads(Path(f"results/rehearsal/distill/elmo-c-one-layer/{d}/heldout.json").read_text())
    assert isinstance(h["after"], float), h
assert Path("results/rehearsal/distill/elmo-c-one-layer/model/elmoc-model.json").is_file()
# prune: one plan, two rounds, the lottery ticket and its control, per direction
for d in ("forward", "backward"):
    p = json.loads(Path(f"results/rehearsal/prune/elmo-c/magnitude/{d}/prune.json").read_text())
    runs = {run["run"]: run for run in p["runs"]}
    # Frankle & Carbin's procedure (prune.ticket_procedure: rewind_each_round): each round is the ticket at
    # its level, with its random-reinit control; ticket/ and control/ link the last pair
    assert p["ticket_procedure"] == "rewind_each_round", p["ticket_procedure"]
    assert sorted(runs) == ["control1", "control2", "round1", "round2"], sorted(runs)
    assert runs["round1"]["encoder_nonzero"] > runs["round2"]["encoder_nonzero"], runs
    assert all(runs[f"control{i}"]["encoder_nonzero"] == runs[f"round{i}"]["encoder_nonzero"] for i in (1, 2)), runs
    assert all(isinstance(run["heldout"], float) for run in runs.values()), runs
    folder = Path(f"results/rehearsal/prune/elmo-c/magnitude/{d}")
    assert (folder / "ticket").resolve() == (folder / "round2").resolve(), d
    assert (folder / "control").resolve() == (folder / "control2").resolve(), d
# compress and the compression table: the original and every smaller model, each with its heldout and sst5 result
c = json.loads(Path("results/rehearsal/tables/compression/elmo-c.json").read_text())
rows = {row["role"]: row for row in c["rows"]}
roles = {"original", "float16", "int8", "student-elmo-c-one-layer", "pruned-magnitude-0.5", "pruned-magnitude-0.75",
         "ticket", "ticket-control"}
assert set(rows) == roles, sorted(rows)
for role, row in rows.items():
    own = role not in ("original", "float16", "int8")  # a smaller model: the heldout of its own training runs
    assert row["heldout"] is not None and (not own or not row["heldout"].get("inherited") and not any(
        f.startswith("results/rehearsal/lm/") for f in row["heldout"]["files"])), (role, row)
    assert isinstance(row["downstream"]["sst5"]["test"]["1"], float), (role, row)  # seed 1's test score
md = Path("results/rehearsal/tables/compression/elmo-c.md").read_text()
assert all(role in md for role in roles - {"original"}), md
# predict: one record per input sentence, in order, with one of sst5's labels
sentences = Path("predict/input.txt").read_text().splitlines()
out = [json.loads(line) for line in Path("predict/predictions.jsonl").read_text().splitlines()]
assert [o["tokens"] for o in out] == [s.split() for s in sentences], out
assert all(o["label"] in {"0", "1", "2", "3", "4"} for o in out), out
print(f"rehearsal: opt-in blocks ok: fine_tune {sorted(recipes)} (ulmfit on the lm_finetune LM), the finetune table, "
      f"a distilled student, prune rounds 1-2 with ticket and control, the compression table ({len(rows)} rows), "
      f"elmoc predict ({len(out)} sentences)")
PY
