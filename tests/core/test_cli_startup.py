"""The command line's start-up: a workflow job pays it once per process (twice under `with-gpus`)."""
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.mark.parametrize("argv", [["with-gpus", "0", "--", "true"], ["-v", "spec", "--help"]])
def test_a_command_line_builds_only_its_commands_arguments_without_torch(argv):
    """`task`'s arguments import every registered task (torch, scipy: ~3 s of CPU); a command
    line naming another command must not pay for them."""
    code = ("import sys; from elmoc.cli import build_parser; p = build_parser(sys.argv[1:]); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code, *argv], check=True, env={"PYTHONPATH": str(SRC)})


def test_the_named_command_and_a_bare_parser_keep_their_arguments():
    from elmoc.cli import build_parser

    args = build_parser(["task", "--task", "sst5", "--variant", "v", "--output", "o.json"]).parse_args(
        ["task", "--task", "sst5", "--variant", "v", "--output", "o.json"])
    assert (args.command, args.stale_checkpoint) == ("task", "set-aside")
    args = build_parser().parse_args(["with-gpus", "0", "--", "true"])
    assert args.command == "with-gpus"


def test_with_gpus_asks_a_finished_jobs_folder_for_its_checkpoint_without_torch(tmp_path):
    """After every job `elmoc with-gpus` reads the step of the job's checkpoint; a finished task or
    LM run has none, and finding that out must not import torch (every task, through
    elmoc.tasks.checkpoint)."""
    code = ("import sys; from pathlib import Path; from elmoc.attempts import checkpoint_step; "
            "assert checkpoint_step(Path(sys.argv[1])) is None; assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, env={"PYTHONPATH": str(SRC)})


def test_checkpoint_step_reads_the_checkpoint_the_trainers_write(tmp_path):
    from elmoc.attempts import checkpoint_step
    from elmoc.tasks.checkpoint import FORMAT as TASK_FORMAT
    from elmoc.model_file import save_checkpoint
    from elmoc.train.checkpoint import CHECKPOINT

    save_checkpoint(tmp_path / CHECKPOINT, {"step": 7}, fmt=TASK_FORMAT)
    assert checkpoint_step(tmp_path) == 7
