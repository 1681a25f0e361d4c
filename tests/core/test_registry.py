import pytest

from elmoc.errors import ConfigError
from elmoc.registry import build, by_name, register


@register("testkind", "toy")
class Toy:
    def __init__(self, size: int, input_dim: int = 0, scale: float = 1.0):
        self.size, self.input_dim, self.scale = size, input_dim, scale


def test_build_passes_config_and_only_accepted_context():
    toy = build("testkind", {"type": "toy", "size": 3}, input_dim=7, vocab="ignored")
    assert (toy.size, toy.input_dim, toy.scale) == (3, 7, 1.0)


def test_unknown_option_names_it_and_suggests():
    with pytest.raises(ConfigError, match=r"unknown key 'sise' \(did you mean 'size'\?\)"):
        build("testkind", {"type": "toy", "sise": 3})


def test_unknown_type_suggests_close_name():
    with pytest.raises(ConfigError, match="Did you mean 'toy'"):
        by_name("testkind", "tyo")


def test_context_key_in_config_is_rejected():
    with pytest.raises(ConfigError, match="set by the model builder"):
        build("testkind", {"type": "toy", "size": 1, "input_dim": 3}, input_dim=5)


def test_duplicate_registration_refused():
    with pytest.raises(ConfigError, match="already registered"):
        @register("testkind", "toy")
        class Other:  # noqa: F811
            pass


def test_missing_type():
    with pytest.raises(ConfigError, match="'type' key"):
        build("testkind", {"size": 1})
