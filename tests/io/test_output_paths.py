"""An output never destroys what the command did not write (issue 30, items 1, 2 and 7):
folders a command replaces, outputs that are inputs, temporaries of killed runs."""
from __future__ import annotations

import fcntl
import http.server
import importlib
import json
import os
import pkgutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import elmoc.commands
from elmoc.cli import main
from elmoc.errors import OutputError
from elmoc.io.atomic import atomic_directory, atomic_path
from elmoc.io.output_paths import (MANIFEST, Terminated, check_output_directory, output_directory,
                                   refuse_outputs_among_inputs, remove_stale_temps, same_file, sigterm_as_interrupt)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _one_line_error(capsys, *words: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, err
    return err


# ------------------------------------------------------------------ 1. folders a command replaces


def test_output_folder_accepts_absent_empty_and_its_own(tmp_path):
    check_output_directory(tmp_path / "new", "export")
    (tmp_path / "empty").mkdir()
    check_output_directory(tmp_path / "empty", "export")
    with output_directory(tmp_path / "mine", "export") as tmp:
        (tmp / "a.txt").write_text("1")
    assert json.loads((tmp_path / "mine" / MANIFEST).read_text()) == {"command": "export", "files": ["a.txt"]}
    check_output_directory(tmp_path / "mine", "export")  # a rerun replaces its own output
    with output_directory(tmp_path / "mine", "export") as tmp:
        (tmp / "b.txt").write_text("2")
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == [MANIFEST, "b.txt"]


@pytest.mark.parametrize("content", ["training run", "notes", "other command", "file"])
def test_output_folder_refuses_what_it_did_not_write(tmp_path, content):
    target = tmp_path / "target"
    if content == "training run":
        for name in ("checkpoint.pt", "heldout.json", "train_log.jsonl", "train.log"):
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).write_text(name)
    elif content == "notes":
        (target / "sub").mkdir(parents=True)
        (target / "sub" / "notes.txt").write_text("keep me")
    elif content == "other command":
        with output_directory(target, "compress") as tmp:
            (tmp / "x").write_text("x")
    else:
        target.write_text("a file")
    before = _tree(tmp_path)
    with pytest.raises(OutputError) as e:
        with output_directory(target, "export") as tmp:
            (tmp / "new").write_text("new")
    assert "\n" not in str(e.value) and str(target) in str(e.value)
    if content == "other command":
        assert "an output of `elmoc compress`" in str(e.value)
    assert _tree(tmp_path) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_output_folder_refuses_one_holding_an_input_or_the_current_directory(tmp_path, monkeypatch):
    own = tmp_path / "own"
    with output_directory(own, "corpus") as tmp:
        (tmp / "train").mkdir()
    (own / "train" / "extra.txt").write_text("an input placed in an earlier output")
    with pytest.raises(OutputError, match="holds the input --source"):
        check_output_directory(own, "corpus", {"--source": [tmp_path / "elsewhere.txt", own / "train/extra.txt"]})
    with pytest.raises(OutputError, match="holds the input MODEL_DIR"):
        check_output_directory(own, "compress", {"MODEL_DIR": own})
    monkeypatch.chdir(own / "train")
    with pytest.raises(OutputError, match="current directory"):
        check_output_directory(own, "corpus")
    with pytest.raises(OutputError, match="current directory"):
        check_output_directory(".", "corpus")


