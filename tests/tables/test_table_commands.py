"""One command per kind of table (issue 32 item 5), and `elmoc tables KIND`, their old spelling."""
import pytest

from elmoc.cli import main
from elmoc.commands import tables


def test_every_kind_of_the_old_spelling_is_a_command():
    import argparse
    import importlib

    for kind, module in tables.KINDS.items():
        command = importlib.import_module(f"elmoc.commands.{module}")
        assert command.NAME == module.replace("_", "-")
        for old, new in tables.RENAMED.get(kind, {}).items():
            parser = argparse.ArgumentParser()
            command.add_arguments(parser)
            assert any(new in a.option_strings for a in parser._actions), (kind, old, new)


def test_the_old_spelling_refuses_an_output_that_is_an_input(results, tmp_path, capsys):
    heldout = str(results["heldout"][0])
    before = open(heldout).read()
    assert main(["tables", "pretrain", "--inputs", heldout, f"--output={heldout}"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("elmoc tables: error:") and "same file as the input" in err[0], err
    assert open(heldout).read() == before


def test_the_old_spelling_writes_what_the_command_writes(results, tmp_path, capsys):
    tasks = [str(p) for p in results["tasks"]]
    assert main(["downstream-table", "--inputs", *tasks, "--output", str(tmp_path / "new.md")]) == 0
    assert main(["tables", "downstream", "--inputs", *tasks, "--output", str(tmp_path / "old.md")]) == 0
    assert (tmp_path / "new.md").read_bytes() == (tmp_path / "old.md").read_bytes()


def test_a_flag_of_another_kind_is_refused(results, tmp_path, capsys):
    with pytest.raises(SystemExit):  # argparse: the kind's command has no --output-dir
        main(["tables", "pretrain", "--inputs", str(results["heldout"][0]), "--output", str(tmp_path / "p.md"),
              "--output-dir", str(tmp_path)])
    assert "unrecognized arguments: --output-dir" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["paper-tables", "beyond-table"])
def test_a_table_folder_that_holds_the_bench_input_is_written_into_and_the_input_kept(command, results, tmp_path,
                                                                                       capsys):
    """The workflow runs `paper-tables --bench results/tables/bench.json --output-dir results/tables` (and
    beyond-table likewise): the folder holds an input, but the command writes only its tables' files
    there, so the one output rule (docs/safety.md) must not refuse it; an input that is one of those
    files is still refused."""
    import importlib

    module = importlib.import_module(f"elmoc.commands.{command.replace('-', '_')}")
    out = tmp_path / "tables"
    out.mkdir()
    bench = out / "bench.json"
    bench.write_text("{}", encoding="utf-8")
    heldout = [str(p) for p in results["heldout"]]
    assert main([command, "--heldout", *heldout, "--bench", str(bench), "--output-dir", str(out)]) == 0
    assert bench.read_text(encoding="utf-8") == "{}"
    written = sorted(p.name for p in out.iterdir() if p.name != "bench.json")
    assert written == sorted(f"{name}.{suffix}" for name in module.TABLES for suffix in ("md", "csv", "tex", "html"))
    capsys.readouterr()
    target = out / f"{module.TABLES[0]}.md"
    assert main([command, "--heldout", *heldout, "--bench", str(target), "--output-dir", str(out)]) == 1
    assert "error:" in capsys.readouterr().err
