"""Notes for rare words (TNF, src/elmoc/nn/notes.py) and their hooks in the models and the trainer:
hand-computed window means, band and moving average; a note never serves the window that wrote it;
resume equal to an uninterrupted run; model.pt and features without notes; two gloo processes keep
identical notes equal to one process's."""
import os
from collections import Counter

import pytest
import torch
import torch.distributed as dist
from ddp_compare import finish_worker, spawn_runs

from elmoc.data.batches import BiLMBatch, LMBatch
from elmoc.data.masking import MaskedLMBatch
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.errors import ConfigError
from elmoc.lm import BidirectionalLM, LanguageModel
from elmoc.masked_lm import MaskedLM
from elmoc.model_file import load_checkpoint
from elmoc.nn.notes import (PAPER_CORPUS_TOKENS, NoteDictionary, NoteSettings, RareBand, piece_words, rare_ids,
                             variant_label, window_means)
from elmoc.train.loop import train
from elmoc.train.settings import TrainSettings

# the rank band (the paper's count band would find no rare word in the tiny vocabularies)
NOTES = {"lambda": 0.5, "gamma": 0.1, "window": 2, "band_by": "rank", "band": [0.5, 1.0]}
HALF = RareBand(by="rank", ranks=(0.5, 1.0))


def test_window_means_by_hand():
    out = torch.arange(5.0).view(1, 5, 1)  # outputs 0 1 2 3 4
    mask = torch.tensor([[True, True, True, True, False]])
    got = window_means(out, mask, 1)[0, :, 0]
    # t=0: (0+1)/2; t=1: (0+1+2)/3; t=2: (1+2+3)/3; t=3: (2+3)/2 (4 is padding); t=4: 3/1
    assert torch.allclose(got, torch.tensor([0.5, 1.0, 2.0, 2.5, 3.0]))


def test_variant_label_reads_the_spec():
    assert variant_label({"train": {"notes": {}}}) == "TNF"
    assert variant_label({"train": {"seed": 1}}) is None and variant_label({}) is None
    assert TrainSettings.table_option_label({"notes": {"lambda": 0.5}}) == "TNF"
    assert TrainSettings.table_option_label({"seed": 1}) is None


def test_rare_band_is_rank_quantiles_of_the_counts():
    counts = [0, 0, 0, 0, 50, 40, 30, 20, 10, 5, 5, 1]  # 8 counted words
    assert rare_ids(counts, HALF).tolist() == [8, 9, 10, 11]
    assert rare_ids(counts, RareBand(by="rank", ranks=(0.25, 0.5))).tolist() == [6, 7]
    with pytest.raises(ConfigError, match="counts"):
        rare_ids([0, 0, 0], HALF)