def test_atomic_directory_of_dot_leaves_no_dotdot_folder(tmp_path, monkeypatch):
    """Before: ``atomic_directory(".")`` made ``..XXXX.old`` beside the tree and failed."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    with atomic_directory("sub/..") as tmp:
        (tmp / "a").write_text("a")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("..") or p.name.endswith(".old")]


def test_export_refuses_a_training_folder_and_any_other_folder(tmp_path, capsys):
    """``elmoc export --output DIR`` used to replace DIR whole: a training run's checkpoint,
    held-out record and logs, or ``keep/sub/notes.txt``, were deleted with exit status 0."""
    run = tmp_path / "results/lm/v/forward"
    run.mkdir(parents=True)
    for name in ("checkpoint.pt", "model.pt", "heldout.json", "train_log.jsonl"):
        (run / name).write_text(name)
    (tmp_path / "keep/sub").mkdir(parents=True)
    (tmp_path / "keep/sub/notes.txt").write_text("notes")
    other = tmp_path / "results/lm/w"
    for direction in ("forward", "backward"):
        (other / direction).mkdir(parents=True)
        (other / direction / "model.pt").write_text(direction)
    before = _tree(tmp_path)
    fwd, bwd = str(other / "forward/model.pt"), str(other / "backward/model.pt")
    for output, why in ((run, "holds a training run's model.pt and checkpoint.pt"), (run.parent, "not empty"),
                        (tmp_path / "keep", "not empty")):
        assert main(["export", "--forward", fwd, "--backward", bwd, "--output-dir", str(output)]) == 1
        _one_line_error(capsys, "elmoc export: error:", str(output), why)
    assert main(["export", "--forward", fwd, "--backward", bwd, "--output-dir", str(other)]) == 1
    _one_line_error(capsys, "holds the input --forward")
    assert _tree(tmp_path) == before


def test_compress_refuses_a_foreign_folder_before_measuring(tmp_path, capsys):
    (tmp_path / "box/model").mkdir(parents=True)
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep/notes.txt").write_text("notes")
    argv = ["compress", str(tmp_path / "box/model"), "--format", "float16", "--measure", str(tmp_path / "absent.txt")]
    assert main([*argv, "--output-dir", str(tmp_path / "keep")]) == 1
    _one_line_error(capsys, "elmoc compress: error:", "not empty")
    assert main([*argv, "--output-dir", str(tmp_path / "box")]) == 1
    _one_line_error(capsys, "holds the input MODEL_DIR")
    assert (tmp_path / "keep/notes.txt").read_text() == "notes"


def test_fetch_out_dot_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    """Before: ``elmoc fetch --out .`` ended in a traceback and left ``..XXXX.old``."""
    source = tmp_path / "data.txt"
    source.write_text("data\n")
    for name in ("empty", "full"):
        work = tmp_path / name
        work.mkdir()
        if name == "full":
            (work / "notes.txt").write_text("notes")
        monkeypatch.chdir(work)
        assert main(["fetch", str(source), "--sha256", "none", "--output-dir", "."]) == 1
        _one_line_error(capsys, "elmoc fetch: error:", "current directory")
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
        assert sorted(p.name for p in work.iterdir()) == (["notes.txt"] if name == "full" else [])


def test_fetch_replaces_its_own_output_but_no_other_folder(tmp_path, capsys):
    one, two = tmp_path / "one.txt", tmp_path / "two.txt"
    one.write_text("1\n")
    two.write_text("2\n")
    out = tmp_path / "dl/x"
    assert main(["fetch", str(one), "--sha256", "none", "--output-dir", str(out)]) == 0
    (out / ".fetch.json").unlink()  # what Snakemake does before it reruns the rule
    assert main(["fetch", str(two), "--sha256", "none", "--output-dir", str(out)]) == 0  # its own output: replaced
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, ".fetch.json", "two.txt"]
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "notes.txt").write_text("notes")
    assert main(["fetch", str(one), "--sha256", "none", "--output-dir", str(keep)]) == 1
    _one_line_error(capsys, "elmoc fetch: error:", "not empty")
    assert sorted(p.name for p in keep.iterdir()) == ["notes.txt"]
    assert main(["fetch", str(out / "two.txt"), "--sha256", "none", "--output-dir", str(out)]) == 1
    _one_line_error(capsys, "holds the input SOURCE")


def test_corpus_refuses_a_foreign_folder_and_reruns_into_its_own(tmp_path, capsys):
    text = tmp_path / "text.txt"
    text.write_text("".join(f"sentence number {i} .\n" for i in range(40)))
    out = tmp_path / "corpus"
    argv = ["corpus", "--source", f"lines:{text}", "--heldout", "4"]
    assert main([*argv, "--output-dir", str(out)]) == 0
    assert main([*argv, "--output-dir", str(out)]) == 0  # the workflow's rerun into its own folder
    keep = tmp_path / "keep"
    (keep / "sub").mkdir(parents=True)
    (keep / "sub/notes.txt").write_text("notes")
    assert main([*argv, "--output-dir", str(keep)]) == 1
    _one_line_error(capsys, "elmoc corpus: error:", "not empty")
    assert (keep / "sub/notes.txt").read_text() == "notes"
    inside = out / "train" / "shard_000.txt"
    assert main(["corpus", "--source", f"lines:{inside}", "--heldout", "4", "--output-dir", str(out)]) == 1
    _one_line_error(capsys, "holds the input --source")
    assert inside.is_file()


# ------------------------------------------------------------------ 2. an output is never an input


def test_same_file_sees_links_and_respellings(tmp_path, monkeypatch):
    f = tmp_path / "f.pt"
    f.write_bytes(b"weights")
    os.link(f, tmp_path / "hard.pt")
    (tmp_path / "soft.pt").symlink_to(f)
    monkeypatch.chdir(tmp_path)
    for other in ("f.pt", "./f.pt", "sub/../f.pt", str(f), "hard.pt", "soft.pt"):
        assert same_file(other, f), other
    assert not same_file("g.pt", f) and same_file("new/../g.pt", "g.pt")
    with pytest.raises(OutputError, match="--output is the same file as the input --forward"):
        refuse_outputs_among_inputs("extract", {"--output": "hard.pt"}, {"--forward": str(f), "--vocab": None})


def _argv_output_is_input(name: str, x: str, d: str) -> list[str]:
    """A command line of command ``name`` whose output is its input ``x`` (a file; ``d`` a folder)."""
    return {
        "bpe": ["bpe", "--corpus", d, "--output-dir", d],
        "cnn-table": ["cnn-table", "--checkpoint", x, "--vocab", "v.txt", "--output", x],
        "compression-table": ["compression-table", "--original", d, "--sentences", x, "--work-dir", "w",
                              "--output-dir", x],
        "compress": ["compress", d, "--output-dir", d, "--format", "float16", "--measure", "s.txt"],
        "convert-features": ["convert-features", x, x, "--layout", "contiguous"],
        "embed": ["embed", "--model", d, "--top", x, x],
        "export": ["export", "--forward", x, "--backward", "b.pt", "--output-dir", x],
        "extract": ["extract", "--forward", x, "--backward", "b.pt", "--sentences", "s.txt", "--output", x],
        "fasttext": ["fasttext", "--pretrained", x, "--output", x],
        "fetch": ["fetch", x, "--sha256", "none", "--output-dir", x],
        "spec": ["spec", "--config", x, "--variant", "v", "--output", x],
        "summary": ["summary", "--heldout", x, "--output", x],
        "predict": ["predict", "--task-model", d, x, "--output", x],
        "pretrain-table": ["pretrain-table", "--inputs", x, "--output", x],
        "results-page": ["results-page", "--summary", x, "--config", "c.yaml", "--output", x],
        "downstream-table": ["downstream-table", "--inputs", x, "--output", "t.md", "--runs-csv", x],
        "finetune-table": ["finetune-table", "--inputs", x, "--output", "t.md", "--csv", x],
        "paper-tables": ["paper-tables", "--heldout", x, "--output-dir", x],
        "beyond-table": ["beyond-table", "--tasks", x, "--output-dir", x],
        "figures": ["figures", "--bench", x, "--output-dir", x],
        "majority-baseline": ["majority-baseline", "--task", "t", "--config", x, "--output", x],
        "task": ["task", "--task", "t", "--variant", "v", "--features", x, "--output", x],
        "task-sentences": ["task-sentences", "--task", "t", "--config", x, "--output", x],
        "train": ["train", "--spec", x, "--direction", "forward", "--output-dir", x],
        "distill": ["distill", "--spec", "s.yaml", "--teacher", x, "--direction", "forward", "--output-dir", x],
        "prune": ["prune", "--model", x, "--direction", "forward", "--output-dir", x],
        "lm-finetune": ["lm-finetune", "--lm-dir", d, "--text", x, "--output-dir", x],
        "vectors": ["vectors", "--vocab", x, "--random", "--output", x],
        "vocab": ["vocab", "--from-file", x, "--output", x],
    }[name]


def _command_modules():
    return [importlib.import_module(f"elmoc.commands.{m.name}")
            for m in pkgutil.iter_modules(elmoc.commands.__path__) if not m.name.startswith("_")]


def test_every_command_declares_its_inputs_and_outputs():
    for module in _command_modules():
        assert isinstance(module.INPUTS, tuple) and isinstance(module.OUTPUTS, tuple), module.NAME


@pytest.mark.parametrize("name", sorted(m.NAME for m in _command_modules() if m.OUTPUTS and m.INPUTS))
def test_every_command_refuses_an_output_that_is_an_input(name, tmp_path, monkeypatch, capsys):
    """``elmoc embed --model M --top in.txt in.txt`` used to overwrite the sentences, ``elmoc
    extract --forward f.pt ... --output f.pt`` the trained weights; now every command refuses
    before any work, also through a hard link."""
    monkeypatch.chdir(tmp_path)
    Path("in.txt").write_text("the precious input\n")
    os.link("in.txt", "link.txt")
    Path("dir").mkdir()
    (Path("dir") / "shard_000.txt").write_text("a b c\n")
    before = _tree(tmp_path)
    for x in ("in.txt", str(tmp_path / "link.txt")):
        argv = _argv_output_is_input(name, x, "dir")
        if argv[-1] == x:
            argv[-1] = "./link.txt" if x == "in.txt" else x  # the output respelled: another name, one inode
        assert main(argv) == 1, argv
        _one_line_error(capsys, f"elmoc {name}: error:", "same file as the input")
    assert _tree(tmp_path) == before


def test_an_existing_file_in_an_input_folder_is_an_input(tmp_path, capsys):
    corpus, model = tmp_path / "train", tmp_path / "model"
    corpus.mkdir()
    model.mkdir()
    (corpus / "shard_000.txt").write_text("a b c\n")
    (model / "forward.pt").write_text("weights")
    (tmp_path / "in.txt").write_text("a b\n")
    before = _tree(tmp_path)
    assert main(["vocab", "--corpus", str(corpus), "--output", str(corpus / "shard_000.txt")]) == 1
    _one_line_error(capsys, "elmoc vocab: error:", "--output is a file in the input folder --corpus")
    assert main(["embed", "--model", str(model), "--top", str(tmp_path / "in.txt"), str(model / "forward.pt")]) == 1
    _one_line_error(capsys, "elmoc embed: error:", "OUTPUT_FILE is a file in the input folder --model")
    assert _tree(tmp_path) == before


def test_train_refuses_a_spec_among_its_output_files(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run/model.pt").write_text("input: {}\n")
    assert main(["train", "--spec", str(tmp_path / "run/model.pt"), "--direction", "forward",
                 "--output-dir", str(tmp_path / "run")]) == 1
    _one_line_error(capsys, "elmoc train: error:", "--output-dir holds the input --spec")
    assert (tmp_path / "run/model.pt").read_text() == "input: {}\n"


# ------------------------------------------------------------------ 7. temporaries of killed runs


def test_remove_stale_temps_takes_only_abandoned_temps_of_that_output(tmp_path):
    out = tmp_path / "k.h5"
    stale = [tmp_path / ".k.a1b2.tmp.h5", tmp_path / ".k.a1b2.tmp.h5.index", tmp_path / ".k.orphan.tmp.h5.index"]
    kept = [tmp_path / ".k.notes.h5", tmp_path / ".other.x1.tmp.h5", tmp_path / "k.h5", tmp_path / ".k.x.tmp.h5.bak"]
    held = tmp_path / ".k.busy.tmp.h5"
    for p in stale + kept + [held]:
        p.write_text("x")
    fd = os.open(held, os.O_RDONLY)  # a writer at work holds its temporary
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        removed = remove_stale_temps(out, companions=(".index",))
    finally:
        os.close(fd)
    assert sorted(removed) == sorted(stale)
    assert all(p.exists() for p in kept + [held]) and not any(p.exists() for p in stale)


def test_atomic_writers_hold_their_temporaries(tmp_path):
    out = tmp_path / "f.json"
    with atomic_path(out) as tmp:
        tmp.write_text("{}")
        assert remove_stale_temps(out) == [] and tmp.exists()
    with atomic_directory(tmp_path / "d") as tmp:
        assert remove_stale_temps(tmp_path / "d", directories=True) == [] and tmp.exists()


def test_killed_directory_replacement_gives_the_previous_output_back(tmp_path):
    """Killed between atomic_directory's two renames: the old output sits in ``.d.X.old/d``."""
    old = tmp_path / ".d.x1.old"
    (old / "d").mkdir(parents=True)
    (old / "d/a.txt").write_text("previous")
    (tmp_path / ".d.x2.tmp").mkdir()
    removed = remove_stale_temps(tmp_path / "d", directories=True)
    assert (tmp_path / "d/a.txt").read_text() == "previous"
    assert sorted(p.name for p in removed) == [".d.x1.old", ".d.x2.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


def test_sigterm_as_interrupt_raises_and_restores():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated):
        with sigterm_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    assert signal.getsignal(signal.SIGTERM) is before and Terminated.exit_status == 143


