import itertools

import pytest
import torch

from elmoc.errors import InputFileError
from elmoc.registry import build
from elmoc.tasks.crf import ConditionalRandomField, bioul_constraints
from elmoc.tasks.embedder import TaskInputs
from elmoc.tasks.ner import iob1_to_bioul, read_conll2003
from elmoc.tasks.runner import TrainerConfig, run_task

CONLL = """-DOCSTART- -X- -X- O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O
. . O O

Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER
B B B B-PER

-DOCSTART- -X- -X- O

BRUSSELS NNP I-NP I-LOC
1996-08-22 CD I-NP O
"""


def test_iob1_to_bioul():
    assert iob1_to_bioul(["I-PER", "I-PER", "B-PER", "O", "I-LOC"]) == ["B-PER", "L-PER", "U-PER", "O", "U-LOC"]
    assert iob1_to_bioul(["I-ORG", "I-ORG", "I-ORG"]) == ["B-ORG", "I-ORG", "L-ORG"]


def test_reader_docstart_and_bioul(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text(CONLL)
    sents = read_conll2003(path)
    assert [len(s.tokens) for s in sents] == [5, 3, 2]
    assert sents[0].tags == ("U-ORG", "O", "U-MISC", "O", "O")
    assert sents[1].tags == ("B-PER", "L-PER", "U-PER")


@pytest.mark.parametrize("line,message", [("EU NNP I-ORG", "expected 4 columns"), ("EU NNP I-NP X-ORG", "IOB1")])
def test_malformed_lines(tmp_path, line, message):
    path = tmp_path / "bad.txt"
    path.write_text("-DOCSTART- -X- -X- O\n\n" + line + "\n")
    with pytest.raises(InputFileError, match=rf"bad.txt:3: .*{message}"):
        read_conll2003(path)


def test_allennlp_fixture(shared_data):
    sents = read_conll2003(shared_data / "fixtures/allennlp/conll2003.txt")
    assert sents[0].tokens == ("U.N.", "official", "Ekeus", "heads", "for", "Baghdad", ".")
    assert sents[0].tags == ("U-ORG", "O", "U-PER", "O", "O", "U-LOC", "O")


def _is_valid_bioul(tags):
    prev = "O"
    for t in tags:
        if t[0] in "IL" and not (prev[0] in "BI" and prev[2:] == t[2:]):
            return False
        if t[0] in "OBU" and prev[0] in "BI":
            return False
        prev = t
    return prev[0] in "OLU"


def test_viterbi_respects_bioul_constraints():
    labels = ["O", "B-PER", "I-PER", "L-PER", "U-PER", "B-LOC", "I-LOC", "L-LOC", "U-LOC"]
    allowed, start, end = bioul_constraints(labels)
    assert allowed[1, 2] and allowed[1, 3] and not allowed[1, 6] and not allowed[0, 2] and not start[2] and not end[1]
    torch.manual_seed(0)
    crf = ConditionalRandomField(len(labels), allowed, start, end)
    scores = torch.randn(20, 7, len(labels)) * 5
    mask = torch.ones(20, 7, dtype=torch.bool)
    mask[5:, 4:] = False
    for b, path in enumerate(crf.viterbi(scores, mask)):
        assert len(path) == int(mask[b].sum())
        assert _is_valid_bioul([labels[i] for i in path])


def test_viterbi_is_exact_and_likelihood_normalises():
    torch.manual_seed(1)
    crf = ConditionalRandomField(3)
    scores = torch.randn(1, 4, 3)
    mask = torch.ones(1, 4, dtype=torch.bool)
    best, total = None, []
    for seq in itertools.product(range(3), repeat=4):
        tags = torch.tensor([seq])
        s = -crf.neg_log_likelihood(scores, tags, mask).detach()
        total.append(s.exp())
        if best is None or s > best[0]:
            best = (s, list(seq))
    assert float(sum(total)) == pytest.approx(1.0, abs=1e-5)
    assert crf.viterbi(scores, mask)[0] == best[1]


def test_tagger_overfits(tmp_path, features_writer, vectors_writer):
    path = tmp_path / "train.txt"
    path.write_text(CONLL)
    task = build("task", {"type": "ner", "train": str(path), "dev": str(path), "test": str(path),
                          "model": {"hidden": 16, "char_filters": 8, "dropout": 0.0}})
    data = {s: task.read(s) for s in ("train", "dev", "test")}
    sentences = [list(x.tokens) for x in data["train"]]
    h5 = features_writer(tmp_path / "f.hdf5", sentences)
    npy, vocab = vectors_writer(tmp_path, [t.lower() for s in sentences for t in s])
    inputs = TaskInputs.create(sentences * 3, vectors=npy, vocab=vocab, features=h5, lowercase=True)
    trainer = TrainerConfig.from_dict({"batch_size": 2, "lr": 2e-2, "epochs": 40, "patience": 40}, task.default_trainer)
    result = run_task(task, inputs, seed=1, trainer=trainer, data=data)
    assert result["metric"] == "f1" and result["test"] == 1.0
