"""Plug-ins (``ELMOC_PLUGINS``): a class registered in a file outside the package is built by the
registry and by an ``elmoc`` command; a bad entry is one line naming it and the fix."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from elmoc.errors import ConfigError
from elmoc.registry import PLUGINS, build, by_name, list_available

ELMOC = [sys.executable, "-c", "import sys; from elmoc.cli import main; sys.exit(main())"]
V, DIM, HIDDEN = 7, 5, 4

L1_OUTPUT = '''\
"""A continuous output layer in one file: the L1 distance to the target vector."""
import torch

from elmoc.outputs.continuous import ContinuousOutput
from elmoc.registry import register


@register("output", "{name}")
class L1Output(ContinuousOutput):
    loss_name = "{name}"

    def token_loss(self, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return (prediction - target).abs().sum(dim=-1)  # (batch, time)
'''


def write_plugin(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(text))
    return path


def test_plugin_output_layer_is_built_and_listed(tmp_path, monkeypatch):
    """Entries are imported in order, once: the second plug-in subclasses the first's layer,
    looked up by name while it is imported; a file registering nothing is fine."""
    marks = tmp_path / "imported.txt"
    first = write_plugin(tmp_path, "first", L1_OUTPUT.format(name="plugin_l1_first")
                         + f"\nopen({str(marks)!r}, 'a').write('first\\n')\n")
    second = write_plugin(tmp_path, "second", f'''\
        from elmoc.registry import by_name, register

        @register("output", "plugin_l1_second")
        class HalfL1(by_name("output", "plugin_l1_first")):
            def token_loss(self, prediction, target):
                return 0.5 * super().token_loss(prediction, target)

        open({str(marks)!r}, "a").write("second\\n")
        ''')
    nothing = write_plugin(tmp_path, "nothing", "VALUE = 1\n")
    np.save(tmp_path / "vec.npy", np.random.default_rng(0).standard_normal((V, DIM)).astype("float32"))
    monkeypatch.setenv(PLUGINS, os.pathsep.join([str(nothing), str(first), "", str(second)]))

    layer = build("output", {"type": "plugin_l1_second", "vectors": str(tmp_path / "vec.npy")},
                  hidden_dim=HIDDEN, vocab=range(V), input_layer=None)
    assert type(layer).__name__ == "HalfL1" and layer.registered_name == "plugin_l1_second"
    assert {"plugin_l1_first", "plugin_l1_second", "cosine"} <= set(list_available("output"))
    assert by_name("output", "plugin_l1_first").__module__ == "elmoc_plugin_first"
    prediction, target = torch.ones(1, 2, DIM), torch.zeros(1, 2, DIM)
    assert layer.token_loss(prediction, target).tolist() == [[DIM / 2, DIM / 2]]
    assert marks.read_text() == "first\nsecond\n"  # in order, and once despite the lookups since


def plugin_spec(folder: Path, output_type: str) -> Path:
    spec = yaml.safe_load((Path(__file__).resolve().parents[2] / "config/lm/elmo-c.yaml").read_text())
    spec.update(name="elmo-plugin", output={"type": output_type, "vectors": "results/vectors/cc.npy"})
    path = folder / "elmo-plugin.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def elmoc_params(folder: Path, plugins: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != PLUGINS}
    if plugins is not None:
        env[PLUGINS] = plugins
    return subprocess.run(ELMOC + ["params", "--preset", "elmo-plugin.yaml", "--vocab-size", "100", "--json"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def test_elmoc_command_builds_a_plugin_layer(tmp_path):
    """`elmoc params` builds the spec's plug-in output layer (as many weights as the cosine
    layer it varies); without ELMOC_PLUGINS the type is unknown, and a bad entry is one line."""
    write_plugin(tmp_path, "l1_output", L1_OUTPUT.format(name="plugin_l1"))
    plugin_spec(tmp_path, "plugin_l1")
    done = elmoc_params(tmp_path, "l1_output.py")  # relative to the working directory
    assert done.returncode == 0, done.stderr
    [row] = json.loads(done.stdout)
    assert row["variant"] == "elmo-plugin" and row["output"] == 512 * 300 + 300

    missing = elmoc_params(tmp_path, None)
    assert missing.returncode == 1 and "unknown output type 'plugin_l1'" in missing.stderr

    bad = elmoc_params(tmp_path, os.pathsep.join(["l1_output.py", "l1_outptu.py"]))
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        f"elmoc params: error: {PLUGINS} entry 'l1_outptu.py': no such file (from {tmp_path}); give the path "
        f"of a .py file, or remove the entry from {PLUGINS}"]


BAD_PLUGINS = {
    "missing file": (None, "no_such_plugin.py", r"entry 'no_such_plugin\.py': no such file .*give the path"),
    "missing module": (None, "no_such_plugin_module",
                       r"entry 'no_such_plugin_module': no module of that name; give the path of its \.py file"),
    "raises": ("raise RuntimeError('needs a GPU\\nsecond line')\n", "raises.py",
               r"entry '.*raises\.py' could not be imported \(RuntimeError: needs a GPU\); fix it or remove"),
    "syntax error": ("def broken(:\n", "syntax.py", r"entry '.*syntax\.py' could not be imported \(SyntaxError: "),
    "missing dependency": ("import no_such_dependency\n", "dependency.py",
                           r"could not be imported \(ModuleNotFoundError: No module named 'no_such_dependency'\)"),
    "built-in name": ('from elmoc.registry import register\n@register("output", "cosine")\nclass Mine:\n    pass\n',
                      "clash.py", r"\(ConfigError: output name 'cosine' is already registered to CosineOutput; "
                                  r"choose another name for Mine\)"),
}


@pytest.mark.parametrize("case", sorted(BAD_PLUGINS))
def test_bad_entry_is_one_line_naming_it(case, tmp_path, monkeypatch):
    text, entry, message = BAD_PLUGINS[case]
    if text is not None:
        entry = str(write_plugin(tmp_path, Path(entry).stem, text))
    monkeypatch.setenv(PLUGINS, entry)
    with pytest.raises(ConfigError, match=message) as err:
        by_name("output", "cosine")
    assert "\n" not in str(err.value) and f"{PLUGINS} entry" in str(err.value)
    with pytest.raises(ConfigError, match=message):  # refused again, not taken as imported
        list_available("input")
    monkeypatch.delenv(PLUGINS)
    assert by_name("output", "cosine").__name__ == "CosineOutput"