def test_count_band_is_the_papers_scaled_to_the_corpus():
    """Default band: 100-500 occurrences at the paper's corpus size, scaled by corpus tokens / 3.3B
    with the paper's width kept and a floor of 2 occurrences; scale: none takes the counts as given."""
    band = NoteSettings.from_config({}).band
    assert band == RareBand() and (band.by, band.counts, band.scale) == ("count", (100.0, 500.0), "corpus")
    assert band.count_range(PAPER_CORPUS_TOKENS) == (100.0, 500.0)
    assert band.count_range(PAPER_CORPUS_TOKENS // 10) == (10.0, 50.0)
    assert band.count_range(PAPER_CORPUS_TOKENS // 1000) == (2.0, 10.0)  # 0.1 occurrences: floored, width kept
    small = [0, 0, 0, 0, 50, 11, 10, 5, 2, 1]  # 80 tokens: the band is [2, 10]
    assert rare_ids(small, band).tolist() == [6, 7, 8]
    paper = [0, 0, 0, 0, 600, 501, 500, 300, 100, 99]
    as_given = NoteSettings.from_config({"counts": [100, 500], "scale": "none"}).band
    assert rare_ids(paper, as_given).tolist() == [6, 7, 8]
    with pytest.raises(ConfigError, match=r"no word of the vocabulary \(6 counted words\) is seen 1-5 times"):
        rare_ids(paper, RareBand(counts=(1, 5), scale="none"))


def test_every_tnf_preset_takes_the_papers_count_band():
    from pathlib import Path

    import yaml
    presets = sorted(Path(__file__).resolve().parents[2].glob("config/lm/*-tnf.yaml"))
    assert len(presets) == 5
    for path in presets:
        settings = NoteSettings.from_config(yaml.safe_load(path.read_text())["train"]["notes"])
        assert (settings.band, settings.update) == (RareBand(), "occurrence"), path.name


def _sequential(old, seen, rows, means, gamma):
    """The paper's update, one occurrence at a time."""
    notes, seen = old.clone(), seen.clone()
    for r, m in zip(rows.tolist(), means):
        notes[r] = (1 - gamma) * notes[r] + gamma * m if seen[r] else m
        seen[r] = True
    return notes


def test_per_occurrence_update_is_the_moving_average_in_order():
    gen = torch.Generator().manual_seed(3)
    occurrence = NoteDictionary(NoteSettings(gamma=0.3, window=0), torch.arange(1, 6), 7, 3, 3)
    step = NoteDictionary(NoteSettings(gamma=0.3, window=0, update="step"), torch.arange(1, 6), 7, 3, 3)
    for notes in (occurrence, step):
        notes.notes[:2] = torch.ones(2, 3)
        notes.seen[:2] = True
    expected = occurrence.notes.clone()
    for _ in range(2):  # two commits: the second starts from the first's notes
        ids = torch.randint(0, 7, (2, 9), generator=gen)
        out = torch.randn(2, 9, 3, generator=gen)
        mask = torch.ones(2, 9, dtype=torch.bool)
        rows = occurrence.row[ids][occurrence.row[ids] >= 0]  # row-major: the rows' order
        expected = _sequential(expected, occurrence.seen, rows, out[occurrence.row[ids] >= 0], 0.3)
        for notes in (occurrence, step):
            notes.observe(ids, mask, out)
            notes.commit()
        assert torch.allclose(occurrence.notes, expected, atol=1e-6)
        assert not torch.allclose(step.notes, expected, atol=1e-3)  # the former rule averages first


def test_checkpoints_of_other_rules_are_refused_in_one_line():
    counts = [0, 0, 0, 0, 50, 11, 10, 5, 2, 1]
    rank = NoteDictionary(NoteSettings(band=HALF), rare_ids(counts, HALF), 10, 2, 2)
    count = NoteDictionary(NoteSettings(), rare_ids(counts, RareBand()), 10, 2, 2)
    with pytest.raises(ConfigError, match="band_by: rank, band: \\[0.2, 1.0\\]") as err:
        count.load_state_dict(rank.state_dict())
    assert "\n" not in str(err.value)
    before = {k: v for k, v in count.state_dict().items() if k != "update"}  # written before issue 47: per step
    with pytest.raises(ConfigError, match="update: step to resume") as err:
        count.load_state_dict(before)
    assert "\n" not in str(err.value)
    former = NoteDictionary(NoteSettings(update="step"), rare_ids(counts, RareBand()), 10, 2, 2)
    former.load_state_dict(before)
    count.load_state_dict(count.state_dict())


def _transformer(tiny_lm, place, cls=LanguageModel, causal=True):
    vocab, spec, _, _ = tiny_lm
    spec = {**spec, "encoder": {"type": "transformer", "causal": causal, "d_model": 8, "heads": 2, "d_ff": 16,
                                "num_layers": 1, "dropout": 0.0}}
    torch.manual_seed(0)
    lm = cls.from_spec(spec, vocab)
    rare = rare_ids(vocab.counts, HALF)
    lm.notes = NoteDictionary(NoteSettings(window=1, band=HALF, place=place), rare, len(vocab),
                              lm.input_layer.output_dim, 8, seed=1)
    lm.notes.notes[:] = torch.randn(lm.notes.notes.shape, generator=torch.Generator().manual_seed(1))
    lm.notes.seen[:] = True
    return lm, rare


def _spy_mix(notes):
    seen = []
    mix = notes.mix

    def spy(ids, vectors):
        seen.append((ids, vectors))
        return mix(ids, vectors)

    notes.mix = spy
    return seen


def test_notes_mix_into_the_transformers_own_input_at_its_width(tiny_lm):
    """place: model (default): the note is d_model wide, no map, mixed into the projected input plus
    positions (the paper's word + position embedding); place: input: the former 12-d notes and map."""
    from elmoc.encoders.transformer import sinusoidal_positions

    lm, rare = _transformer(tiny_lm, "model")
    assert NoteSettings().place == "model"
    assert lm.notes.in_encoder and lm.notes.notes.shape == (rare.numel(), 8) and lm.notes.projection is None
    ids = torch.stack([rare[:6], rare[3:9]])
    batch = LMBatch(ids, ids.roll(-1, 1), torch.ones_like(ids, dtype=torch.bool))
    lm.eval()
    seen = _spy_mix(lm.notes)
    lm(batch)
    (_, vectors), = seen
    expected = lm.encoder.input_projection(lm.input_layer(ids)) + sinusoidal_positions(6, 8)
    assert torch.allclose(vectors, expected)
    former, _ = _transformer(tiny_lm, "input")
    assert not former.notes.in_encoder and former.notes.notes.shape == (rare.numel(), 12)
    assert former.notes.projection.shape == (8, 12)
    seen = _spy_mix(former.notes)
    former.eval()
    former(batch)
    assert torch.equal(seen[0][1], former.input_layer(ids))
    lstm, notes = _lm_and_notes(tiny_lm)  # an LSTM reads the input layer's vectors: mixed there
    lstm.notes = notes
    assert not notes.in_encoder and notes.notes.shape[1] == 12 and notes.projection is not None


def test_masked_transformer_reads_notes_in_its_input_except_at_masked_positions(tiny_lm):
    masked, rare = _transformer(tiny_lm, "model", MaskedLM, causal=False)
    ids = rare[:6].view(1, 6)
    replaced = torch.zeros_like(ids, dtype=torch.bool)
    replaced[0, 2] = True
    seen = _spy_mix(masked.notes)
    masked.eval()
    masked(MaskedLMBatch(ids, ids, replaced, replaced, torch.ones_like(replaced)))
    (read, _), = seen
    assert read[0, 2] == 0 and torch.equal(read[~replaced], ids[~replaced])  # PAD: no note at the masked one


def test_a_checkpoint_mixed_elsewhere_is_refused_in_one_line(tiny_lm):
    vocab = tiny_lm[0]
    rare = rare_ids(vocab.counts, HALF)
    encoder = type("Encoder", (), {"mixes_embedded": True, "output_dim": 12})()
    inside = NoteDictionary(NoteSettings(band=HALF), rare, len(vocab), 12, 12).place(encoder)
    outside = NoteDictionary(NoteSettings(band=HALF, place="input"), rare, len(vocab), 12, 12).place(encoder)
    assert inside.in_encoder and not outside.in_encoder
    with pytest.raises(ConfigError, match="set train.notes.place: input to resume") as err:
        inside.load_state_dict(outside.state_dict())
    assert "\n" not in str(err.value)
    old = {k: v for k, v in outside.state_dict().items() if k != "in_encoder"}  # before issue 47: input
    outside.load_state_dict(old)


def test_mix_and_moving_average_by_hand():
    notes = NoteDictionary(NoteSettings(mix=0.25, gamma=0.25, window=0, update="step"), torch.tensor([2]), 4, 2, 2)
    ids = torch.tensor([[1, 2, 2]])
    vectors = torch.ones(1, 3, 2)
    assert torch.equal(notes.mix(ids, vectors), vectors)  # no note yet
    mask = torch.ones(1, 3, dtype=torch.bool)
    notes.observe(ids, mask, torch.tensor([[[9.0, 9.0], [2.0, 4.0], [4.0, 8.0]]]))
    notes.commit()
    assert torch.equal(notes.notes[0], torch.tensor([3.0, 6.0]))  # first note: the step's mean, as it is
    notes.observe(ids[:, :2], mask[:, :2], torch.tensor([[[0.0, 0.0], [1.0, 2.0]]]))
    notes.commit()
    assert torch.equal(notes.notes[0], torch.tensor([2.5, 5.0]))  # 0.75 * (3, 6) + 0.25 * (1, 2)
    mixed = notes.mix(ids, vectors)
    assert torch.equal(mixed[0, 0], torch.ones(2))  # a frequent word keeps its vector
    assert torch.equal(mixed[0, 1], torch.tensor([1.375, 2.0]))  # 0.75 * 1 + 0.25 * (2.5, 5)


def test_match_norm_scales_the_note_to_the_input():
    notes = NoteDictionary(NoteSettings(mix=0.5, window=0, match_norm=True), torch.tensor([1]), 2, 2, 2)
    notes.notes[0], notes.seen[0] = torch.tensor([0.0, 8.0]), True
    mixed = notes.mix(torch.tensor([[1]]), torch.tensor([[[2.0, 0.0]]]))
    assert torch.equal(mixed[0, 0], torch.tensor([1.0, 1.0]))  # 0.5 * (2, 0) + 0.5 * (0, 2)


def test_settings_errors_name_the_key():
    assert TrainSettings.from_config({"notes": {}}).note_settings == NoteSettings()
    for bad, key in (({"lamda": 0.5}, "lambda"), ({"lambda": 1.5}, "train.notes.lambda"),
                     ({"gamma": 0}, "train.notes.gamma"), ({"gamma": 2}, "train.notes.gamma"),
                     ({"window": -1}, "train.notes.window"),
                     ({"band_by": "rank", "band": [0.9, 0.1]}, "train.notes.band"),
                     ({"band": [0.2, 1.0]}, "train.notes.band is for band_by: rank"),
                     ({"band_by": "rank", "counts": [1, 5]}, "train.notes.counts is for band_by: count"),
                     ({"band_by": "freq"}, "train.notes.band_by"), ({"counts": [500, 100]}, "train.notes.counts"),
                     ({"counts": [0, 5]}, "train.notes.counts"), ({"scale": "paper"}, "train.notes.scale"),
                     ({"update": "batch"}, "train.notes.update"),
                     ({"band_by": "cuont"}, r"train.notes.band_by must be one of .* \(did you mean 'count'\?\)"),
                     ({"place": "inputs"}, r"train.notes.place .* \(did you mean 'input'\?\)"),
                     ({"match_norm": "yes"}, "train.notes.match_norm")):
        with pytest.raises(ConfigError, match=key):
            TrainSettings.from_config({"notes": bad})


def _lm_and_notes(tiny_lm, cls=LanguageModel):
    vocab, spec, _, _ = tiny_lm
    torch.manual_seed(0)
    lm = cls.from_spec(spec, vocab)
    encoder = lm.forward_encoder if cls is BidirectionalLM else lm.encoder
    notes = NoteDictionary(NoteSettings(window=2, band=HALF), rare_ids(vocab.counts, HALF), len(vocab),
                           lm.input_layer.output_dim, encoder.output_dim, seed=1)
    return lm, notes


def test_a_note_never_serves_the_window_that_wrote_it(tiny_lm):
    """Causality: the notes a step reads were committed by earlier steps, so a window's loss
    with notes attached but none committed equals its loss without notes."""
    lm, notes = _lm_and_notes(tiny_lm)
    rare = rare_ids(tiny_lm[0].counts, HALF)
    ids = torch.stack([rare[:6], rare[3:9]])  # every word rare, each twice in the batch
    batch = LMBatch(ids, ids.roll(-1, 1), torch.ones_like(ids, dtype=torch.bool))
    lm.eval()
    plain, _ = lm(batch)
    lm.notes = notes
    first, _ = lm(batch)
    assert torch.equal(first.loss_sum, plain.loss_sum)  # observed, not yet read
    assert notes.pending and not notes.seen.any()
    notes.commit()
    assert notes.seen.sum() == 9
    second, _ = lm(batch)
    assert not torch.equal(second.loss_sum, plain.loss_sum)  # now read
    evaluated, _ = lm.evaluate(batch)
    assert torch.equal(evaluated.loss_sum, lm.output_layer.evaluate(
        lm.encode(ids).output, batch.targets, batch.mask).loss_sum)  # heldout reads no notes


def test_joint_and_masked_models_feed_one_dictionary(tiny_lm):
    rare = rare_ids(tiny_lm[0].counts, HALF)
    ids = torch.stack([rare[:6], rare[3:9]])
    ones = torch.ones_like(ids, dtype=torch.bool)
    joint, notes = _lm_and_notes(tiny_lm, BidirectionalLM)
    joint.notes = notes
    joint(BiLMBatch(LMBatch(ids, ids, ones), LMBatch(ids.flip(1), ids.flip(1), ones)))
    assert len(notes.pending) == 2  # one entry per direction, committed together
    vocab, spec, _, _ = tiny_lm
    masked_spec = {**spec, "encoder": {"type": "transformer", "causal": False, "d_model": 8, "heads": 2,
                                       "d_ff": 16, "num_layers": 1, "dropout": 0.0}}
    masked = MaskedLM.from_spec(masked_spec, vocab)
    masked.notes = NoteDictionary(NoteSettings(window=1), rare, len(vocab), 12, 8)
    replaced = torch.zeros_like(ones)
    replaced[0, 0] = True
    masked(MaskedLMBatch(torch.full_like(ids, 3), ids, replaced, replaced, ones))
    (rows, _), = masked.notes.pending
    assert rows.numel() == ids.numel()  # keyed by the original words, not the <unk> inputs


def test_resume_equals_an_uninterrupted_run_and_model_has_no_notes(tmp_path, tiny_lm):
    vocab, spec, make_batches, _ = tiny_lm
    spec = {**spec, "train": {**spec["train"], "notes": NOTES}}
    train(spec, vocab, tmp_path / "full", make_batches, None)
    half = {**spec, "train": {**spec["train"], "max_steps": 10}}
    train(half, vocab, tmp_path / "resumed", make_batches, None)
    train(spec, vocab, tmp_path / "resumed", make_batches, None)  # continues from step 10 with its notes
    a, b = (load_checkpoint(tmp_path / d / "checkpoint.pt") for d in ("full", "resumed"))
    assert a["notes"]["seen"].sum() > 0
    for key in ("notes", "seen", "projection"):
        assert torch.equal(a["notes"][key], b["notes"][key])
    for key, value in a["model"].items():
        assert torch.equal(value, b["model"][key]), key
    plain = dict(spec, train={k: v for k, v in spec["train"].items() if k != "notes"})
    train(plain, vocab, tmp_path / "plain", make_batches, None)
    with_notes, without = (load_checkpoint(tmp_path / d / "model.pt") for d in ("full", "plain"))
    assert "notes" not in with_notes and set(with_notes) == set(without)
    assert {k: v.shape for k, v in with_notes["model"].items()} == {k: v.shape for k, v in without["model"].items()}


def test_features_read_no_notes(tmp_path, tiny_lm):
    lm, notes = _lm_and_notes(tiny_lm)
    notes.seen[:] = True
    notes.notes.normal_()
    ids = rare_ids(tiny_lm[0].counts, HALF)[:6].view(1, 6)
    lm.eval()
    before = lm.encode(ids).output
    lm.notes = notes
    assert torch.equal(lm.encode(ids).output, before)


# --- subword pieces (ELMo-Sub): one note per word ------------------------------------------
def test_pieces_of_one_word_share_one_note_read_by_all_pieces():
    """Word 2 (rare) is pieces 1..3, word 1 pieces 0 and 4 (odd words written -1 - id): one
    note over positions 1-k .. 3+k, read by every piece of a later occurrence."""
    notes = NoteDictionary(NoteSettings(mix=0.5, window=1), torch.tensor([2]), 4, 1, 1)
    words = torch.tensor([[1, -3, -3, -3, 1]])
    assert piece_words(words)[0].tolist() == [[1, 2, 2, 2, 1]]
    assert piece_words(words)[1].tolist() == [[0, 3, 3, 3, 4]]
    outputs = torch.tensor([[[1.0], [2.0], [4.0], [8.0], [5.0]]])
    notes.observe(words, torch.ones(1, 5, dtype=torch.bool), outputs, pieces=True)
    (rows, means), = notes.pending
    assert rows.tolist() == [0] and means.tolist() == [[4.0]]  # one occurrence: positions 0..4
    notes.commit()
    mixed = notes.mix_pieces(torch.tensor([[-3, -3, 1, 2, 2]]), torch.zeros(1, 5, 1))[0, :, 0]
    assert mixed.tolist() == [2.0, 2.0, 0.0, 2.0, 2.0]  # both occurrences' pieces, not word 1


def test_neighbouring_occurrences_of_a_word_stay_apart():
    """The same rare word twice in a row (even, then odd index): two notes, each its own window."""
    notes = NoteDictionary(NoteSettings(window=0), torch.tensor([2]), 4, 1, 1)
    words = torch.tensor([[2, 2, -3]])
    notes.observe(words, torch.ones(1, 3, dtype=torch.bool), torch.tensor([[[1.0], [3.0], [8.0]]]), pieces=True)
    (rows, means), = notes.pending
    assert rows.tolist() == [0, 0] and means.tolist() == [[2.0], [8.0]]


@pytest.fixture
def sub(tmp_path):
    """A tiny subword corpus: word vocabulary, BPE tokenizer and a joint bi-LM spec with notes."""
    from elmoc.data.vocab.subword import SubwordEncoder, train_bpe

    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda"]
    gen = torch.Generator().manual_seed(0)
    lines = [" ".join(words[int(i)] for i in torch.randint(0, len(words), (8,), generator=gen)) for _ in range(40)]
    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / "shard_0.txt").write_text("\n".join(lines) + "\n")
    Vocabulary.from_counts(Counter(" ".join(lines).split())).save(tmp_path / "words.txt")
    (tmp_path / "tokenizer.json").write_text(train_bpe([tmp_path / "shards" / "shard_0.txt"], 12, 1).to_str())
    SubwordEncoder(tmp_path / "tokenizer.json").vocabulary().save(tmp_path / "pieces.txt")
    spec = {"input": {"type": "subword", "dim": 8},
            "encoder": {"type": "elmo_lstm", "num_layers": 1, "cell_size": 12, "projection_size": 8,
                        "recurrent_dropout": 0.0},
            "output": {"type": "subword", "tie": True}, "optimizer": {"type": "adam", "lr": 0.01},
            "train": {"directions": "joint", "batch_size": 4, "bptt": 6, "epochs": 3, "log_every": 100,
                      "checkpoint_every": 0, "seed": 2, "notes": {**NOTES, "words": str(tmp_path / "words.txt")}},
            "vocab": str(tmp_path / "pieces.txt"),
            "data": {"train": str(tmp_path / "shards"), "tokenizer": str(tmp_path / "tokenizer.json")}}
    return spec, lines


def _sub_data(spec):
    from elmoc.train.lm_data import lm_data

    return lm_data(spec, "sub.yaml", "joint", TrainSettings.from_config(spec["train"]))


def test_subword_stream_names_each_pieces_word(sub, tmp_path):
    from elmoc.data.vocab.subword import SubwordEncoder

    spec, lines = sub
    encoder, words = SubwordEncoder(spec["data"]["tokenizer"]), Vocabulary.load(tmp_path / "words.txt")
    paired = encoder.stream(lines[:3], dict(words.index))
    assert paired.shape[1] == 2 and paired[:, 0].tolist() == encoder.stream(lines[:3]).tolist()
    ids, _ = piece_words(torch.from_numpy(paired[:, 1]).view(1, -1))
    pieces = [encoder.vocabulary().tokens[i] for i in paired[:, 0]]
    spelled = {}  # each word id's pieces joined back
    for piece, word in zip(pieces, ids[0].tolist()):
        spelled[word] = spelled.get(word, "") + piece.removeprefix("##")
    spelled = {words.tokens[w]: text for w, text in spelled.items() if w > 3}
    assert spelled and all(text.endswith(w) for w, text in spelled.items())  # repeats concatenate
    vocab, _, plain, _, _ = _sub_data({**spec, "train": {k: v for k, v in spec["train"].items() if k != "notes"}})
    _, _, with_words, _, _ = _sub_data(spec)
    (a, _), (b, _) = next(plain(None, 0, 1)), next(with_words(None, 0, 1))
    for x, y in ((a.forward, b.forward), (a.backward, b.backward)):  # without notes: no words, same pieces
        assert x.words is None and y.words is not None
        assert torch.equal(x.inputs, y.inputs) and torch.equal(x.targets, y.targets) and torch.equal(x.mask, y.mask)
    w = torch.from_numpy(paired[:, 1]).view(1, -1)  # a reversed stream (backward LM) keeps the occurrences
    (ids_f, ends_f), (ids_b, ends_b) = piece_words(w), piece_words(w.flip(1))
    assert torch.equal(ids_b, ids_f.flip(1)) and ends_b.unique().numel() == ends_f.unique().numel() == len(
        " ".join(lines[:3]).split()) + 6


def test_subword_notes_never_serve_their_window(sub):
    spec, _ = sub
    vocab, _, make_batches, _, _ = _sub_data(spec)
    torch.manual_seed(0)
    lm = BidirectionalLM.from_spec(spec, vocab)
    from elmoc.train.hooks.notes import build_notes

    notes = build_notes(spec, TrainSettings.from_config(spec["train"]), vocab, lm, torch.device("cpu"))
    batch, _ = next(make_batches(None, 0, 1))
    lm.eval()
    plain, _ = lm(batch)
    lm.notes = notes
    first, _ = lm(batch)
    assert torch.equal(first.loss_sum, plain.loss_sum) and len(notes.pending) == 2
    notes.commit()
    assert notes.seen.any()
    second, _ = lm(batch)
    assert not torch.equal(second.loss_sum, plain.loss_sum)


def test_subword_resume_equals_an_uninterrupted_run(sub, tmp_path):
    spec, _ = sub
    vocab, _, make_batches, _, _ = _sub_data(spec)
    train(spec, vocab, tmp_path / "full", make_batches, None, direction="joint")
    half = {**spec, "train": {**spec["train"], "max_steps": 7}}
    train(half, vocab, tmp_path / "resumed", make_batches, None, direction="joint")
    train(spec, vocab, tmp_path / "resumed", make_batches, None, direction="joint")
    a, b = (load_checkpoint(tmp_path / d / "checkpoint.pt") for d in ("full", "resumed"))
    assert a["step"] == b["step"] > 7 and a["notes"]["seen"].sum() > 0
    for key in ("notes", "seen", "row"):
        assert torch.equal(a["notes"][key], b["notes"][key])
    for key, value in a["model"].items():
        assert torch.equal(value, b["model"][key]), key


def test_subword_notes_need_the_word_vocabulary(tmp_path, tiny_lm):
    vocab, spec, make_batches, _ = tiny_lm
    spec = {**spec, "data": {"tokenizer": "tok.json"}, "train": {**spec["train"], "notes": NOTES}}
    with pytest.raises(ConfigError, match="train.notes.words"):
        train(spec, vocab, tmp_path / "sub", make_batches, None)
    words = {**spec, "data": {}, "train": {**spec["train"], "notes": {**NOTES, "words": "w.txt"}}}
    with pytest.raises(ConfigError, match="remove train.notes.words"):
        train(words, vocab, tmp_path / "word", make_batches, None)


# --- two gloo processes ---------------------------------------------------------------------
B, T, V, DIM, STEPS = 4, 6, 30, 6, 5


def _vocab():
    return Vocabulary.from_counts(Counter({f"w{i}": 100 - i for i in range(V - 4)}))


def _batches(position, rank, world):
    window = 0 if position is None else position["window"]
    per = B // world
    for w in range(window, STEPS):
        data = torch.tensor([[4 + (i * (3 + r)) % (V - 4) for i in range(w * T + 11 * r, w * T + 11 * r + T + 1)]
                             for r in range(B)])[rank * per:(rank + 1) * per]
        yield LMBatch(data[:, :-1], data[:, 1:], data[:, :-1] > 0), {"epoch": 0, "window": w + 1}


def _ddp_spec(tmp):
    vec = os.path.join(tmp, "vec.npy")
    return {"input": {"type": "fasttext", "vectors": vec},
            "encoder": {"type": "elmo_lstm", "num_layers": 1, "cell_size": 12, "projection_size": 6,
                        "recurrent_dropout": 0.0},
            "output": {"type": "cosine", "vectors": vec}, "optimizer": {"type": "adam", "lr": 0.01},
            "train": {"batch_size": B, "bptt": T, "log_every": 100, "checkpoint_every": 0, "seed": 5,
                      "notes": NOTES}}


def _worker(rank, port, tmp):
    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    import elmoc.train.hooks.notes as loop

    kept = {}
    build = loop.build_notes

    def keep(*args):
        kept["notes"] = build(*args)
        return kept["notes"]

    loop.build_notes = keep
    train(_ddp_spec(tmp), _vocab(), os.path.join(tmp, "ddp"), _batches, None)
    torch.save(kept["notes"].state_dict(), os.path.join(tmp, f"notes{rank}.pt"))
    finish_worker(tmp, rank, {})


def test_two_gloo_processes_keep_the_notes_of_one(tmp_path):
    spawn_runs(str(tmp_path), _worker, 2, V, DIM)
    ranks = [torch.load(tmp_path / f"notes{r}.pt") for r in range(2)]
    assert torch.equal(ranks[0]["notes"], ranks[1]["notes"]) and torch.equal(ranks[0]["seen"], ranks[1]["seen"])
    torch.set_num_threads(1)
    train(_ddp_spec(str(tmp_path)), _vocab(), tmp_path / "one", _batches, None)
    one = load_checkpoint(tmp_path / "one" / "checkpoint.pt")["notes"]
    assert one["seen"].sum() > 0 and torch.equal(one["seen"], ranks[0]["seen"])
    assert torch.allclose(one["notes"], ranks[0]["notes"], atol=1e-5)
