"""`elmoc distill` (issue 36.1): a student reproduces a trained teacher through the one loop.

The teacher is a 2-layer cosine LM trained by `elmoc train` on the tiny corpus
(tests/tiny_corpus.py); students are distilled from its model.pt files in-process through
the CLI.  Checked: the layer map, a same-size student initialised from the teacher starting
at distillation loss zero, a stopped and resumed distillation equal to an uninterrupted one
(bit-exact, carried state and projections included), the student's model.pt being an
ordinary LM that exports and embeds, and one line for each kind of bad input.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
import yaml
from test_checkpoint_resume import block_on_second_shard, wait_for_reader
from tiny_corpus import ELMOC, sentences, tiny_spec, write_workdir

from elmoc.cli import main
from elmoc.config import STUDENT_KEYS, STUDENT_WORKFLOW_KEYS, load_yaml, resolve_student, resolve_variant
from elmoc.errors import ConfigError
from elmoc.data.batches import LMBatch, shard_order
from elmoc.lm import LanguageModel
from elmoc.model_file import load_checkpoint
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.train.distill import DistillationLM, DistillSettings, default_layer_map, initialise_from_teacher, layer_distance

TEACHER_STEPS, STUDENT_STEPS = 8, 6


def spec_with(base: dict, **encoder) -> dict:
    return {**base, "encoder": {**base["encoder"], **encoder}}


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """A work folder with a trained 2-layer teacher in both directions (teacher/<direction>/model.pt)
    and its spec (carried state, recurrent dropout 0 so a copy of it is an exact copy)."""
    root = tmp_path_factory.mktemp("distill")
    rng = np.random.default_rng(0)
    spec = spec_with(tiny_spec("teacher", {"type": "cosine", "vectors": "vec.npy"}, batch_size=2, bptt=5,
                               checkpoint_every=2, eval_every=0, eval_batch_size=4),
                     num_layers=2, recurrent_dropout=0.0)
    write_workdir(root, [sentences(rng, 20), sentences(rng, 20)], sentences(np.random.default_rng(1), 8), spec, rng)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("ELMOC_NATIVE_LSTM", "0")
        for direction in ("forward", "backward"):
            assert main(["train", "--spec", "spec.yaml", "--direction", direction, "--output-dir",
                         f"teacher/{direction}", "--threads", "1", "--max-steps", str(TEACHER_STEPS)]) == 0
    return {"root": root, "spec": spec}


@pytest.fixture
def work(teacher, monkeypatch):
    monkeypatch.chdir(teacher["root"])
    monkeypatch.setenv("ELMOC_NATIVE_LSTM", "0")
    return teacher


def distill(out: str, spec: dict, direction: str = "forward", section: dict | None = None,
            steps: int = STUDENT_STEPS, teacher: str | None = None, process: bool = False) -> int:
    """`elmoc distill` in this process (its output lock is then held until the tests end), or
    with ``process`` in its own."""
    argv = distill_argv(out, spec, direction, section, steps, teacher)
    if process:
        done = subprocess.run(ELMOC + argv, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert not done.returncode, done.stderr
        return done.returncode
    return main(argv)


def distill_argv(out: str, spec: dict, direction: str = "forward", section: dict | None = None,
                 steps: int = STUDENT_STEPS, teacher: str | None = None) -> list[str]:
    """The arguments of `elmoc distill` of ``spec`` (written beside ``out``) into ``out``."""
    spec_path = Path(out.replace("/", "-") + ".yaml")
    spec_path.write_text(yaml.safe_dump(spec))
    return ["distill", "--spec", str(spec_path), "--teacher", teacher or f"teacher/{direction}/model.pt",
            "--direction", direction, "--output-dir", out, "--threads", "1", "--max-steps", str(steps),
            "--section-json", json.dumps(section or {})]


def train_records(out: str) -> list[dict]:
    lines = (Path(out) / "train_log.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["event"] == "train"]


def test_layer_map_is_input_to_input_top_to_top_and_even_between():
    assert default_layer_map(3, 3) == [0, 1, 2]
    assert default_layer_map(2, 3) == [0, 2]
    assert default_layer_map(3, 5) == [0, 2, 4]
    assert default_layer_map(2, 5) == [0, 4]
    assert default_layer_map(5, 3) == [0, 1, 1, 2, 2]


def test_layer_distance_is_the_squared_error_per_dimension_over_real_tokens():
    student = torch.tensor([[[1.0, 2.0], [5.0, 5.0]]])
    teacher = torch.tensor([[[0.0, 0.0], [0.0, 0.0]]])
    mask = torch.tensor([[True, False]])
    assert layer_distance(student, teacher, mask).item() == (1 + 4) / 2
    assert layer_distance(student, teacher, torch.zeros(1, 2, dtype=torch.bool)).item() == 0.0


def test_a_shallower_student_starts_from_the_teacher_layer_it_reproduces(work):
    vocab = Vocabulary.load("vocab.txt")
    teacher = LanguageModel.from_spec(work["spec"], vocab)
    student = LanguageModel.from_spec(spec_with(work["spec"], num_layers=1), vocab)
    initialise_from_teacher(student, teacher, default_layer_map(2, 3))  # [0, 2]: its layer 1 is the top's
    top = {k[len("encoder.lstm_layers.1."):]: v for k, v in teacher.state_dict().items()
           if k.startswith("encoder.lstm_layers.1.")}
    own = {k[len("encoder.lstm_layers.0."):]: v for k, v in student.state_dict().items()
           if k.startswith("encoder.lstm_layers.0.")}
    assert own and own.keys() == top.keys() and all(torch.equal(own[k], top[k]) for k in own)


def test_a_copy_of_the_teacher_reproduces_it_exactly(work):
    """A student of the teacher's size initialised from it: every representation's distance 0."""
    vocab = Vocabulary.load("vocab.txt")
    torch.manual_seed(1)
    teacher = LanguageModel.from_spec(work["spec"], vocab)
    torch.manual_seed(2)
    student = LanguageModel.from_spec(work["spec"], vocab)
    model = DistillationLM(student, teacher, [0, 1, 2], [1.0, 1.0, 1.0], 1.0)
    ids = torch.randint(4, len(vocab), (3, 5))
    batch = LMBatch(inputs=ids, targets=torch.roll(ids, -1, 1), mask=torch.ones(3, 5, dtype=torch.bool))
    assert min(d.item() for d in model.distances(batch)[1]) > 0  # different seeds: different models
    assert initialise_from_teacher(student, teacher, [0, 1, 2]) == len(student.state_dict())
    assert all(d.item() == 0.0 for d in model.distances(batch)[1])


def test_same_size_student_from_the_teacher_starts_at_distillation_loss_zero(work):
    assert distill("same", work["spec"], section={"init_from_teacher": True}, steps=2) == 0
    first = train_records("same")[0]
    assert first["distill_loss"] == 0.0 and first["distill_layer2"] == 0.0  # before its first update
    history = json.loads(Path("same/heldout.json").read_text())["history"]
    assert history[0]["tag"] == "before" and history[0]["distill"] == [0.0, 0.0, 0.0]  # heldout, every layer
    assert history[-1]["distill"][2] > 0  # trained on its LM loss too, it moves away
    assert distill("fresh", work["spec"], steps=2) == 0  # without the teacher's weights it is not
    assert train_records("fresh")[0]["distill_loss"] > 0


@pytest.mark.slow  # subprocess runs
def test_a_stopped_distillation_resumes_exactly(work):
    """A narrower 1-layer student (projections 4 -> 3 learned) with carried state: stopped
    after 2 steps and resumed, it ends with the uninterrupted run's weights, bit for bit."""
    student = spec_with(work["spec"], num_layers=1, cell_size=6, projection_size=3)
    assert distill("whole", student) == 0
    assert distill("parts", student, steps=2, process=True) == 0  # its own process: the lock goes with it
    resumable = load_checkpoint("parts/checkpoint.pt")
    assert {k for k in resumable["model"] if k.startswith("projections.")} == {"projections.0.weight",
                                                                             "projections.1.weight"}
    assert resumable["state"] is not None  # (student state, teacher state), carried
    assert distill("parts", student) == 0
    whole, parts = load_checkpoint("whole/model.pt"), load_checkpoint("parts/model.pt")
    assert whole["model"].keys() == parts["model"].keys()
    assert all(torch.equal(whole["model"][k], parts["model"][k]) for k in whole["model"])
    assert json.loads(Path("whole/heldout.json").read_text())["history"][-1]["value"] == \
        json.loads(Path("parts/heldout.json").read_text())["history"][-1]["value"]
    assert [r["loss"] for r in train_records("whole")] == [r["loss"] for r in train_records("parts")]


