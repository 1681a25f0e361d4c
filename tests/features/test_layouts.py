"""Issue 45.4 / 53.5: the contiguous feature layout and float16 feature files.

Both layouts give the tasks identical features (float32 exactly; float16 as the float32
values rounded once), conversion round-trips, and a damaged file is refused in one line.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmoc.cli import main
from elmoc.errors import ConfigError, InputFileError
from elmoc.features.layouts import FEATURES_KEY, LAYOUT_ATTR, OFFSETS_KEY
from elmoc.features.store import INDEX_KEY, FeatureStore, convert_features, write_features
from elmoc.tasks.embedder import TaskInputs

sys.path.insert(0, str(Path(__file__).parent))
from test_streaming import WORDS, tiny_bilm  # noqa: E402

SENTENCES = [["the", "cat", "sat"], ["a", "dog"], ["the", "cat", "sat"], ["ran", "far", "away", "on", "a", "mat"],
             ["zebra"], ["dog", "dog", "dog", "the"]]  # a repeated sentence: its last key wins in the index


def _written(tmp_path: Path, layout: str, dtype: str = "float32") -> Path:
    out = tmp_path / f"{layout}-{dtype}.hdf5"
    write_features(tiny_bilm(), SENTENCES, out, batch_size=2, layout=layout, dtype=dtype)
    return out


def _batches():
    distinct = [s for i, s in enumerate(SENTENCES) if s not in SENTENCES[:i]]
    return [distinct[:3], distinct[3:], list(reversed(distinct)), [distinct[2]]]


def _chunked(path: Path, out: Path) -> Path:
    """``path`` rewritten with ``features`` chunked (as h5repack may leave it): not mappable."""
    with h5py.File(path, "r") as a, h5py.File(out, "w") as b:
        for key in a:
            b.create_dataset(key, data=a[key][()], chunks=True if key == FEATURES_KEY else None)
        b.attrs.update(dict(a.attrs))
    return out


def test_both_layouts_feed_the_tasks_identical_float32_features(tmp_path):
    per_sentence, contiguous = _written(tmp_path, "allennlp"), _written(tmp_path, "contiguous")
    with h5py.File(contiguous, "r") as h5:
        assert h5.attrs[LAYOUT_ATTR] == "contiguous" and h5[FEATURES_KEY].shape == (2, 19, 8)
        assert list(h5[OFFSETS_KEY][()]) == [0, 3, 5, 8, 14, 15, 19] and h5[FEATURES_KEY].chunks is None
    stores = {"allennlp in memory": FeatureStore(per_sentence),
              "allennlp lazy": FeatureStore(per_sentence, max_memory_bytes=0),
              "contiguous mapped": FeatureStore(contiguous),
              "contiguous chunked, in memory": FeatureStore(_chunked(contiguous, tmp_path / "c1.hdf5")),
              "contiguous chunked, lazy": FeatureStore(_chunked(contiguous, tmp_path / "c2.hdf5"), max_memory_bytes=0)}
    assert {s.layout for s in stores.values()} == {"allennlp", "contiguous"}
    reference = stores.pop("allennlp in memory")
    for batch in _batches():
        want = TaskInputs(store=reference).encode(batch)
        assert want.features.dtype == torch.float32 and want.features.is_contiguous()
        for name, store in stores.items():
            got = TaskInputs(store=store).encode(batch)
            assert got.features.dtype == torch.float32 and got.features.is_contiguous(), name
            assert torch.equal(got.features, want.features), name  # bit for bit, zero padding included
            assert torch.equal(got.mask, want.mask), name
    for tokens in SENTENCES:
        for store in stores.values():
            np.testing.assert_array_equal(store.get(tokens), reference.get(tokens))
    for store in [reference, *stores.values()]:
        store.close()


def test_float16_features_are_the_float32_ones_rounded_once_and_the_model_computes_in_float32(tmp_path):
    full = FeatureStore(_written(tmp_path, "allennlp"))
    files = {layout: _written(tmp_path, layout, "float16") for layout in ("allennlp", "contiguous")}
    for layout, path in files.items():
        half = FeatureStore(path)
        assert half.dtype == np.float16
        inputs, reference = TaskInputs(store=half), TaskInputs(store=full)
        embedder = inputs.embedder()
        for batch in _batches():
            got, want = inputs.encode(batch), reference.encode(batch)
            assert got.features.dtype == torch.float16
            rounded = want.features.half()
            assert torch.equal(got.features, rounded), layout  # float16 rounding of the float32 values, nothing else
            step = float(np.finfo(np.float16).eps)
            assert torch.all((got.features.float() - want.features).abs() <= step * want.features.abs() + 6e-8)
            out = embedder(got)
            assert out.dtype == torch.float32
            want.features = rounded.float()
            assert torch.equal(out, embedder(want)), layout  # the model sees the same float32 numbers
        half.close()
    full.close()


def test_float16_files_are_about_half_the_size(tmp_path):
    sentences = [[WORDS[(i + k) % len(WORDS)] for k in range(1 + i % 20)] for i in range(300)]
    sizes = {}
    for layout in ("allennlp", "contiguous"):
        for dtype in ("float32", "float16"):
            out = tmp_path / f"{layout}-{dtype}.hdf5"
            write_features(tiny_bilm(), sentences, out, layout=layout, dtype=dtype)
            sizes[layout, dtype] = out.stat().st_size
    # the tiny model's 8-d rows leave the per-dataset headers visible in the allennlp layout;
    # the contiguous file is rows and index only
    assert sizes["contiguous", "float16"] < 0.6 * sizes["contiguous", "float32"]
    assert sizes["allennlp", "float16"] < sizes["allennlp", "float32"]


def test_conversion_round_trips(tmp_path):
    original = _written(tmp_path, "allennlp")
    there = tmp_path / "there.hdf5"
    back = tmp_path / "back.hdf5"
    assert convert_features(original, there, "contiguous") == len(SENTENCES)
    assert convert_features(there, back, "allennlp") == len(SENTENCES)
    with h5py.File(original, "r") as a, h5py.File(back, "r") as b, h5py.File(there, "r") as c:
        assert sorted(a) == sorted(b)
        for key in a:
            if key != INDEX_KEY:
                assert a[key].dtype == b[key].dtype == np.float32
                np.testing.assert_array_equal(a[key][()], b[key][()])
                i = int(key)
                offsets = c[OFFSETS_KEY][()]
                np.testing.assert_array_equal(a[key][()], c[FEATURES_KEY][:, offsets[i]:offsets[i + 1]])
        assert a[INDEX_KEY][0] == b[INDEX_KEY][0] == c[INDEX_KEY][0]
        assert set(a.attrs) == {"num_layers", "dim", "boundaries", "open_vocabulary"}
        assert dict(a.attrs) == dict(b.attrs)
        assert {k: v for k, v in c.attrs.items() if k != LAYOUT_ATTR} == dict(a.attrs)
    # to float16 and back: the values rounded once, as extracting in float16 gives them
    half, widened = tmp_path / "half.hdf5", tmp_path / "widened.hdf5"
    convert_features(original, half, "contiguous", "float16")
    convert_features(half, widened, "allennlp", "float32")
    direct = _written(tmp_path, "contiguous", "float16")
    with h5py.File(half, "r") as h, h5py.File(direct, "r") as d:
        np.testing.assert_array_equal(h[FEATURES_KEY][()], d[FEATURES_KEY][()])
    with h5py.File(original, "r") as a, h5py.File(widened, "r") as w:
        for key in a:
            if key != INDEX_KEY:
                np.testing.assert_array_equal(w[key][()], a[key][()].astype(np.float16).astype(np.float32))


def _damage(tmp_path: Path, change) -> Path:
    path = _written(tmp_path, "contiguous")
    with h5py.File(path, "a") as h5:
        change(h5)
    return path


def _replace(key, value):
    def change(h5):
        del h5[key]
        h5.create_dataset(key, data=value)
    return change


@pytest.mark.parametrize(("change", "message"), [
    (_replace(OFFSETS_KEY, np.array([0, 3, 2, 8, 14, 15, 19])), "'offsets' must rise from 0 to 19"),
    (_replace(OFFSETS_KEY, np.array([0, 3, 5, 8, 14, 15, 18])), "'offsets' must rise from 0 to 19"),
    (_replace(OFFSETS_KEY, np.array([1, 3, 5, 8, 14, 15, 19])), "'offsets' must rise from 0 to 19"),
    (_replace(OFFSETS_KEY, np.array([0.0, 19.0])), "'offsets' must rise"),
    (_replace(OFFSETS_KEY, np.array([0, 19])), "but the file holds sentences 0-0"),
    (lambda h5: h5.__delitem__(OFFSETS_KEY), "layout 'contiguous' without the 'offsets' dataset"),
    (lambda h5: h5.__delitem__(FEATURES_KEY), "layout 'contiguous' without the 'features' dataset"),
    (_replace(FEATURES_KEY, np.zeros((19, 8))), "'features' has shape (19, 8); expected (layers, total_tokens, dim)"),
    (_replace(FEATURES_KEY, np.zeros((2, 19, 8))), "features stored as float64; expected one of float16, float32"),
    (lambda h5: h5.attrs.__setitem__(LAYOUT_ATTR, "sharded"), "unknown feature layout 'sharded'"),
])
def test_damaged_contiguous_files_are_refused_in_one_line(tmp_path, change, message, capsys):
    path = _damage(tmp_path, change)
    with pytest.raises(InputFileError) as caught:
        FeatureStore(path)
    assert message in str(caught.value) and str(path) in str(caught.value)
    capsys.readouterr()  # the progress bar of writing it
    assert main(["convert-features", str(path), str(tmp_path / "out.hdf5"), "--layout", "allennlp"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and err[0].startswith("elmoc convert-features: error:"), err
    assert not (tmp_path / "out.hdf5").exists()


def test_a_contiguous_file_still_checks_each_sentence(tmp_path):
    store = FeatureStore(_written(tmp_path, "contiguous"))
    with pytest.raises(InputFileError, match="no features for sentence 'x y'"):
        store.batch([["the", "cat", "sat"], ["x", "y"]])
    assert set(store.index.values()) == {"1", "2", "3", "4", "5"}
    bad = _damage(tmp_path / "bad", _replace(OFFSETS_KEY, np.array([0, 3, 5, 8, 14, 16, 19])))
    with pytest.raises(InputFileError, match="'4' has 2 token rows but the sentence 'zebra' has 1 tokens"):
        FeatureStore(bad).check(SENTENCES)
    store.close()


def test_bad_options_and_float16_overflow(tmp_path):
    with pytest.raises(ConfigError, match="layout must be one of allennlp, contiguous, got 'rows'"):
        write_features(tiny_bilm(), SENTENCES, tmp_path / "x.hdf5", layout="rows")
    with pytest.raises(ConfigError, match="dtype must be one of float32, float16, got 'bfloat16'"):
        write_features(tiny_bilm(), SENTENCES, tmp_path / "x.hdf5", dtype="bfloat16")
    with pytest.raises(ConfigError, match="the contiguous layout holds every layer"):
        write_features(tiny_bilm(), SENTENCES, tmp_path / "x.hdf5", layout="contiguous", layers="top")
    bilm = tiny_bilm()
    with torch.no_grad():
        for p in [*bilm.parameters(), *bilm.buffers()]:
            if p.is_floating_point():
                p.mul_(1e6)  # activations beyond float16's 65504
    with pytest.raises(ConfigError, match="overflows float16"):
        write_features(bilm, SENTENCES, tmp_path / "x.hdf5", dtype="float16")
    assert not (tmp_path / "x.hdf5").exists() and not list(tmp_path.iterdir())


def test_extract_and_embed_options_and_their_config_keys(monkeypatch, tmp_path):
    import importlib

    seen = []
    monkeypatch.setattr(importlib.import_module("elmoc.pretrained.loader"), "load_checkpoints", lambda *a, **k: "bilm")
    monkeypatch.setattr(importlib.import_module("elmoc.features.sentences"), "read_sentences", lambda path: [])
    monkeypatch.setattr(importlib.import_module("elmoc.features.store"), "write_features",
                        lambda *a, **k: seen.append((k["layout"], k["dtype"])))
    common = ["extract", "--forward", "f.pt", "--backward", "b.pt", "--sentences", "s.txt", "--output", "x.hdf5"]
    assert main(common) == 0
    assert main([*common, "--layout", "contiguous", "--dtype", "float16"]) == 0
    assert main([*common, "--section-json", json.dumps({"layout": "contiguous", "dtype": "float16"})]) == 0
    assert main([*common, "--section-json", "{}"]) == 0
    assert seen == [("allennlp", "float32"), ("contiguous", "float16"), ("contiguous", "float16"),
                    ("allennlp", "float32")]
    assert main([*common, "--section-json", json.dumps({"layout": "rows"})]) == 1
    assert main([*common, "--section-json", "{}", "--dtype", "float16"]) == 1
    assert len(seen) == 4


@pytest.mark.parametrize("layout", ["allennlp", "contiguous"])
def test_a_file_without_sentences_is_refused(tmp_path, layout):
    out = tmp_path / "empty.hdf5"
    assert write_features(tiny_bilm(), [], out, layout=layout) == 0
    with pytest.raises(InputFileError, match="holds no sentences"):
        FeatureStore(out)


def test_embed_writes_float16_in_the_allennlp_layout(elmo_fixture_dir, tmp_path, monkeypatch):
    """The bilm-tf test ELMo end to end: `elmoc embed --dtype float16` keeps the AllenNLP layout at half
    precision (the float32 values rounded once); `elmoc convert-features` makes it contiguous."""
    monkeypatch.chdir(tmp_path)
    options, weights = elmo_fixture_dir / "options.json", elmo_fixture_dir / "lm_weights.hdf5"
    assert main(["export", "--bilm-tf-options", str(options), "--bilm-tf-weights", str(weights), "--output-dir", "model"]) == 0
    Path("s.txt").write_text("the cat sat .\nA dog ran far away .\nthe cat sat .\nzebra\n", encoding="utf-8")
    assert main(["embed", "s.txt", "e32.hdf5", "--model", "model", "--all"]) == 0
    assert main(["embed", "s.txt", "e16.hdf5", "--model", "model", "--all", "--dtype", "float16"]) == 0
    assert main(["embed", "s.txt", "t16.hdf5", "--model", "model", "--top", "--dtype", "float16"]) == 0
    with h5py.File("e32.hdf5", "r") as a, h5py.File("e16.hdf5", "r") as b, h5py.File("t16.hdf5", "r") as t:
        assert sorted(a) == sorted(b) == ["0", "1", "2", "3", INDEX_KEY] and LAYOUT_ATTR not in b.attrs
        for key in ("0", "1", "2", "3"):
            assert a[key].dtype == np.float32 and b[key].dtype == t[key].dtype == np.float16
            np.testing.assert_array_equal(b[key][()], a[key][()].astype(np.float16))
            np.testing.assert_array_equal(t[key][()], a[key][()][-1].astype(np.float16))
    assert main(["convert-features", "e16.hdf5", "c16.hdf5", "--layout", "contiguous"]) == 0
    embedded, contiguous = FeatureStore("e16.hdf5"), FeatureStore("c16.hdf5")
    assert (embedded.layout, contiguous.layout, contiguous.dtype) == ("allennlp", "contiguous", np.float16)
    for line in Path("s.txt").read_text().splitlines():
        np.testing.assert_array_equal(contiguous.get(line.split()), embedded.get(line.split()))
