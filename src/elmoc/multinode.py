"""One language model over several nodes: the per-node torchrun agent of a SLURM job (issue 48).

A pretraining variant with ``resources.pretrain.variants.<v>.nodes: N`` (N > 1) is one SLURM
job over N nodes. The rule's command starts one task per node (``srun --ntasks-per-node=1
--kill-on-bad-exit=1``), and each task runs ``elmoc with-gpus G -- python -m elmoc.multinode
...``: this module reads where it runs from SLURM and replaces itself with a torchrun agent
(``--nnodes N --nproc-per-node G``) that joins the others through c10d rendezvous:

* the rendezvous endpoint is the **head** node's address (the first node of the job's node
  list, ``NodeAddr`` from ``scontrol show node``) and a port derived from the job id
  (:func:`rendezvous_port`, below the ephemeral range), the rendezvous id is the job id: a
  requeued or retried job gets a new id and a fresh rendezvous;
* ``is_host`` is true on node 0's agent only (``SLURM_NODEID``), so exactly one agent hosts
  the rendezvous store, on the address the others dial;
* ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``: with torch's default (the workers reuse the
  rendezvous store) every restart round after a killed worker failed on the test cluster
  (gloo connected to the previous round's addresses; pytorch/pytorch#167288 reports the same
  with NCCL); with it, the agents restart all workers and they resume from the checkpoint;
* ``--max-restarts`` (a killed worker restarts the whole group), the stop signals the agent
  passes on (SLURM's ``--signal=USR1@...``) and ``--shutdown-timeout`` (the time the workers
  get to save) as on one node (:data:`elmoc.process_tree.TORCHRUN_SIGNALS`);
* each agent tees its workers' output with a prefix naming the node and the global rank
  (``[n2 rank 3]:``) and keeps one log file per node and local rank under ``--log-dir``
  (``<log-dir>/<node>/...``).

What needs no change per node, and why: global rank 0 (wherever c10d placed it: not always
on the head node) writes checkpoints and logs, into the output folder on the shared file
system that every node reads on resume; stop signals only set a flag
(:mod:`elmoc.train.signals`), so a signal that reaches a worker twice (from SLURM and from
its agent) stops it once; GPU slots are keyed by ``SLURMD_NODENAME`` (never the host name:
two SLURM nodes may share a host) in :func:`elmoc.devices.slurm_lock_dir`.

Outside a SLURM job (no ``SLURM_JOB_ID``), or outside an ``srun`` task (no ``SLURM_NODEID``),
the launcher refuses in one line: a local run has one node.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from elmoc.errors import ConfigError
from elmoc.process_tree import TORCHRUN_SIGNALS

PORT_BASE, PORT_SPAN = 20000, 10000  # rendezvous ports 20000-29999: below Linux's ephemeral range (32768-)
SHARE_STORE_ENV = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
# the SLURM executor's job step drops every SLURM_* variable, SLURM_CONF included: the rule's
# environment carries the cluster's config path under this name to `srun` and `scontrol`
SLURM_CONF_ENV = "ELMOC_SLURM_CONF"
PREFIX_ENV = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"
DEFAULT_MAX_RESTARTS = 3

Runner = Callable[[Sequence[str], Mapping[str, str]], str]


class MultiNodeError(ConfigError):
    """A multi-node launch that cannot work where it was started (one line)."""


@dataclass(frozen=True)
class Placement:
    """Where this node's agent sits in the job."""

    job_id: str
    nodes: list[str]  # the job's nodes, head first
    node_rank: int  # SLURM_NODEID: 0 on the head node
    node_name: str  # SLURMD_NODENAME
    head_address: str
    port: int

    @property
    def is_host(self) -> bool:
        return self.node_rank == 0


def rendezvous_port(job_id: str | int) -> int:
    """The job's c10d port: ``20000 + job id mod 10000`` (the same on every node of the job)."""
    return PORT_BASE + int(job_id) % PORT_SPAN