@pytest.mark.slow  # subprocess runs
def test_a_killed_distillation_resumes_exactly(work):
    """SIGKILL while the run waits for its second shard (a FIFO: a known step, no timing), then the
    same command again: it resumes from the last checkpoint and ends as the uninterrupted run."""
    student = spec_with(work["spec"], num_layers=1, projection_size=3)
    steps = 40  # more than the epoch: it ends with the second shard
    assert distill("kill-whole", student, steps=steps) == 0
    second = {"second": Path("corpus/train") / f"shard_{shard_order(2, 1, 0)[1]:03d}.txt"}
    content = block_on_second_shard(second)
    try:
        proc = subprocess.Popen(ELMOC + distill_argv("killed", student, steps=steps), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        fd = wait_for_reader(second["second"], proc)
        proc.kill()
        proc.wait(timeout=60)
        os.close(fd)
    finally:
        second["second"].unlink()
        second["second"].write_text(content)
    killed_at = load_checkpoint("killed/checkpoint.pt")["step"]
    assert killed_at > 0 and not Path("killed/model.pt").exists()
    assert distill("killed", student, steps=steps, process=True) == 0
    whole, killed = load_checkpoint("kill-whole/model.pt"), load_checkpoint("killed/model.pt")
    assert whole["step"] == killed["step"] > killed_at  # the whole epoch (30 steps), resumed past the kill
    assert all(torch.equal(whole["model"][k], killed["model"][k]) for k in whole["model"])


def test_the_student_is_an_ordinary_lm_that_exports_and_embeds(work, tmp_path):
    student = spec_with(work["spec"], num_layers=1, projection_size=3)
    for direction in ("forward", "backward"):
        assert distill(f"student/{direction}", student, direction) == 0
    payload = load_checkpoint("student/forward/model.pt")
    assert "distill" not in payload["spec"] and not any(k.startswith("projections") for k in payload["model"])
    assert payload["distilled"]["layer_map"] == [0, 2]  # input view to input view, top to top
    LanguageModel.from_spec(payload["spec"], Vocabulary.load("vocab.txt")).load_state_dict(payload["model"])
    assert main(["export", "--forward", "student/forward/model.pt", "--backward", "student/backward/model.pt",
                 "--output-dir", "student/model"]) == 0
    Path("sentences.txt").write_text("the cat sat\nred ball\n")
    assert main(["embed", "sentences.txt", "student.h5", "--model", "student/model", "--all"]) == 0
    with h5py.File("student.h5") as f:
        first = f[sorted(f.keys())[0]][()]
    assert first.shape == (2, 3, 6)  # input view + 1 layer, both directions of 3 each


def test_a_transformer_student_learns_the_lstm_teacher_through_projections(work):
    student = {**work["spec"], "encoder": {"type": "transformer", "d_model": 6, "heads": 2, "d_ff": 12,
                                           "num_layers": 3, "dropout": 0.0}}
    assert distill("trans", student, steps=3) == 0
    assert len(load_checkpoint("trans/checkpoint.pt")["model"]["projections.3.weight"]) == 4  # 6 -> the teacher's 4
    history = json.loads(Path("trans/heldout.json").read_text())["history"]
    assert load_checkpoint("trans/model.pt")["distilled"]["layer_map"] == [0, 1, 2, 2]
    assert len(history[-1]["distill"]) == 4 and history[-1]["distill"][3] < history[0]["distill"][3]


@pytest.mark.parametrize("case, message", [
    ("missing", "teacher/none/model.pt: not found; train the teacher first"),
    ("vocab", "another vocabulary"),
    ("key", "unknown key 'lm_wieght' (did you mean 'lm_weight'?)"),
    ("layers", "distill.layers [0, 3] must name"),
    ("joint", "one direction at a time"),
])
def test_bad_input_is_one_line(work, capsys, case, message):
    student = spec_with(work["spec"], num_layers=1)
    section, teacher, direction = {}, None, "forward"
    if case == "missing":
        teacher = "teacher/none/model.pt"
        assert not Path("bad-missing").exists()
    elif case == "vocab":
        Path("vocab2.txt").write_text(Path("vocab.txt").read_text() + "zebra\t1\n")
        student = {**student, "vocab": "vocab2.txt"}
    elif case == "key":
        section = {"lm_wieght": 1.0}
    elif case == "layers":
        section = {"layers": [0, 3]}
    else:
        student = {**student, "train": {**student["train"], "directions": "joint"}}
        direction = "joint"
    assert distill(f"bad-{case}", student, direction, section, teacher=teacher or "teacher/forward/model.pt") == 1
    err = [line for line in capsys.readouterr().err.strip().splitlines() if "error" in line]
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0], err
    if case == "missing":
        assert not Path("bad-missing").exists()  # refused before the output folder is made


