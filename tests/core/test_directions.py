"""elmoc.directions: the one decider of which runs a spec trains. ``train.directions: forward``
(the GPT presets: the paper's GPT is "a uni-directional Transformer", section 5.2.2) is one
forward LM; the two-direction Transformers (TRANS BASE, TRANS LARGE) keep forward and backward."""
from pathlib import Path

import pytest
import yaml

from elmoc.directions import check_run, one_direction, runs, single_run
from elmoc.errors import ConfigError

PRESETS = Path(__file__).resolve().parents[2] / "config/lm"


def spec(directions=None, objective=None):
    train = {k: v for k, v in (("directions", directions), ("objective", objective)) if v is not None}
    return {"train": train}


def test_runs_of_each_setting():
    assert runs(spec()) == ("forward", "backward") and runs(spec("separate")) == ("forward", "backward")
    assert runs(spec("joint")) == ("joint",)
    assert runs(spec("forward")) == ("forward",) and one_direction(spec("forward"))
    assert not one_direction(spec()) and not one_direction(spec("joint"))
    assert runs(spec(objective="masked_lm")) == ("masked",)
    with pytest.raises(ConfigError, match="does not apply to a masked LM"):  # one model, no directions
        runs(spec("forward", "masked_lm"))
    with pytest.raises(ConfigError, match=r"'forward' \(one forward LM\), got 'backward'"):
        runs(spec("backward"))


def test_single_run_is_a_file_read_as_both_directions_never_a_forward_lm():
    assert single_run(("joint",)) == "joint" and single_run(["masked"]) == "masked"
    assert single_run(("forward",)) is None and single_run(("forward", "backward")) is None


def test_a_one_direction_spec_trains_forward_only():
    check_run(spec("forward"), "forward")
    for direction, needle in (("backward", "train it with --direction forward"),
                              ("joint", "train it with --direction forward"),
                              ("masked", "set train.objective: masked_lm")):
        with pytest.raises(ConfigError, match=needle) as e:
            check_run(spec("forward"), direction, "gpt.yaml")
        assert str(e.value).startswith("gpt.yaml:") and "\n" not in str(e.value)


def test_gpt_presets_train_one_forward_lm_and_the_two_direction_transformers_two():
    presets = {p.stem: yaml.safe_load(p.read_text()) for p in PRESETS.glob("*.yaml")}
    gpt = [name for name in presets if name.startswith("gpt-")]
    assert sorted(gpt) == ["gpt-a", "gpt-c", "gpt-c-tupe", "gpt-fixed", "gpt-sampled", "gpt-sub"]
    for name in gpt:  # declared in the preset, not guessed from the name
        assert presets[name]["train"]["directions"] == "forward", name
        assert runs(presets[name]) == ("forward",), name
    for name, preset in presets.items():
        if name.startswith(("trans-base-", "trans-large-")):
            assert runs(preset) in (("forward", "backward"), ("joint",)), name
            assert preset["train"].get("directions", "separate") in ("separate", "joint"), name
