"""The opt-in distillation rules (workflow/rules/distill.smk): config/distill.yaml layered over the
demo config schedules each student's spec, one `elmoc distill` per direction against the teacher's
model.pt, and its export; the shipped configs alone schedule none (tests/workflow/test_dryrun.py)."""
import json
import re
import shlex

import pytest

from test_dryrun import REPO_ROOT, snakemake, workdir


@pytest.mark.slow
def test_students_are_distilled_per_direction_from_the_teachers_runs_and_exported(tmp_path):
    work = workdir(tmp_path)
    r = snakemake("-n", "-p", "--cores", "2", "--snakefile", str(REPO_ROOT / "Snakefile"), "--configfile",
                  str(REPO_ROOT / "config/config.yaml"), str(REPO_ROOT / "config/distill.yaml"),
                  "--directory", str(work), cwd=work)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    counts = dict(re.findall(r"^(student_spec|distill|export_student)\s+(\d+)$", r.stdout, flags=re.M))
    assert counts == {"student_spec": "2", "distill": "4", "export_student": "2"}, counts
    commands = [shlex.split(line) for line in r.stdout.splitlines() if " elmoc.cli distill " in line]
    one = next(c for c in commands if "results/demo/distill/elmo-c-one-layer/backward" in c)
    assert one[one.index("--teacher") + 1] == "results/demo/lm/elmo-c/backward/model.pt"
    assert one[one.index("--spec") + 1] == "results/demo/distill/elmo-c-one-layer/spec.yaml"
    section = json.loads(one[one.index("--section-json") + 1])
    assert section == {"init_from_teacher": False, "layer_weights": 1.0, "lm_weight": 1.0}  # no workflow keys
