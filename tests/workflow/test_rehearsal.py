"""config/rehearsal.yaml is config/paper.yaml with only the sizes shrunk: same variants, same
tasks, the same rules in the DAG, every pretraining job under torch.distributed.run with 2
processes and every GPU-capable job under `elmoc with-gpus`. The run itself: .ci/rehearsal.sh."""
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED = REPO_ROOT.parent / "shared"


def workdir(tmp_path):
    work = tmp_path / "work"
    work.mkdir(parents=True)
    (tmp_path / "shared").symlink_to(SHARED)
    return work


def snakemake(*args, cwd):
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def dry_run(configfile, tmp_path):
    work = workdir(tmp_path)
    r = snakemake("-n", "-p", "--cores", "2", "--snakefile", str(REPO_ROOT / "Snakefile"),
                  "--configfile", str(REPO_ROOT / configfile), "--directory", str(work), cwd=work)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    stats = r.stdout.split("Job stats:", 1)[1].split("total", 1)[0]
    return r.stdout, set(re.findall(r"^(\w+)\s+\d+$", stats, flags=re.M))


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "data").is_dir(), reason="../shared/data is absent")
def test_rehearsal_has_the_paper_shape(tmp_path):
    paper = yaml.safe_load((REPO_ROOT / "config/paper.yaml").read_text())
    rehearsal = yaml.safe_load((REPO_ROOT / "config/rehearsal.yaml").read_text())
    assert list(rehearsal["pretrain"]["variants"]) == list(paper["pretrain"]["variants"])
    # beyond the paper (issue 25): opt-in presets, none in paper.yaml by default, two tiny ones here
    assert paper["pretrain"]["extra_variants"] == []
    extra = rehearsal["pretrain"]["extra_variants"]
    # TNF and TUPE (issue 35) ride on the plain CONT presets' paths, so those two run with a method on
    assert {"trans-base-c-tnf", "trans-base-sampled", "mlm-c-tupe", "mlm-sampled"} <= set(extra)
    paper_text = (REPO_ROOT / "config/paper.yaml").read_text()
    assert all(name in paper_text for name in extra)  # the opt-in list's comment names every preset
    assert rehearsal["tasks"]["run"] == paper["tasks"]["run"]
    assert rehearsal["bench"]["enabled"] == paper["bench"]["enabled"]
    _, paper_rules = dry_run("config/paper.yaml", tmp_path / "paper")
    out, rehearsal_rules = dry_run("config/rehearsal.yaml", tmp_path / "rehearsal")
    # the paper downloads its data (fetch); the rehearsal reads ../shared/data, and its opt-in
    # variants beyond the paper add their table (paper.yaml opts into none by default)
    assert rehearsal_rules == (paper_rules - {"fetch"}) | {"beyond_table"}
    pretrain = [c for c in out.splitlines() if " train --spec " in c]
    run_dir = lambda c: re.search(r"--output-dir (\S+)", c)[1]  # noqa: E731
    paper_jobs = [c for c in pretrain if run_dir(c).split("/")[3] not in extra]
    # ELMo: released weights; ELMo-A and ELMo-Sub: one joint bi-LM each; ELMo-C and its 5 ablations x 2 directions
    assert len(paper_jobs) == 14
    assert sorted(run_dir(c) for c in paper_jobs if "--direction joint" in c) == [
        "results/rehearsal/lm/elmo-a/joint", "results/rehearsal/lm/elmo-sub/joint"]
    # beyond the paper: CONT as two direction runs, SAMPLED as one joint bi-LM
    assert sorted(run_dir(c) for c in pretrain if "/trans-base-" in run_dir(c)) == [
        "results/rehearsal/lm/trans-base-c-tnf/backward", "results/rehearsal/lm/trans-base-c-tnf/forward",
        "results/rehearsal/lm/trans-base-sampled/joint"]
    # the masked LMs: one `masked` run each
    assert sorted(run_dir(c) for c in pretrain if "/mlm-" in run_dir(c)) == [
        "results/rehearsal/lm/mlm-c-tupe/masked", "results/rehearsal/lm/mlm-sampled/masked"]
    for variant in extra:  # each extra variant is extracted and scored on every task, like the others
        assert len([c for c in out.splitlines() if f" extract --forward results/rehearsal/lm/{variant}/" in c]) == 5
        assert len([c for c in out.splitlines() if " task --task " in c and f"results/rehearsal/features/{variant}/" in c]) == 5
    assert all("with-gpus --lock-dir .snakemake/gpu-slots 0 -- " in c and "--nproc-per-node=2 -m elmoc.cli train" in c
               and "--device cpu --threads 1" in c for c in pretrain)
    for marker in (" extract --forward ", " task --task "):
        jobs = [c for c in out.splitlines() if marker in c]
        assert jobs and all("with-gpus --lock-dir .snakemake/gpu-slots 0 -- " in c and "--device cpu" in c for c in jobs)


