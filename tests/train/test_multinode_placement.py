"""The per-node torchrun agent of a multi-node SLURM job (elmoc.multinode, issue 48), from fake
SLURM variables and stand-in `squeue`/`scontrol` answers (CPU, no cluster)."""
from __future__ import annotations

import pytest

from elmoc import multinode
from elmoc.multinode import MultiNodeError, agent_command, agent_environment, placement, rendezvous_port


def fake_slurm(nodes, addr, calls):
    """A Runner answering squeue (the node list) and scontrol (hostnames, node address)."""
    def run(argv, env):
        calls.append((list(argv), env.get("SLURM_CONF")))
        if argv[0] == "squeue":
            return "n[1-%d]\n" % len(nodes)
        if argv[:3] == ["scontrol", "show", "hostnames"]:
            assert argv[3] in ("n[1-%d]" % len(nodes), ",".join(nodes))
            return "".join(n + "\n" for n in nodes)
        if argv[:3] == ["scontrol", "show", "node"]:
            return f"NodeName={argv[3]} Arch=x86_64 CoresPerSocket=1\n   NodeAddr={addr[argv[3]]} NodeHostName=h\n"
        raise AssertionError(argv)
    return run


def job_env(node_id, name, **extra):
    # what the SLURM executor's job step leaves (SLURM_JOB_ID only) plus what srun sets per task
    return {"SLURM_JOB_ID": "4711", "SLURM_NODEID": str(node_id), "SLURMD_NODENAME": name,
            "ELMOC_SLURM_CONF": "/x/slurm.conf", **extra}


def options(argv):
    return dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)


def test_every_node_dials_the_head_and_only_node_0_hosts():
    calls = []
    run = fake_slurm(["n1", "n2"], {"n1": "10.0.0.1", "n2": "10.0.0.2"}, calls)
    commands = {}
    for node_id, name in ((0, "n1"), (1, "n2")):
        where = placement(2, job_env(node_id, name), run)
        commands[name] = options(agent_command(where, 4, 300, ["-m", "elmoc.cli", "train"], log_dir="logs"))
    for name, opts in commands.items():
        assert opts["nnodes"] == "2" and opts["nproc-per-node"] == "4" and opts["rdzv-backend"] == "c10d"
        assert opts["rdzv-endpoint"] == f"10.0.0.1:{rendezvous_port(4711)}"  # the head's NodeAddr, not its name
        assert opts["rdzv-id"] == "elmoc-4711" and opts["shutdown-timeout"] == "300"
        assert opts["log-dir"] == f"logs/{name}"
        assert "SIGUSR1" in opts["signals-to-handle"]
    assert commands["n1"]["rdzv-conf"] == "is_host=true" and commands["n2"]["rdzv-conf"] == "is_host=false"
    # the job step dropped SLURM_JOB_NODELIST and SLURM_CONF: squeue finds the nodes, with the config passed on
    assert calls[0] == (["squeue", "-h", "-j", "4711", "-o", "%N"], "/x/slurm.conf")


def test_the_head_is_the_first_node_of_the_job_wherever_this_task_runs():
    run = fake_slurm(["gpu07", "gpu03"], {"gpu07": "10.1.0.7", "gpu03": "10.1.0.3"}, [])
    where = placement(2, job_env(1, "gpu03", SLURM_JOB_NODELIST="gpu07,gpu03"), run)
    assert where.nodes == ["gpu07", "gpu03"] and where.head_address == "10.1.0.7" and not where.is_host


def test_rendezvous_port_is_per_job_and_below_the_ephemeral_range():
    assert rendezvous_port(4711) != rendezvous_port(4712)
    assert all(20000 <= rendezvous_port(j) < 30000 for j in (0, 9999, 10000, 123456789))


def test_agent_environment():
    where = placement(2, job_env(1, "n2"), fake_slurm(["n1", "n2"], {"n1": "a", "n2": "b"}, []))
    env = agent_environment(where, job_env(1, "n2"))
    assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"  # restarts after a killed worker need it
    assert env["SLURM_CONF"] == "/x/slurm.conf"
    assert env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] == "[n2 rank ${rank}]:"


