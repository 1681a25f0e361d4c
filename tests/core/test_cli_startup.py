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
