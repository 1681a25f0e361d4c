"""Every key is checked in every command: a misspelled key of any ``--section-json`` (and of
``elmoc params --config``) is one line naming it and the closest known key, exit 1, nothing written."""
from __future__ import annotations

import json

import pytest
import yaml

from elmoc.cli import main
from elmoc.errors import ConfigError

SST = {"type": "sst", "format": "polarity", "granularity": "2-class", "train": "x.cor"}

# command line (OUT: the output path) -> (the misspelled key, the suggestion); one case per
# command that takes --section-json, and one per nested mapping a command reads
CASES = {
    "fetch": (["fetch", "--output-dir", "OUT", "--section-json",
               {"source": "x.bin", "sha256": "none", "member": ["a"]}], "member", "members"),
    "corpus": (["corpus", "--output-dir", "OUT", "--section-json",
                {"sources": [{"format": "lines", "path": "a.txt"}], "sed": 3}], "sed", "seed"),
    "corpus-lowercase": (["corpus", "--output-dir", "OUT", "--section-json",
                          {"sources": [{"format": "lines", "path": "a.txt"}], "lowercas": True}], "lowercas", "lowercase"),
    "corpus-source": (["corpus", "--output-dir", "OUT", "--section-json",
                       {"sources": [{"fromat": "lines", "path": "a.txt"}]}], "fromat", "format"),
    "vocab": (["vocab", "--corpus", "train", "--output", "OUT", "--section-json", {"max_sise": 3}], "max_sise", "max_size"),
    "fasttext": (["fasttext", "--name", "cc", "--output", "OUT", "--section-json",
                  {"eval": {}, "models": {"cc": {"pretrained": {"paht": "cc.bin"}}}}], "paht", "path"),
    "fasttext-model": (["fasttext", "--name", "cc", "--corpus", "train", "--output", "OUT", "--section-json",
                        {"models": {"cc": {"trian": {"dim": 3}}}}], "trian", "train"),
    "fasttext-train": (["fasttext", "--name", "cc", "--corpus", "train", "--output", "OUT", "--section-json",
                        {"models": {"cc": {"train": {"epochs": 3}}}}], "epochs", "epoch"),
    "vectors": (["vectors", "--vocab", "vocab.txt", "--random", "--output", "OUT", "--section-json",
                 {"dim": 3, "sed": 1}], "sed", "seed"),
    "bpe": (["bpe", "--corpus", "train", "--output-dir", "OUT", "--section-json", {"bpe_merge": 3}], "bpe_merge", "bpe_merges"),
    "spec": (["spec", "--output", "OUT", "--section-json", {"trian": {}}], "trian", "train"),
    "spec-data": (["spec", "--output", "OUT", "--section-json", {"data": {"heldot": "h.txt"}}], "heldot", "heldout"),
    "extract": (["extract", "--forward", "f.pt", "--backward", "b.pt", "--sentences", "s.txt", "--output", "OUT",
                 "--section-json", {"boundary": False}], "boundary", "boundaries"),
    "bench": (["bench", "--output-dir", "OUT", "--section-json", {"repeat": 2}], "repeat", "repeats"),
    "task": (["task", "--task", "sst5", "--variant", "v", "--output", "OUT", "--section-json",
              {**SST, "granularty": "2-class"}], "granularty", "granularity"),
    "task-runner-key": (["task", "--task", "sst5", "--variant", "v", "--output", "OUT", "--section-json",
                         {**SST, "with_fastext": True}], "with_fastext", "with_fasttext"),
    "task-trainer": (["task", "--task", "sst5", "--variant", "v", "--output", "OUT", "--section-json",
                      {**SST, "train": None, "trainer": {"batch_sise": 8}}], "batch_sise", "batch_size"),
    "task-sentences": (["task-sentences", "--task", "sst5", "--output", "OUT", "--section-json",
                        {**SST, "model": {"pre_encode_dmi": 8}}], "pre_encode_dmi", "pre_encode_dim"),
    "majority-baseline": (["majority-baseline", "--task", "sst5", "--output", "OUT", "--section-json",
                           {**SST, "encodng": "utf-8"}], "encodng", "encoding"),
    "distill": (["distill", "--spec", "s.yaml", "--teacher", "t.pt", "--direction", "forward", "--output-dir", "OUT",
                 "--section-json", {"lm_wieght": 1}], "lm_wieght", "lm_weight"),
    "prune": (["prune", "--model", "m.pt", "--direction", "forward", "--output-dir", "OUT", "--section-json",
               {"levls": [0.5]}], "levls", "levels"),
    "lm-finetune": (["lm-finetune", "--lm-dir", "../lm", "--text", "../t.txt", "--output-dir", "OUT", "--section-json",
                     {"epoch": 2}], "epoch", "epochs"),
    "config-dump": (["config-dump", "--output", "OUT", "--section-json",
                     {"scale": "demo", "pretrian": {}}], "pretrian", "pretrain"),
    # the old spelling of both, and its old flag name
    "tables-majority": (["tables", "majority", "--task", "sst5", "--output", "OUT", "--config-json",
                         {**SST, "encodng": "utf-8"}], "encodng", "encoding"),
    "tables-config": (["tables", "config", "--output", "OUT", "--section-json",
                       {"scale": "demo", "pretrian": {}}], "pretrian", "pretrain"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_misspelled_key_is_one_line_naming_it_and_nothing_is_written(case, tmp_path, monkeypatch, capsys):
    argv, bad, good = CASES[case]
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    argv = [str(out) if a == "OUT" else json.dumps(a) if isinstance(a, dict) else a for a in argv]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"unknown key {bad!r} (did you mean {good!r}?)" in err, err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == []


def test_every_command_taking_section_json_has_a_case():
    """A new command with --section-json needs its case above."""
    import argparse

    from elmoc.cli import build_parser

    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    taking = {name for name, sub in subs.choices.items()
              if any("--section-json" in a.option_strings for a in sub._actions)}
    covered = {argv[0] for argv, _, _ in CASES.values()}
    assert taking - covered == set()


def test_params_config_names_a_misspelled_key(tmp_path, repo_root, capsys, monkeypatch):
    config = yaml.safe_load((repo_root / "config" / "config.yaml").read_text())
    config["pretrain"]["overides"] = config["pretrain"].pop("overrides")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.chdir(repo_root)
    assert main(["params", "--config", str(tmp_path / "c.yaml")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pretrain: unknown key 'overides' (did you mean 'overrides'?)" in err, err


def test_a_spec_layer_names_where_the_key_was_set(tmp_path):
    from elmoc.config import resolve_variant

    (tmp_path / "p.yaml").write_text(yaml.safe_dump({"train": {"batch_size": 4}}))
    config = {"pretrain": {"presets_dir": str(tmp_path), "variants": {"v": {"preset": "p", "overrides": {"optimiser": {}}}}}}
    with pytest.raises(ConfigError, match=r"pretrain.variants.v.overrides: unknown key 'optimiser' \(did you mean 'optimizer'\?\)"):
        resolve_variant(config, "v")
    config["pretrain"]["variants"]["v"] = {"preset": "p", "overides": {}}
    with pytest.raises(ConfigError, match=r"pretrain.variants.v: unknown key 'overides'"):
        resolve_variant(config, "v")


def test_check_keys_lists_every_unknown_key():
    from elmoc.config_section import Section, check_keys

    check_keys({"a": 1}, ("a", "b"), "x")
    with pytest.raises(ConfigError, match=r"config x: unknown keys 'bogus', 'sed' \(did you mean 'seed'\?\); known keys: a, seed"):
        check_keys({"sed": 1, "bogus": 2}, ("seed", "a"), "x")
    with pytest.raises(ConfigError, match="config s.sub: unknown key 'c'"):
        Section({"sub": {"c": 1}}, "s").sub("sub", keys=("a",))


def test_train_and_params_name_a_misspelled_spec_key(tmp_path, repo_root, capsys, monkeypatch):
    spec = yaml.safe_load((repo_root / "config" / "lm" / "elmo-c.yaml").read_text())
    spec["trian"] = spec.pop("train")
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    monkeypatch.chdir(tmp_path)
    for argv in (["train", "--spec", str(path), "--direction", "forward", "--output-dir", str(tmp_path / "out")],
                 ["params", "--preset", str(path)]):
        assert main(argv) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"config {path}: unknown key 'trian' (did you mean 'train'?)" in err, err
    assert not (tmp_path / "out").exists()