@pytest.fixture
def slow_server():
    """An HTTP server that announces 1 MB and sends it 1 KB every 50 ms (a download to interrupt)."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Length", str(1 << 20))
            self.end_headers()
            try:
                for _ in range(1024):
                    self.wfile.write(b"x" * 1024)
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:
                pass

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/big.bin"
    server.shutdown()
    server.server_close()


@pytest.mark.slow
def test_sigterm_during_fetch_is_a_clean_exit_and_a_stale_part_goes_next_run(tmp_path, slow_server):
    """Before: SIGTERM killed `elmoc fetch` (status -15) and left ``.cache/.big.bin.XXXX.part``,
    as SIGKILL does; the next run left it there for good."""
    cache, out = tmp_path / ".cache", tmp_path / "dl"
    cache.mkdir()
    killed = cache / ".big.bin.k1ll3d.part"  # what a SIGKILLed fetch leaves
    killed.write_bytes(b"x" * 10)
    unrelated = cache / ".big.bin.notes"
    unrelated.write_text("not ours")
    proc = subprocess.Popen([sys.executable, "-m", "elmoc.cli", "fetch", slow_server, "--sha256", "none",
                             "--allow-unpinned", "--output-dir", str(out), "--cache", str(cache)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        parts = [p for p in cache.glob(".big.bin.*.part") if p != killed]
        if parts and not killed.exists():  # the download runs (its bytes arrive 1 MB at a time)
            time.sleep(0.3)
            break
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail(f"no download started: {proc.communicate()}")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "elmoc fetch: terminated (SIGTERM)" in err
    assert sorted(p.name for p in cache.iterdir()) == [unrelated.name] and not out.exists()


def test_a_sigterm_swallowed_in_a_finalizer_still_stops_the_commit(tmp_path, monkeypatch):
    """CI saw `elmoc embed` exit 0 after SIGTERM: the handler's exception was raised inside a
    weakref callback, where Python prints "Exception ignored" and goes on.  The signal is
    remembered, so the atomic writer refuses to rename its temporary and the block ends with
    Terminated (exit 143) all the same; and the lost exception prints no traceback (CI's
    next run saw one on stderr)."""
    from elmoc.io.atomic import atomic_file

    reported = []
    recorder = lambda u: reported.append(u.exc_type)  # noqa: E731
    monkeypatch.setattr(sys, "unraisablehook", recorder)

    class SignalsWhenCollected:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(100_000):  # the handler runs here, between bytecodes, and its exception is lost
                pass

    went_on = False
    with pytest.raises(Terminated):
        with sigterm_as_interrupt(), atomic_file(tmp_path / "out.txt") as f:
            f.write("half")
            SignalsWhenCollected()  # collected at once
            went_on = True
    assert went_on, "the finalizer's exception was expected to be swallowed"
    assert reported == [], "the swallowed Terminated was reported as unraisable (a traceback on stderr)"
    assert sys.unraisablehook is recorder, "the hook before the block was not restored"
    assert not (tmp_path / "out.txt").exists() and not list(tmp_path.iterdir())
