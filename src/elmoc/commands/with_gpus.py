"""``elmoc with-gpus``: run a command on GPUs no other job of the workflow uses."""
from __future__ import annotations

import argparse

NAME = "with-gpus"
GROUP = "internals"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc with-gpus 1 -- elmoc train --spec spec.yaml --direction forward --output-dir out --device cuda'
HELP = "run a command with N GPUs of its own (sets CUDA_VISIBLE_DEVICES from lock-file slots)"
DESCRIPTION = (
    "Takes N free GPU slots (one lock file per device under --lock-dir), sets "
    "CUDA_VISIBLE_DEVICES to those devices and runs the command as a child in a process "
    "group of its own; waits while too few are free. SIGTERM, SIGINT, SIGUSR1 and SIGHUP "
    "are passed to every process of the command's tree (torchrun's workers included), and "
    "the slots are freed only when the last of those processes has exited. Exits with the "
    "command's status, except 75 when every `elmoc train` process of the job stopped on a "
    "signal or its deadline and saved (torchrun itself exits 1 then). The devices on offer "
    "are the entries of CUDA_VISIBLE_DEVICES if set, else every CUDA device. Inside a SLURM "
    "job whose own allocation is N GPUs they pass through untouched; in a larger allocation "
    "(salloc) the jobs share its devices through slots keyed by host and job id. N = 0 hides "
    "every GPU. If with-gpus itself is killed (SIGKILL), its command is sent SIGTERM. For an "
    "`elmoc train` job it appends the job's outcome (done, stopped, or crashed with every failed "
    "rank's error) to the output folder's attempts.jsonl. Example: elmoc with-gpus 2 -- python -m "
    "torch.distributed.run --standalone "
    "--nproc-per-node 2 --signals-to-handle SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1 -m elmoc.cli train ..."
)


# the wrapped command checks its own paths
INPUTS = ()  # args naming files read; an output among them is refused (cli)
OUTPUTS = ()

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = "elmoc with-gpus [--lock-dir DIR] [--grace SECONDS] N -- COMMAND [ARGS...]"
    parser.add_argument("--lock-dir", default=".snakemake/gpu-slots",
                        help="folder of slot lock files shared by competing jobs (default .snakemake/gpu-slots);"
                             " options go before N")
    parser.add_argument("--grace", type=float, default=600.0, metavar="SECONDS",
                        help="processes the command leaves behind (a killed torchrun agent's workers, saving) may "
                             "run this long after it ends, then are killed (default 600)")
    parser.add_argument("gpus", type=int, metavar="N", help="number of GPUs the command needs (0 = none)")
    parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the command and its arguments")


def run(args: argparse.Namespace) -> int:
    from elmoc.attempts import checkpoint_step, record_job_attempt
    from elmoc.devices import run_with_gpus

    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv

    def record(exit_dir, status):  # the job's outcome, for a training attempt rank 0 announced
        record_job_attempt(exit_dir, status, checkpoint_step)

    return run_with_gpus(args.gpus, argv, args.lock_dir, grace_s=args.grace, on_exit=record)
