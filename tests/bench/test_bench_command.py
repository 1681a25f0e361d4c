"""`elmoc bench --quick` prints both paper tables (structure only; no timing assertions)."""
from __future__ import annotations

import json

import pytest

from elmoc.bench.scenarios import TABLE4_ROWS, Scale, build_spec
from elmoc.bench.speed import BenchSettings, bilm_parameters
from elmoc.cli import main
from elmoc.errors import ConfigError


@pytest.mark.slow
def test_quick_bench_prints_tables_4_and_5(tmp_path, capsys):
    code = main(["bench", "--quick", "--output-dir", str(tmp_path), "--scratch", str(tmp_path / "scratch")])
    assert code == 0
    out = capsys.readouterr().out
    assert "## Table 4" in out and "## Table 5" in out and "## ELMo LSTM kernel" in out
    for label in ("CONT", "FIXED", "SUBWORD", "ADAPTIVE 40K", "ADAPTIVE 800K", "ADAPTIVE 2000K",
                  "SAMPLED 40K", "SAMPLED 800K", "SAMPLED 2000K"):
        assert f"| {label} |" in out
    assert "| Layer | LSTM | LSTMX2 | TRANS BASE | ELMO | TRANS LARGE | GPT |" in out
    result = json.loads((tmp_path / "bench.json").read_text())
    assert len(result["table4"]) == 9 and len(result["table5"]) == 30
    assert all(r["max_batch"] >= 1 for r in result["table4"])
    assert result["table4"][0]["s1_ratio"] == 1.0
    assert (tmp_path / "table4.csv").read_text().startswith("label,")


def test_paper_size_parameter_counts_match_table_4():
    """Spec P27 / Table 4: 76M CONT, 483M SAMPLED 800K, 1102M SAMPLED 2000K (bi-LM convention)."""
    counts = {f"{layer} {v}" if v else layer: bilm_parameters(build_spec(layer, v, "ELMO", Scale(), None))
              for layer, v in TABLE4_ROWS}
    assert round(counts["CONT"] / 1e6) == 76
    assert round(counts["SAMPLED 40K"] / 1e6) == 96
    assert abs(counts["SAMPLED 800K"] / 1e6 - 483) < 5
    assert abs(counts["SAMPLED 2000K"] / 1e6 - 1102) < 2
    assert abs(counts["SUBWORD"] / 1e6 - 92) < 2


def test_bad_settings_raise_config_error():
    with pytest.raises(ConfigError):
        BenchSettings(width_scale=0.0)
    with pytest.raises(ConfigError):
        BenchSettings(repeats=0)
    assert main(["bench", "--tables", "6"]) == 1
    assert main(["bench", "--table4-rows", "CONT,ADAPTIVE 1M"]) == 1
    assert main(["bench", "--scenarios", "s1,s4"]) == 1


def test_adaptive_rows_use_the_elmo_a_preset(repo_root):
    """The bench times the ELMo-A that Table 2 trains: same cutoffs, so 97M / 196M (spec 3.2, Table 4)."""
    from elmoc.bench.scenarios import ELMO_A_CUTOFFS
    from elmoc.config import load_yaml

    assert list(ELMO_A_CUTOFFS) == load_yaml(repo_root / "config" / "lm" / "elmo-a.yaml")["output"]["cutoffs"]
    counts = {v: bilm_parameters(build_spec("ADAPTIVE", v, "ELMO", Scale(), None)) for v in ("40K", "800K", "2000K")}
    assert abs(counts["40K"] / 1e6 - 97) < 2
    assert abs(counts["800K"] / 1e6 - 196) / 196 < 0.02
    assert counts["40K"] < counts["800K"] < counts["2000K"]


def test_adaptive_2000k_has_the_papers_213m():
    """Table 4's ADAPTIVE 2000K is 213M: ELMo-A's cutoffs plus a third (ELMo-A's alone give 236M)."""
    from elmoc.bench.scenarios import ADAPTIVE_2000K_CUTOFF, ELMO_A_CUTOFFS

    model = build_spec("ADAPTIVE", "2000K", "ELMO", Scale(), None)
    assert model.spec["output"]["cutoffs"] == [*ELMO_A_CUTOFFS, ADAPTIVE_2000K_CUTOFF]
    assert round(bilm_parameters(model) / 1e6) == 213
    # the extra cutoff lies beyond the 800K vocabulary, so ADAPTIVE 800K keeps ELMo-A's model
    assert build_spec("ADAPTIVE", "800K", "ELMO", Scale(), None).spec["output"]["cutoffs"] == list(ELMO_A_CUTOFFS)


def test_softmax_rows_count_the_joint_bi_lm():
    """ADAPTIVE / SAMPLED / SUBWORD rows count the joint bi-LM the pipeline trains (one
    softmax); CONT / FIXED two separate directions; both equal the paper's convention."""
    from elmoc.params import count_parameters

    for layer, v in TABLE4_ROWS:
        model = build_spec(layer, v, "ELMO", Scale(0.25, 0.01), None)
        counts = count_parameters(model.spec, model.vocab_size, ignore_files=True)
        assert bilm_parameters(model) == counts["paper"], layer
        if layer in ("ADAPTIVE", "SAMPLED", "SUBWORD"):
            assert bilm_parameters(model) < counts["trained"] == 2 * counts["per_direction"], layer