def test_a_students_spec_is_its_teachers_with_its_overrides_or_a_preset_with_the_teachers_data():
    config = load_yaml(Path(__file__).parents[2] / "config/config.yaml")
    presets = Path(__file__).parents[2] / "config/lm"
    config["distill"] = {"students": {"small": {"teacher": "elmo-c", "overrides": {"encoder": {"num_layers": 1}}},
                                      "trans": {"teacher": "elmo-c", "preset": "trans-base-c"},
                                      "orphan": {"teacher": "elmo-x"}}}
    teacher = resolve_variant(config, "elmo-c", presets)
    small = resolve_student(config, "small", presets)
    assert small["encoder"] == {**teacher["encoder"], "num_layers": 1} and small["name"] == "small"
    assert small["train"]["directions"] == "separate" and small["optimizer"] == teacher["optimizer"]
    assert small["description"] == 'student of elmo-c (elmoc distill): overrides {"encoder": {"num_layers": 1}}'
    trans = resolve_student(config, "trans", presets)
    assert trans["encoder"]["type"] == "transformer" and trans["encoder"]["d_model"] == 32  # overrides_by_type
    assert (trans["vocab"], trans["data"]) == (teacher["vocab"], teacher["data"])
    with pytest.raises(ConfigError, match="distill.students.orphan.teacher 'elmo-x' is not a variant"):
        resolve_student(config, "orphan", presets)


def test_the_students_keys_are_the_workflows_and_the_commands():
    schema = load_yaml(Path(__file__).parents[2] / "workflow/schemas/config.schema.yaml")
    student = schema["properties"]["distill"]["properties"]["students"]["additionalProperties"]
    assert set(STUDENT_KEYS) == set(student["properties"]) == set(STUDENT_WORKFLOW_KEYS) | set(DistillSettings.KEYS)
