import itertools

import pytest
import torch

from elmoc.errors import InputFileError
from elmoc.registry import build
from elmoc.nn.viterbi import allowed_transitions
from elmoc.tasks.crf import ConditionalRandomField
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


def test_crf_decodes_with_bioul_constraints():
    labels = ["O", "B-PER", "I-PER", "L-PER", "U-PER", "B-LOC", "I-LOC", "L-LOC", "U-LOC"]
    torch.manual_seed(0)
    crf = ConditionalRandomField(len(labels), *allowed_transitions(labels, "BIOUL"))
    scores = torch.randn(20, 7, len(labels)) * 5
    mask = torch.ones(20, 7, dtype=torch.bool)
    mask[5:, 4:] = False
    for b, path in enumerate(crf.viterbi(scores, mask)):
        assert len(path) == int(mask[b].sum())
        tags = [labels[i] for i in path]
        assert iob1_to_bioul(tags) == tags  # well-formed BIOUL is its own conversion
        assert tags[0][0] in "OBU" and tags[-1][0] in "OLU"


@torch.no_grad()
def path_scores(crf, scores, length):
    """{tag sequence: its unnormalised score} for every sequence of ``length`` tags."""
    def score(seq):
        total = crf.start_scores[seq[0]] + crf.end_scores[seq[-1]] + sum(scores[t, i] for t, i in enumerate(seq))
        return float(total + sum(crf.transitions[i, j] for i, j in zip(seq, seq[1:])))
    return {seq: score(seq) for seq in itertools.product(range(crf.num_tags), repeat=length)}


def brute_force_nll(crf, scores, tags, length):
    """-log p(tags | scores) of one sentence by enumerating every tag sequence of its length."""
    every = path_scores(crf, scores, length)
    return float(torch.logsumexp(torch.tensor(list(every.values()), dtype=torch.float64), dim=0)) - every[tuple(tags[:length].tolist())]


@pytest.mark.parametrize("start_end_scores", [False, True])
def test_crf_loss_is_the_brute_force_nll_summed_over_the_batch(start_end_scores):
    torch.manual_seed(1)
    crf = ConditionalRandomField(3, start_end_scores=start_end_scores)
    scores = torch.randn(4, 5, 3)
    tags = torch.randint(0, 3, (4, 5))
    lengths = [5, 2, 4, 1]
    mask = torch.arange(5)[None, :] < torch.tensor(lengths)[:, None]
    expected = sum(brute_force_nll(crf, scores[b], tags[b], n) for b, n in enumerate(lengths))
    assert float(crf(scores, tags, mask).detach()) == pytest.approx(expected, rel=1e-5)
    assert float(crf.neg_log_likelihood(scores, tags, mask).detach().mean()) == pytest.approx(expected / 4, rel=1e-5)
    # Viterbi (no constraints) is the exhaustive argmax
    every = path_scores(crf, scores[0], 5)
    assert crf.viterbi(scores[:1], mask[:1])[0] == list(max(every, key=every.get))


def test_tagger_loss_is_the_crf_sum_not_the_mean(tmp_path, features_writer, vectors_writer):
    """The CrfTagger's loss equals the CRF's summed NLL over its batch (AllenNLP), so the
    runner's mix_l2 term keeps its weight relative to it whatever the batch size."""
    path = tmp_path / "train.txt"
    path.write_text(CONLL)
    task = build("task", {"type": "ner", "train": str(path), "dev": str(path), "test": str(path),
                          "model": {"hidden": 8, "char_filters": 4, "dropout": 0.0}})
    data = task.read("train")
    sentences = [list(x.tokens) for x in data]
    npy, vocab = vectors_writer(tmp_path, [t.lower() for s in sentences for t in s])
    inputs = TaskInputs.create(sentences, vectors=npy, vocab=vocab, lowercase=True)
    model = task.build_model(inputs)
    captured = {}
    model.tag_projection.register_forward_hook(lambda module, args, out: captured.setdefault("scores", out))
    batch = task.collate(data, inputs)
    loss = model(batch).loss
    per_sentence = model.crf.neg_log_likelihood(captured["scores"], batch["tag_ids"], batch["text"].mask)
    assert len(data) == 3 and float(loss.detach()) == pytest.approx(float(per_sentence.detach().sum()), rel=1e-6)
    short = [b for b, x in enumerate(data) if len(x.tokens) <= 2]  # 17 tags: 17^2 sequences
    expected = sum(brute_force_nll(model.crf, captured["scores"][b], batch["tag_ids"][b], 2) for b in short)
    assert short and float(per_sentence.detach()[short].sum()) == pytest.approx(expected, rel=1e-5)


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


def test_words_are_looked_up_with_the_vectors_own_case_unless_lowercase(tmp_path, vectors_writer):
    """FastText-CC is cased: by default "EU" reads the row of "EU", not that of "eu"
    (AllenNLP's GloVe-6B lowercasing is the `lowercase: true` option)."""
    import numpy as np

    from elmoc.data.vocab.vocabulary import Vocabulary
    from elmoc.errors import ConfigError

    path = tmp_path / "train.txt"
    path.write_text(CONLL)
    section = {"type": "ner", "train": str(path), "dev": str(path), "test": str(path)}
    sentences = [list(x.tokens) for x in build("task", section).read("train")]
    words = [t for s in sentences for t in s]
    npy, vocab = vectors_writer(tmp_path, words + [t.lower() for t in words])
    matrix, source = np.load(npy), Vocabulary.load(vocab)
    assert not np.array_equal(matrix[source.id("EU")], matrix[source.id("eu")])
    for lowercase, expected in ((None, "EU"), (False, "EU"), (True, "eu")):
        task = build("task", section if lowercase is None else {**section, "lowercase": lowercase})
        assert task.lowercase_words is bool(lowercase)
        inputs = TaskInputs.create(sentences, vectors=npy, vocab=vocab, lowercase=task.lowercase_words)
        row = int(inputs.encode([["EU", "rejects"]]).word_ids[0, 0])
        assert torch.equal(inputs.word_table[row], torch.from_numpy(matrix[source.id(expected)]))
    with pytest.raises(ConfigError, match="lowercase must be true or false"):
        build("task", {**section, "lowercase": "yes"})