# config/rehearsal-methods.yaml over config/rehearsal.yaml with .ci/rehearsal-methods.sh's two targets (issue 43.3):
# every opt-in rule once or per direction, on ELMo-C and sst5 only: 31 jobs
METHODS_JOBS = {"corpus": 1, "lm_spec": 1, "vocab": 1, "fasttext": 1, "vectors": 1, "task_sentences": 1,
                "pretrain": 2, "export_model": 1, "extract": 1, "task_run_sst5": 1,
                "finetune_run_sst5": 3, "task_split_text": 1, "lm_finetune": 1, "finetune_table": 1,
                "student_spec": 1, "distill": 2, "export_student": 1, "compressed_student": 1,
                "prune": 2, "compressed_pruned": 4, "compress_copy": 2, "compression_table": 1}


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "data").is_dir(), reason="../shared/data is absent")
def test_the_methods_rehearsal_runs_every_opt_in_rule_once_at_the_rehearsals_sizes(tmp_path):
    script = (REPO_ROOT / ".ci/rehearsal-methods.sh").read_text()
    assert 'bash "$REPO/.ci/rehearsal-methods.sh"' in (REPO_ROOT / ".ci/rehearsal.sh").read_text()
    targets = ["results/rehearsal/tables/finetune.md", "results/rehearsal/tables/compression/elmo-c.md"]
    assert '"$REPO/config/rehearsal-methods.yaml"' in script and " ".join(targets) in script
    work = workdir(tmp_path)
    r = snakemake("-n", "-p", "--cores", "2", "--snakefile", str(REPO_ROOT / "Snakefile"), "--configfile",
                  str(REPO_ROOT / "config/rehearsal.yaml"), str(REPO_ROOT / "config/rehearsal-methods.yaml"),
                  "--directory", str(work), *targets, cwd=work)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    stats = r.stdout.split("Job stats:", 1)[1].split("total", 1)[0]
    assert {k: int(v) for k, v in re.findall(r"^(\w+)\s+(\d+)$", stats, flags=re.M)} == METHODS_JOBS
    commands = r.stdout.splitlines()
    # the LMs train as in the rehearsal (torchrun, 2 processes, its 12 steps); ulmfit reads the lm_finetune LM
    assert sum("-m torch.distributed.run" in c and "--nproc-per-node=2" in c and " train --spec " in c
               for c in commands) == 2
    lms = {re.search(r"--output results/rehearsal/finetune/sst5/elmo-c/(\w+)/seed1.json", c)[1]: re.search(r"--lm (\S+)", c)[1]
           for c in commands if "--output results/rehearsal/finetune/" in c}
    assert lms == {"ulmfit": "results/rehearsal/lm_finetune/elmo-c/sst5/model", "full": "results/rehearsal/models/elmo-c",
                   "frozen": "results/rehearsal/models/elmo-c"}, lms
    table = next(c for c in commands if " compression-table " in c)
    for role in ("student-elmo-c-one-layer", "pruned-magnitude-0.5", "pruned-magnitude-0.75", "ticket", "ticket-control"):
        assert f"--heldout {role}=" in table, role
    assert "--tasks sst5 " in table
