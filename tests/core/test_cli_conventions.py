"""The command line's conventions (issue 46 item 6, issue 52 items 5 and 7): one output-flag
spelling per meaning (old ones accepted with one warning line), grouped `elmoc --help`, a
runnable example and the defaults in every command's help, no project history in help texts,
`-v` before or after the command, `--device` checked in one line by every command taking it."""
import argparse
import re
import shlex

import pytest

from elmoc.cli import GROUPS, _command_modules, build_parser, main
from elmoc.commands._options import HelpFormatter

MODULES = list(_command_modules())
NAMES = [m.NAME for m in MODULES]


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser([name])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _example_argv(module) -> list[str]:
    argv = shlex.split(module.EXAMPLE)
    assert argv[:2] == ["elmoc", module.NAME], module.EXAMPLE
    return argv[1:]


@pytest.mark.parametrize("module", MODULES, ids=NAMES)
def test_every_command_has_a_group_and_an_example_its_parser_accepts(module):
    assert getattr(module, "GROUP", None) in GROUPS, f"{module.NAME}: GROUP must be one of {list(GROUPS)}"
    argv = _example_argv(module)
    args = build_parser(argv).parse_args(argv)
    assert args.command == module.NAME
    assert f"example:\n  {module.EXAMPLE}" in _subparser(module.NAME).format_help()


@pytest.mark.parametrize("module", MODULES, ids=NAMES)
def test_every_option_with_a_default_shows_it_and_no_help_tells_project_history(module):
    parser = _subparser(module.NAME)
    formatter = HelpFormatter(parser.prog)
    for action in parser._actions:
        if action.option_strings and action.default not in (None, False, argparse.SUPPRESS):
            assert "default" in formatter._get_help_string(action).lower(), (module.NAME, action.option_strings)
    text = parser.format_help()
    history = re.findall(r"issue \d+|old name|old spelling|the behaviou?r before|formerly", text, re.IGNORECASE)
    assert not history, (module.NAME, history)


@pytest.mark.parametrize("module", MODULES, ids=NAMES)
def test_output_flags_are_spelled_output_or_output_dir(module):
    """A file written is --output, a folder --output-dir; --out and --out-dir are only deprecated spellings,
    never shown in --help."""
    parser = _subparser(module.NAME)
    for action in parser._actions:
        shown = [s for s in action.option_strings if s not in getattr(action, "deprecated", ())]
        assert not {"--out", "--out-dir"} & set(shown), (module.NAME, action.option_strings)
        if "--output-dir" in shown:
            assert action.dest == "output_dir" and action.metavar == "DIR", module.NAME
        if "--output" in shown:
            assert action.dest == "output" and action.metavar == "FILE", module.NAME
    help_text = parser.format_help()
    assert not re.search(r"--out(-dir)?\b(?!put)", help_text), module.NAME


def test_top_level_help_groups_the_commands_plumbing_under_internals(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    starts = [out.index(f"\n{title}:\n") for title in GROUPS.values()]
    assert starts == sorted(starts), "the headings in order: use, train, evaluate, internals"
    listed = re.findall(r"^  ([a-z]\S*)  ", out[starts[0]:], re.MULTILINE)
    assert sorted(listed) == sorted(NAMES), "every command listed once"
    internals = out[starts[-1]:]
    for plumbing in ("with-gpus", "task-sentences", "cnn-table", "tables"):
        assert re.search(rf"^  {plumbing} ", internals, re.MULTILINE), plumbing
    for user in ("train", "embed", "task", "export"):
        assert not re.search(rf"^  {user} ", internals, re.MULTILINE), user


def test_a_deprecated_output_spelling_still_works_with_one_warning_line(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "shard_000.txt").write_text("a b a\n", encoding="utf-8")
    assert main(["vocab", "--corpus", str(corpus), "--out", str(tmp_path / "v.txt")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["elmoc vocab: warning: --out is deprecated; use --output"], err
    assert (tmp_path / "v.txt").read_text(encoding="utf-8").startswith("<pad>")
    assert main(["vocab", "--corpus", str(corpus), "--output", str(tmp_path / "w.txt")]) == 0
    assert "deprecated" not in capsys.readouterr().err
    args = build_parser(["figures"]).parse_args(["figures", "--out-dir", "f"])
    assert args.output_dir == "f"
    assert "deprecated" in capsys.readouterr().err


@pytest.mark.parametrize("argv, verbose", [
    (["-v", "vocab", "--output", "v.txt"], True),
    (["vocab", "-v", "--output", "v.txt"], True),
    (["vocab", "--output", "v.txt", "--verbose"], True),
    (["vocab", "--output", "v.txt"], False),
])
def test_verbose_before_or_after_the_command(argv, verbose):
    assert build_parser(argv).parse_args(argv).verbose is verbose


DEVICE_COMMANDS = [m for m in MODULES if any(a.dest == "device" for a in _subparser(m.NAME)._actions)]


def test_the_commands_that_run_a_model_take_device():
    names = {m.NAME for m in DEVICE_COMMANDS}
    assert {"train", "prune", "lm-finetune", "distill", "task", "embed", "extract", "predict"} <= names, names


@pytest.mark.parametrize("module", DEVICE_COMMANDS, ids=[m.NAME for m in DEVICE_COMMANDS])
def test_device_cuda_without_cuda_is_one_line_and_exit_1(module, tmp_path, monkeypatch, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    monkeypatch.chdir(tmp_path)
    argv = [a for a in _example_argv(module)]
    if "--device" in argv:
        argv[argv.index("--device") + 1] = "cuda"
    else:
        argv += ["--device", "cuda"]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"elmoc {module.NAME}: error: --device cuda asked for, but CUDA is not available here; "
                   "use --device cpu"], err
    assert not any(tmp_path.iterdir()), "nothing written"


def test_device_auto_is_cpu_without_cuda_and_a_bad_name_is_one_line():
    import torch

    from elmoc.devices import check_device
    from elmoc.errors import ConfigError

    assert check_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert check_device("cpu") == "cpu"
    with pytest.raises(ConfigError, match="--device must be cpu, cuda, cuda:N or auto"):
        check_device("gpu0")


def test_no_command_module_imports_another():
    """A command parses, calls the library and reports: what two commands share lives in the library
    or in a helper module of the package whose name starts with ``_`` (commands/_options.py, _paths.py)."""
    import ast
    from pathlib import Path

    import elmoc.commands as package

    commands = {p.stem for p in Path(package.__path__[0]).glob("*.py") if not p.stem.startswith("_")}
    found = []
    for name in sorted(commands):
        tree = ast.parse((Path(package.__path__[0]) / f"{name}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "elmoc.commands":
                found += [(name, a.name) for a in node.names if a.name in commands]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("elmoc.commands."):
                if node.module.split(".")[2] in commands:
                    found.append((name, node.module))
            elif isinstance(node, ast.Import):
                found += [(name, a.name) for a in node.names
                          if a.name.startswith("elmoc.commands.") and a.name.split(".")[2] in commands]
    assert not found, found
