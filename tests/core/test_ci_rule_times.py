""".ci/rule_times.py (issue 43.2): the rehearsal's time by rule, from Snakemake's log."""
import importlib.util
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("rule_times", REPO_ROOT / ".ci" / "rule_times.py")
rule_times = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rule_times)

LOG = """Select jobs to execute...
[Thu Nov 26 22:48:31 2026]
localrule corpus:
    output: results/corpus/train
    jobid: 5
    reason: Missing output files: results/corpus/train

[Thu Nov 26 22:48:32 2026]
rule pretrain:
    jobid: 7
    wildcards: variant=elmo-c, direction=forward

[Thu Nov 26 22:48:40 2026]
Finished jobid: 5 (Rule: corpus)
1 of 3 steps (33%) done
[Thu Nov 26 22:48:41 2026]
rule pretrain:
    jobid: 8
[Thu Nov 26 22:49:12 2026]
Finished jobid: 7 (Rule: pretrain)
[Thu Nov 26 22:49:31 2026]
Finished jobid: 8 (Rule: pretrain)
"""


def test_each_job_runs_from_its_rule_block_to_its_finished_line(tmp_path, capsys):
    assert sorted(rule_times.job_times(LOG.splitlines())) == [("corpus", 9.0), ("pretrain", 40.0), ("pretrain", 50.0)]
    (tmp_path / "run.log").write_text(LOG)
    assert rule_times.main([str(tmp_path / "run.log")]) == 0
    out = capsys.readouterr().out
    assert "(3 jobs, 60 s from the first job to the last)" in out
    assert out.index("| pretrain | 2 | 90 | 45.0 | 50 |") < out.index("| corpus | 1 | 9 | 9.0 | 9 |"), out
