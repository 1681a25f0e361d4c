"""The trainer's progress line on the workflow's console (issue 52): step, loss and a
non-negative ETA; a step total that was only an estimate is dropped once passed."""
from __future__ import annotations

import itertools
import os
import re

from elmoc.io.console import FD_ENV, SECONDS_ENV, console_env
from elmoc.train.loop import train


def test_console_lines_have_step_loss_and_a_non_negative_eta(tmp_path, tiny_lm, monkeypatch):
    vocab, spec, make_batches, make_heldout = tiny_lm
    spec = {**spec, "train": {**spec["train"], "max_steps": None, "epochs": 1}}
    console = tmp_path / "console.txt"
    fd = os.open(console, os.O_WRONLY | os.O_CREAT)
    monkeypatch.setenv(FD_ENV, console_env(fd))
    monkeypatch.setenv(SECONDS_ENV, "0")  # a line after every step

    def twenty(position, rank, world):  # 20 steps, where the estimate says 10 (a subword corpus)
        return itertools.islice(make_batches(position, rank, world), 20)

    train(spec, vocab, tmp_path / "lm" / "forward", twenty, None, steps_per_epoch=10)
    os.close(fd)
    lines = console.read_text().splitlines()
    assert len(lines) == 20, lines
    pattern = re.compile(r"^\[train lm/forward\] step (\d+)(/10)?, loss -?\d+\.\d{4}(, ETA (\d+) s)?$")
    for n, line in enumerate(lines, 1):
        match = pattern.match(line)
        assert match and int(match[1]) == n, line
        assert (match[2] is not None) == (n <= 10) and (match[3] is not None) == (n <= 10), line
    assert "ETA -" not in console.read_text()
    log = (tmp_path / "lm/forward/train.log")
    assert not log.exists() or "ETA -" not in log.read_text()


def test_a_subword_lm_counts_its_steps_in_pieces(tmp_path):
    """ELMo-Sub's step total: the word counts scaled by the pieces per word of a sample (the
    total was a third short, and its ETA went negative past it)."""
    import numpy as np

    from elmoc.train.lm_data import _pieces_per_token

    shard = tmp_path / "shard_0.txt"
    shard.write_text("a b c\n\nd e\n", encoding="utf-8")

    def three_pieces_a_word(lines):  # <s> + 3 pieces per word + </s>
        return np.zeros(sum(3 * len(line.split()) + 2 for line in lines), dtype=np.int64)

    assert _pieces_per_token(shard, three_pieces_a_word) == (11 + 8) / (5 + 4)
    assert _pieces_per_token(shard, lambda lines: np.zeros(sum(len(x.split()) + 2 for x in lines))) == 1.0