@pytest.mark.parametrize("env, message", [
    ({}, "needs a SLURM job"),
    ({"SLURM_JOB_ID": "5"}, "srun --ntasks-per-node=1"),
])
def test_refused_outside_a_slurm_task_in_one_line(env, message, capsys):
    ran = []
    status = multinode.main(["--nodes", "2", "--nproc-per-node", "1", "--", "-m", "elmoc.cli", "train"], env,
                            execute=lambda *a: ran.append(a))
    err = capsys.readouterr().err
    assert status == 1 and not ran and message in err and len(err.strip().splitlines()) == 1


def test_a_job_with_another_node_count_is_refused():
    with pytest.raises(MultiNodeError, match="has 3 node"):
        placement(2, job_env(0, "n1"), fake_slurm(["n1", "n2", "n3"], {"n1": "a"}, []))


def test_main_replaces_itself_with_the_agent():
    ran = []
    env = job_env(0, "n1")
    status = multinode.main(["--nodes", "2", "--nproc-per-node", "2", "--max-restarts", "1", "--", "-m", "elmoc.cli",
                             "train", "--spec", "s.yaml"], env,
                            run=fake_slurm(["n1", "n2"], {"n1": "127.0.0.1", "n2": "127.0.0.1"}, []),
                            execute=lambda path, argv, e: ran.append((argv, e)))
    assert status == 0
    argv, e = ran[0]
    assert argv[1:3] == ["-m", "torch.distributed.run"] and argv[-5:] == ["-m", "elmoc.cli", "train", "--spec", "s.yaml"]
    assert "--max-restarts=1" in argv and "--rdzv-conf=is_host=true" in argv
    assert e["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"


def fake_workflow(executor, remote=False, subprocess=False):
    from types import SimpleNamespace

    plugin = SimpleNamespace(name=executor) if executor else None
    return SimpleNamespace(executor_plugin=plugin, remote_exec=remote, subprocess_exec=subprocess)


def test_rule_resources_of_one_and_of_two_nodes():
    from elmoc.multinode import slurm_resources

    one = {"nodes": 1, "gpus": 2, "processes": 2, "threads": 4}
    assert slurm_resources(one, "v", fake_workflow("local")) == {
        "nodes": None, "tasks": None, "mpi": None, "tasks_per_gpu": None, "gres": None, "gpu": 2}
    two = {**one, "nodes": 2}
    for where in (fake_workflow("slurm"), fake_workflow("dryrun"), fake_workflow("local", remote=True),
                  fake_workflow("local", subprocess=True)):  # the submitter, a dry run, inside the job
        assert slurm_resources(two, "v", where) == {
            "nodes": 2, "tasks": 2, "mpi": "srun", "tasks_per_gpu": 0, "gres": "gpu:2", "gpu": 0}
    for where in (fake_workflow("local"), fake_workflow(None)):
        with pytest.raises(MultiNodeError, match=r"resources.pretrain.variants.v.nodes: 2 needs the SLURM executor"):
            slurm_resources(two, "v", where)


def test_rule_command_parts():
    from elmoc.multinode import agent_launcher, srun_prefix

    one = {"nodes": 1, "gpus": 0, "processes": 2, "threads": 3, "signal_lead_s": 60}
    assert srun_prefix(one) == "" and agent_launcher(one, "py", "d") is None
    two = {**one, "nodes": 2}
    assert srun_prefix(two) == ("env ${ELMOC_SLURM_CONF:+SLURM_CONF=$ELMOC_SLURM_CONF} srun --nodes=2 --ntasks=2"
                                " --ntasks-per-node=1 --cpus-per-task=6 --kill-on-bad-exit=1 ")
    assert agent_launcher(two, "py", "out/node-logs") == (
        "py -m elmoc.multinode --nodes 2 --nproc-per-node 2 --shutdown-timeout 60 --log-dir out/node-logs"
        " -- -m elmoc.cli")
