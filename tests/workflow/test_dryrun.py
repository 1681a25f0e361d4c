"""`snakemake -n` for every shipped config and profile, and config validation errors."""
import re
import subprocess
import sys

import pytest

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

CONFIGS = ["config/config.yaml", "config/shared-data.yaml", "config/paper.yaml"]


def workdir(tmp_path):
    """A fresh working directory with ../shared pointing at the real shared folder, so
    config paths like ../shared/data/... resolve as they do from the repository."""
    work = tmp_path / "work"
    work.mkdir()
    shared = REPO_ROOT.parent / "shared"
    if shared.exists():
        (tmp_path / "shared").symlink_to(shared)
    return work


def snakemake(*args, cwd=REPO_ROOT):
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("configfile", CONFIGS)
def test_dry_run_default_profile(configfile, tmp_path):
    # a fresh --directory so results of earlier runs do not hide jobs
    if "shared" in configfile and not (REPO_ROOT.parent / "shared" / "data").is_dir():
        pytest.skip("../shared/data is absent")
    tmp_path = workdir(tmp_path)
    r = snakemake("-n", "--cores", "2", "--snakefile", str(REPO_ROOT / "Snakefile"),
                  "--configfile", str(REPO_ROOT / configfile), "--directory", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "pretrain" in r.stdout and "lm_spec" in r.stdout


@pytest.mark.slow
@pytest.mark.parametrize("configfile", CONFIGS)
def test_dry_run_slurm_profile(configfile, tmp_path):
    if "shared" in configfile and not (REPO_ROOT.parent / "shared" / "data").is_dir():
        pytest.skip("../shared/data is absent")
    tmp_path = workdir(tmp_path)
    r = snakemake("-n", "--workflow-profile", str(REPO_ROOT / "profiles/slurm"),
                  "--snakefile", str(REPO_ROOT / "Snakefile"), "--configfile", str(REPO_ROOT / configfile),
                  "--directory", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("override, named", [
    ("pretrain:\n  varients: {elmo-c: {}}\n", "varients"),
    ("resources:\n  pretrain:\n    variants: {elmo-x: {mem_mb: 100}}\n", "resources.pretrain.variants names ['elmo-x']"),
])
def test_bad_config_is_named(tmp_path, override, named):
    """A misspelled key (schema) and a resources entry for an unknown variant stop the run naming it."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(override)
    r = snakemake("-n", "--cores", "1", "--snakefile", str(REPO_ROOT / "Snakefile"),
                  "--configfile", str(REPO_ROOT / "config/config.yaml"), str(bad),
                  "--directory", str(tmp_path), cwd=tmp_path)
    assert r.returncode != 0
    assert named in r.stdout + r.stderr


def test_profiles_live_in_one_place():
    """The profiles are under profiles/ (default: loaded by itself; verbose and slurm: named); the
    SLURM profile's old place, workflow/profiles/slurm, still names it, as a link."""
    assert {p.name for p in (REPO_ROOT / "profiles").iterdir()} == {"default", "slurm", "verbose"}
    old = REPO_ROOT / "workflow/profiles/slurm"
    assert old.is_symlink() and old.resolve() == (REPO_ROOT / "profiles/slurm").resolve()


@pytest.mark.slow
def test_default_profile_is_picked_up(tmp_path):
    """profiles/default beside the Snakefile is loaded without being named: Snakemake says so,
    and the console stays quiet (issue 52): no shell commands (a dry run keeps its plan's rule
    blocks); profiles/verbose prints them."""
    tmp_path = workdir(tmp_path)
    args = ("-n", "--snakefile", str(REPO_ROOT / "Snakefile"), "--configfile", str(REPO_ROOT / "config/config.yaml"),
            "--directory", str(tmp_path))
    r = snakemake(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"Using workflow specific profile {REPO_ROOT / 'profiles/default'}" in r.stdout + r.stderr
    assert "Shell command:" not in r.stdout + r.stderr and "rule pretrain:" in r.stdout
    verbose = snakemake(*args, "--workflow-profile", str(REPO_ROOT / "profiles/verbose"), cwd=tmp_path)
    assert verbose.returncode == 0, verbose.stdout[-3000:] + verbose.stderr[-3000:]
    assert "Shell command:" in verbose.stdout and "rule pretrain:" in verbose.stdout


@pytest.mark.slow
def test_paper_jobs_ask_the_config_for_threads_gpus_and_memory(tmp_path):
    """config/paper.yaml: per-variant memory, GPUs per job, `elmoc with-gpus` around GPU jobs,
    thread counts from the config even when --cores is smaller. ELMo-A is one joint bi-LM on
    4 GPUs, ELMo-C's forward LM one of two direction jobs on 2 GPUs each (footnote 7)."""
    tmp_path = workdir(tmp_path)
    r = snakemake("-n", "-p", "--cores", "1", "--snakefile", str(REPO_ROOT / "Snakefile"),
                  "--configfile", str(REPO_ROOT / "config/paper.yaml"), "--directory", str(tmp_path),
                  "results/paper/lm/elmo-a/joint/model.pt", "results/paper/lm/elmo-c/forward/model.pt", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    jobs = {}
    for job in r.stdout.split("rule pretrain:")[1:]:
        variant = re.search(r"wildcards: variant=([\w-]+), direction=(\w+)", job)
        jobs[variant[1], variant[2]] = job
    assert sorted(jobs) == [("elmo-a", "joint"), ("elmo-c", "forward")]
    joint, forward = jobs["elmo-a", "joint"], jobs["elmo-c", "forward"]
    assert "mem_mb=192000" in joint and "gpu=4, runtime=1440" in joint
    assert "with-gpus --lock-dir .snakemake/gpu-slots 4 -- " in joint
    assert "--nproc-per-node=4 -m elmoc.cli train --spec results/paper/lm/elmo-a/spec.yaml --direction joint" in joint
    assert "--output-dir results/paper/lm/elmo-a/joint --device cuda --threads 4" in joint
    assert "mem_mb=64000" in forward and "gpu=2, runtime=1440" in forward
    assert "with-gpus --lock-dir .snakemake/gpu-slots 2 -- " in forward
    assert "--nproc-per-node=2 -m elmoc.cli train" in forward and "--device cuda --threads 4" in forward
    assert "checkpoint.pt" not in r.stdout.split("rule pretrain:", 1)[1]


@pytest.mark.slow
def test_joint_variants_train_once_and_feed_both_directions(tmp_path):
    """config/config.yaml: the softmax family (ELMo, ELMo-A, ELMo-Sub) is one joint pretraining
    job each, on CPU in one process; ELMo-C keeps two; extraction reads a joint model.pt as both
    directions, and the CNN table takes ELMo's shared char-CNN from its joint model.pt."""
    tmp_path = workdir(tmp_path)
    r = snakemake("-n", "-p", "--cores", "2", "--snakefile", str(REPO_ROOT / "Snakefile"),
                  "--configfile", str(REPO_ROOT / "config/config.yaml"), "--directory", str(tmp_path),
                  "results/demo/features/elmo-a/sentiment.hdf5", "results/demo/features/elmo-c/sentiment.hdf5",
                  "results/demo/vectors/cnn.npy", "results/demo/lm/elmo-sub/joint/heldout.json", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    train = sorted(re.search(r"--output-dir (\S+)", c)[1] for c in r.stdout.splitlines() if " train --spec " in c)
    assert train == ["results/demo/lm/elmo-a/joint", "results/demo/lm/elmo-c/backward", "results/demo/lm/elmo-c/forward",
                     "results/demo/lm/elmo-sub/joint", "results/demo/lm/elmo/joint"]
    assert all("torch.distributed.run" not in c and "--device cpu" in c
               for c in r.stdout.splitlines() if " train --spec " in c)
    joint = "results/demo/lm/elmo-a/joint/model.pt"
    assert f"extract --forward {joint} --backward {joint} --sentences results/demo/tasks/sentiment/sentences.txt" in r.stdout
    assert ("extract --forward results/demo/lm/elmo-c/forward/model.pt --backward results/demo/lm/elmo-c/backward/model.pt"
            in r.stdout)
    assert "results/demo/lm/elmo/joint/model.pt" in r.stdout.split("rule cnn_table:", 1)[1].split("rule ", 1)[0]


@pytest.mark.slow
def test_paper_opt_in_variants_join_every_stage(tmp_path):
    """config/paper.yaml with every Transformer preset listed in pretrain.extra_variants: each is
    pretrained (TRANS BASE / LARGE: CONT and FIXED as two direction jobs of 2 GPUs, the softmax
    family as one joint job of 4; GPT, uni-directional as the paper's: one forward job of 2 GPUs,
    extracted from its forward model.pt alone), extracted and scored on every task like the
    paper's variants."""
    import yaml

    config = yaml.safe_load((REPO_ROOT / "config/paper.yaml").read_text())
    extra = [f"{size}-{kind}" for size in ("trans-base", "trans-large", "gpt")
             for kind in ("c", "fixed", "sub", "a", "sampled")]
    config["pretrain"]["extra_variants"] = extra
    work = workdir(tmp_path)
    (tmp_path / "paper-extra.yaml").write_text(yaml.safe_dump(config))
    r = snakemake("-n", "-p", "--cores", "2", "--resources", "gpu=4", "--snakefile", str(REPO_ROOT / "Snakefile"),
                  "--configfile", str(tmp_path / "paper-extra.yaml"), "--directory", str(work), cwd=work)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    extracts = lambda v: len([c for c in lines if f" extract --forward results/paper/lm/{v}/" in c])  # noqa: E731
    assert extracts("elmo-c") >= 2  # the tasks whose data the paper config has (the others wait for data)
    for name in extra:
        train = [c for c in lines if " train --spec " in c and f"--output-dir results/paper/lm/{name}/" in c]
        if name.startswith("gpt-"):  # one forward LM, whatever the output layer
            assert len(train) == 1 and "--direction forward" in train[0], name
            assert "--nproc-per-node=2" in train[0], name
            extract = [c for c in lines if f" extract --forward results/paper/lm/{name}/forward/model.pt " in c]
            assert len(extract) == extracts(name) and not any("--backward" in c for c in extract), name
        else:
            joint = name.split("-")[-1] in ("sub", "a", "sampled")
            assert len(train) == (1 if joint else 2), name
            assert all(f"--nproc-per-node={4 if joint else 2}" in c for c in train), name
        assert extracts(name) == extracts("elmo-c"), name
        assert any(f"results/paper/features/{name}/" in c and " task --task " in c for c in lines), name


@pytest.mark.slow
def test_paper_tasks_read_the_paper_data_as_the_paper_configurations(tmp_path):
    """config/paper.yaml (issue 31): SRL reads the v12 split of a conll-formatted-ontonotes-5.0
    data directory (its split directories are the jobs' inputs), NER looks words up without
    lowercasing, SNLI is tokenized by spaCy as AllenNLP's reader, extraction decides sentence
    boundaries by the model's kind."""
    import json

    work = workdir(tmp_path)
    data = tmp_path / "conll-formatted-ontonotes-5.0" / "data"
    for split in ("train", "development", "test", "conll-2012-test"):
        (data / split / "data" / "english").mkdir(parents=True)
    (tmp_path / "extra.yaml").write_text(f"tasks:\n  srl:\n    data_dir: {data}\n")
    r = snakemake("-n", "-p", "--cores", "1", "--snakefile", str(REPO_ROOT / "Snakefile"),
                  "--configfile", str(REPO_ROOT / "config/paper.yaml"), str(tmp_path / "extra.yaml"),
                  "--directory", str(work), "results/paper/tasks/srl/sentences.txt", "results/paper/tasks/ner/fasttext/seed1.json",
                  "results/paper/tasks/snli/sentences.txt", "results/paper/features/elmo-c/sst5.hdf5", cwd=work)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    sections = {m[1]: json.loads(m[2]) for m in re.finditer(r"--task (\w+) --section-json '([^']*)'", r.stdout)}
    assert sections["srl"]["data_dir"] == str(data)
    assert sections["srl"]["splits"] == {"train": "train", "dev": "development", "test": "test"}
    srl_job = next(job for job in r.stdout.split("rule task_sentences:")[1:] if "wildcards: task=srl" in job)
    assert f"{data}/train, {data}/development, {data}/test" in srl_job  # the v12 splits are its inputs
    assert sections["ner"]["lowercase"] is False
    assert sections["snli"]["tokenizer"] == "spacy"
    assert re.search(r"""extract .*--section-json '\{[^']*"boundaries": "auto""", r.stdout)