def slurm_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with ``SLURM_CONF`` put back from :data:`SLURM_CONF_ENV` when the job step lost it."""
    env = dict(environ)
    if not env.get("SLURM_CONF") and env.get(SLURM_CONF_ENV):
        env["SLURM_CONF"] = env[SLURM_CONF_ENV]
    return env


def _run(argv: Sequence[str], environ: Mapping[str, str]) -> str:
    try:
        done = subprocess.run(list(argv), env=dict(environ), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise MultiNodeError(f"`{shlex.join(argv)}` failed ({e}); is this a SLURM node with its commands on PATH?") from None
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise MultiNodeError(f"`{shlex.join(argv)}` failed: {why}")
    return done.stdout


def job_nodes(environ: Mapping[str, str], run: Runner = _run) -> list[str]:
    """The job's node names in SLURM's order (head first): ``SLURM_JOB_NODELIST``, else
    ``squeue`` (the SLURM executor's job step removes the variable), expanded by ``scontrol``."""
    env = slurm_environment(environ)
    compact = env.get("SLURM_JOB_NODELIST", "").strip()
    if not compact:
        compact = run(["squeue", "-h", "-j", env["SLURM_JOB_ID"], "-o", "%N"], env).strip()
    if not compact:
        raise MultiNodeError(f"SLURM job {env['SLURM_JOB_ID']} has no node list (squeue shows none)")
    return [line.strip() for line in run(["scontrol", "show", "hostnames", compact], env).splitlines() if line.strip()]


def node_address(node: str, environ: Mapping[str, str], run: Runner = _run) -> str:
    """The address SLURM reaches ``node`` at (its ``NodeAddr``; the name itself when unset)."""
    found = re.search(r"\bNodeAddr=(\S+)", run(["scontrol", "show", "node", node], slurm_environment(environ)))
    return found.group(1) if found else node


def placement(nodes: int, environ: Mapping[str, str], run: Runner = _run) -> Placement:
    """Where this agent runs, from the SLURM task's environment; a one-line
    :class:`MultiNodeError` when it is not one task per node of an N-node SLURM job."""
    if not environ.get("SLURM_JOB_ID"):
        raise MultiNodeError(f"nodes: {nodes} needs a SLURM job (no SLURM_JOB_ID here): run it through the"
                             " SLURM profile (docs/slurm.md), or set resources.pretrain.variants.<variant>.nodes"
                             " to 1 for a local run")
    if not environ.get("SLURM_NODEID", "").isdigit() or not environ.get("SLURMD_NODENAME"):
        raise MultiNodeError("not started as an srun task (SLURM_NODEID or SLURMD_NODENAME unset): start one"
                             " task per node with `srun --ntasks-per-node=1 --kill-on-bad-exit=1`")
    names = job_nodes(environ, run)
    if len(names) != nodes:
        raise MultiNodeError(f"SLURM job {environ['SLURM_JOB_ID']} has {len(names)} node(s) ({','.join(names)}),"
                             f" the launch asks for {nodes}: submit it with --nodes={nodes}")
    return Placement(job_id=environ["SLURM_JOB_ID"], nodes=names, node_rank=int(environ["SLURM_NODEID"]),
                     node_name=environ["SLURMD_NODENAME"], head_address=node_address(names[0], environ, run),
                     port=rendezvous_port(environ["SLURM_JOB_ID"]))


def agent_options(where: Placement, processes: int, shutdown_timeout_s: int,
                  max_restarts: int = DEFAULT_MAX_RESTARTS, log_dir: str | Path | None = None) -> list[str]:
    """``torch.distributed.run`` options of this node's agent."""
    options = [f"--nnodes={len(where.nodes)}", f"--nproc-per-node={int(processes)}", "--rdzv-backend=c10d",
               f"--rdzv-endpoint={where.head_address}:{where.port}", f"--rdzv-id=elmoc-{where.job_id}",
               f"--rdzv-conf=is_host={'true' if where.is_host else 'false'}", f"--max-restarts={int(max_restarts)}",
               f"--signals-to-handle={TORCHRUN_SIGNALS}", f"--shutdown-timeout={int(shutdown_timeout_s)}", "--tee=3"]
    if log_dir is not None:
        options.append(f"--log-dir={Path(log_dir) / re.sub(r'[^A-Za-z0-9_.-]', '_', where.node_name)}")
    return options


def agent_environment(where: Placement, environ: Mapping[str, str]) -> dict[str, str]:
    """The agent's environment: the shared-store setting, the log-line prefix and SLURM_CONF."""
    env = slurm_environment(environ)
    env[SHARE_STORE_ENV] = "1"
    env[PREFIX_ENV] = f"[{where.node_name} rank ${{rank}}]:"
    return env


def agent_command(where: Placement, processes: int, shutdown_timeout_s: int, program: Sequence[str],
                  max_restarts: int = DEFAULT_MAX_RESTARTS, log_dir: str | Path | None = None) -> list[str]:
    """``python -m torch.distributed.run <options> <program...>`` for this node."""
    return [sys.executable, "-m", "torch.distributed.run",
            *agent_options(where, processes, shutdown_timeout_s, max_restarts, log_dir), *program]


# --- the pretrain rule's side (workflow/rules/pretrain.smk) ---------------------------------
# executors that may run a multi-node job: the SLURM executor, the job step inside its job, a dry run
SLURM_EXECUTORS = frozenset({"slurm", "slurm-jobstep", "dryrun"})


def check_executor(job: Mapping, variant: str, executor: str | None) -> None:
    """Refuse a multi-node job (``job["nodes"] > 1``) anywhere but under the SLURM executor."""
    if int(job.get("nodes", 1)) > 1 and executor not in SLURM_EXECUTORS:
        raise MultiNodeError(f"config resources.pretrain.variants.{variant}.nodes: {job['nodes']} needs the SLURM"
                             f" executor (--workflow-profile profiles/slurm), this run uses {executor or 'none'}:"
                             " set nodes to 1 for a local run")


def executor_name(workflow) -> str | None:
    """The executor of a Snakemake ``workflow`` object, as far as a multi-node job cares: inside a
    submitted job (remote mode, or the local subprocess in which an ``mpi`` job's step runs the rule)
    its submitter already checked, so it counts as the SLURM job step."""
    if workflow.remote_exec or workflow.subprocess_exec:
        return "slurm-jobstep"
    return workflow.executor_plugin.name if workflow.executor_plugin else None


def slurm_resources(job: Mapping, variant: str, workflow) -> dict:
    """The rule's resources for a multi-node job (all None, i.e. unset, for one node): N nodes and
    N tasks (one agent each) started by the command's own ``srun`` (``mpi``: the job step then runs
    the command as it is), the GPUs per node as ``--gres=gpu:G`` (``gpu`` 0: the plugin's
    ``--gpus`` counts the whole job) and no ``--ntasks-per-gpu`` (``tasks_per_gpu`` 0)."""
    check_executor(job, variant, executor_name(workflow))
    nodes = int(job.get("nodes", 1))
    if nodes == 1:
        return {"nodes": None, "tasks": None, "mpi": None, "tasks_per_gpu": None, "gres": None, "gpu": job["gpus"]}
    return {"nodes": nodes, "tasks": nodes, "mpi": "srun", "tasks_per_gpu": 0,
            "gres": f"gpu:{job['gpus']}" if job["gpus"] else None, "gpu": 0}


def srun_prefix(job: Mapping) -> str:
    """The start of a multi-node job's command: one task per node, the whole step killed when one
    ends badly (else the other agent waits in its exit barrier until the time limit); ``SLURM_CONF``
    back from :data:`SLURM_CONF_ENV` (the job step drops it). "" for one node."""
    nodes = int(job.get("nodes", 1))
    if nodes == 1:
        return ""
    cpus = int(job["threads"]) * int(job["processes"])
    return (f"env ${{{SLURM_CONF_ENV}:+SLURM_CONF=${SLURM_CONF_ENV}}} srun --nodes={nodes} --ntasks={nodes}"
            f" --ntasks-per-node=1 --cpus-per-task={cpus} --kill-on-bad-exit=1 ")


def agent_launcher(job: Mapping, python: str, log_dir: str) -> str | None:
    """``python -m elmoc.multinode ... -- -m elmoc.cli`` for a multi-node job (None for one node)."""
    nodes = int(job.get("nodes", 1))
    if nodes == 1:
        return None
    return (f"{python} -m elmoc.multinode --nodes {nodes} --nproc-per-node {int(job['processes'])}"
            f" --shutdown-timeout {int(job['signal_lead_s'])} --log-dir {shlex.quote(log_dir)} -- -m elmoc.cli")


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None, run: Runner = _run,
         execute: Callable[[str, list[str], dict[str, str]], None] = os.execvpe) -> int:
    """``python -m elmoc.multinode --nodes N --nproc-per-node G [...] -- PROGRAM ARGS``: replace
    this process with this node's torchrun agent running PROGRAM (``-m elmoc.cli train ...``)."""
    parser = argparse.ArgumentParser(prog="python -m elmoc.multinode", description=main.__doc__)
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--nproc-per-node", type=int, required=True)
    parser.add_argument("--shutdown-timeout", type=int, default=30)
    parser.add_argument("--max-restarts", type=int, default=DEFAULT_MAX_RESTARTS)
    parser.add_argument("--log-dir", default=None)
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    environ = dict(os.environ if environ is None else environ)
    if not program:
        parser.error("no program given: ... -- -m elmoc.cli train ...")
    try:
        where = placement(args.nodes, environ, run)
    except MultiNodeError as e:
        print(f"elmoc multinode: error: {e}", file=sys.stderr)
        return 1
    command = agent_command(where, args.nproc_per_node, args.shutdown_timeout, program, args.max_restarts,
                            args.log_dir)
    print(f"elmoc multinode: node {where.node_name} ({where.node_rank} of {len(where.nodes)}), rendezvous"
          f" {where.head_address}:{where.port} id elmoc-{where.job_id}{' (host)' if where.is_host else ''}",
          file=sys.stderr, flush=True)
    execute(command[0], command, agent_environment(where, environ))
    return 0  # reached only with a stand-in `execute` (the tests)


if __name__ == "__main__":
    sys.exit(main())
