import pytest

from elmoc.errors import ConfigError
from elmoc.registry import accepted_arguments, build, by_name, register


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


@register("testkind", "toy_plus")
class ToyPlus(Toy):
    """Adds one option and passes the rest to its parent: it accepts its parent's names too."""

    def __init__(self, shift: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.shift = shift


@register("testkind", "toy_plus_more")
class ToyPlusMore(ToyPlus):  # two levels, no constructor of its own on the way
    pass


@register("testkind", "toy_open")
class ToyOpen:
    """``**kwargs`` that reaches a base naming no option: takes any keyword, as before."""

    def __init__(self, size: int, **options):
        self.size, self.options = size, options


def test_options_are_read_along_the_class_hierarchy():
    assert accepted_arguments(ToyPlus) == ({"shift", "size", "input_dim", "scale"}, False)
    toy = build("testkind", {"type": "toy_plus_more", "size": 3, "scale": 2.0, "shift": 1}, input_dim=7, vocab="x")
    assert (toy.size, toy.input_dim, toy.scale, toy.shift) == (3, 7, 2.0, 1)  # context named up the chain only


def test_a_subclass_refuses_unknown_keys_with_a_suggestion():
    with pytest.raises(ConfigError, match=r"unknown key 'sclae' \(did you mean 'scale'\?\)"):
        build("testkind", {"type": "toy_plus", "size": 3, "sclae": 2.0})
    with pytest.raises(ConfigError, match="set by the model builder"):
        build("testkind", {"type": "toy_plus", "size": 1, "input_dim": 3}, input_dim=5)


def test_kwargs_reaching_a_bare_base_take_anything():
    assert accepted_arguments(ToyOpen) == ({"size"}, True)
    toy = build("testkind", {"type": "toy_open", "size": 2, "colour": "red"}, input_dim=4)
    assert toy.options == {"colour": "red", "input_dim": 4}
