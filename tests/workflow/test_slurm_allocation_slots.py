"""`elmoc with-gpus` inside a SLURM allocation (issue 19.5): several Snakemake jobs in one
`salloc --gpus=4` share its devices through slots; the SLURM executor's one-job-per-
allocation case passes the job's own GPUs through."""
import os

from elmoc.devices import GpuSlots, job_environment, slurm_lock_dir

ALLOCATION = {"SLURM_JOB_ID": "4242", "SLURMD_NODENAME": "node7", "CUDA_VISIBLE_DEVICES": "0,1,2,3",
              "SLURM_GPUS_ON_NODE": "4", "SLURM_JOB_GPUS": "0,1,2,3"}


def _devices(env):
    return env["CUDA_VISIBLE_DEVICES"].split(",")


def _close(fds):
    for fd in fds:
        os.close(fd)


def test_jobs_in_one_allocation_get_disjoint_devices(tmp_path):
    first, fds1 = job_environment(2, tmp_path, ALLOCATION)
    second, fds2 = job_environment(2, tmp_path, ALLOCATION)
    try:
        assert fds1 and fds2
        assert set(_devices(first)).isdisjoint(_devices(second))
        assert set(_devices(first)) | set(_devices(second)) == {"0", "1", "2", "3"}
        slots = GpuSlots(slurm_lock_dir(tmp_path, ALLOCATION), ["0", "1", "2", "3"])
        assert slots.try_acquire(1) is None  # a 1-GPU task job waits while both run
        _close(fds1)
        fds1 = []
        task, fds3 = job_environment(1, tmp_path, ALLOCATION)
        assert len(_devices(task)) == 1 and _devices(task)[0] in _devices(first)
        assert set(_devices(task)).isdisjoint(_devices(second))
        _close(fds3)
    finally:
        _close(fds1 + fds2)
    # the slots live in a folder of this host and this SLURM job only
    assert (tmp_path / "slurm-node7-4242").is_dir()
    other_job = {**ALLOCATION, "SLURM_JOB_ID": "4243"}
    assert slurm_lock_dir(tmp_path, other_job) != slurm_lock_dir(tmp_path, ALLOCATION)


def test_a_job_whose_own_allocation_is_its_request_passes_through(tmp_path):
    own = {"SLURM_JOB_ID": "77", "CUDA_VISIBLE_DEVICES": "2,3", "SLURM_GPUS_ON_NODE": "2"}
    env, fds = job_environment(2, tmp_path, own)
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3" and fds == []
    assert not any(tmp_path.iterdir())  # nothing locked
    # SLURM_JOB_GPUS or SLURM_GPUS ([type:]count) say the same when SLURM_GPUS_ON_NODE is absent
    for key, value in (("SLURM_JOB_GPUS", "2,3"), ("SLURM_GPUS", "a100:2")):
        env, fds = job_environment(2, tmp_path, {"SLURM_JOB_ID": "77", "CUDA_VISIBLE_DEVICES": "2,3", key: value})
        assert env["CUDA_VISIBLE_DEVICES"] == "2,3" and fds == []


def test_a_zero_gpu_job_in_an_allocation_sees_no_device(tmp_path):
    env, fds = job_environment(0, tmp_path, ALLOCATION)
    assert env["CUDA_VISIBLE_DEVICES"] == "" and fds == []
