"""FastText subword models: train on the corpus, or take a pretrained ``.bin``.

Training uses the ``fasttext`` library (skipgram with character n-grams, spec 2.5:
the ``.bin`` subword model is required because OOV words get vectors composed from
their n-grams).  **Determinism:** fastText's Hogwild training can only be
bit-reproducible with ``thread=1`` (threads update shared weights without locks),
so the configs default to 1 thread and more threads are logged as
non-deterministic.  Measured with the fasttext==0.9.3 wheel: with the demo
settings (dim 50-100, bucket >= 1e5) two runs wrote identical ``.bin`` files, but
with tiny settings (dim 10, bucket 2000, a 20K-token corpus) identical runs gave
different vectors and sometimes "Encountered NaN", even with ``thread=1``, in one
process or in fresh ones (2026-11-22: four fresh-process runs of dim 10 / bucket 2000
differed by up to 1e5 in single weights, i.e. the library reads memory it never
set).  So reproducibility of *training* is not guaranteed by the library;
everything downstream of a given ``.bin`` is deterministic.  Training runs in a
child interpreter (:func:`_train_in_fresh_process`) so that what the calling
process did before cannot make it worse: in a process whose freed heap held NaNs
the first attempt diverged every time.

A pretrained model (the paper's ``crawl-300d-2M-subword.bin``, shipped inside a
zip) is fetched with :mod:`elmoc.data.download.fetch` and linked (hard link, else symbolic
link) to the output path rather than copied: it is several GB.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from elmoc.data.download.fetch import FetchSpec, extract_members, obtain
from elmoc.data.vectors.fasttext_bin import FastTextModel
from elmoc.data.vectors.word_similarity import evaluate_pairs, read_similarity_file
from elmoc.errors import ConfigError, InputFileError
from elmoc.io.atomic import atomic_file, atomic_path

log = logging.getLogger(__name__)


@dataclass
class FastTextTrainConfig:
    """fastText skipgram hyper-parameters (names as in the fastText CLI).

    Args:
        dim: vector size.  epoch: passes over the corpus.  minn/maxn: character
        n-gram lengths (0/0 disables subwords).  minCount: minimum word count.
        ws: context window.  neg: negative samples.  lr: learning rate.
        bucket: number of n-gram hash buckets (2,000,000 in fastText; the .bin
        holds bucket*dim floats, so small demos use fewer).  thread: training
        threads (1 = deterministic).  seed: fastText's random seed.
    """

    dim: int = 100
    epoch: int = 5
    minn: int = 3
    maxn: int = 6
    minCount: int = 5  # noqa: N815 (fastText's own option name)
    ws: int = 5
    neg: int = 5
    lr: float = 0.05
    bucket: int = 2_000_000
    thread: int = 1
    seed: int = 1

    def __post_init__(self) -> None:
        for name in ("dim", "epoch", "minCount", "ws", "neg", "bucket", "thread"):
            if getattr(self, name) < 1:
                raise ConfigError(f"fasttext {name} must be >= 1, got {getattr(self, name)}")
        if self.minn < 0 or self.maxn < self.minn:
            raise ConfigError(f"fasttext needs 0 <= minn <= maxn, got minn={self.minn} maxn={self.maxn}")
        if not self.lr > 0:
            raise ConfigError(f"fasttext lr must be > 0, got {self.lr}")


def train_fasttext(shards: list[Path], out: str | Path, config: FastTextTrainConfig) -> dict:
    """Train a skipgram subword model on the concatenated shards; save ``out`` (.bin).

    Returns a summary (words, seconds, tokens/s) for logging.
    """
    out = Path(out)
    if config.thread > 1:
        log.warning("fasttext thread=%d: training is not bit-reproducible; use thread=1 for determinism",
                    config.thread)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, corpus = tempfile.mkstemp(dir=out.parent, prefix=f".{out.stem}.", suffix=".train.txt")
    try:
        n_tokens = 0
        with os.fdopen(fd, "w", encoding="utf-8") as dst:
            for shard in shards:
                with open(shard, encoding="utf-8") as src:
                    for line in src:
                        n_tokens += len(line.split())
                        dst.write(line)
        if n_tokens == 0:
            raise InputFileError(shards[0].parent, "train shards contain no tokens")
        start = time.perf_counter()
        with atomic_path(out) as tmp:
            n_words = _train_with_retries(corpus, config, shards[0].parent, tmp).nwords
            if n_words == 0:
                raise InputFileError(shards[0].parent, f"fasttext learned no words (minCount={config.minCount}); "
                                     "lower minCount")
        seconds = time.perf_counter() - start
    finally:
        Path(corpus).unlink(missing_ok=True)
    summary = {"words": n_words, "tokens": n_tokens, "epochs": config.epoch,
               "seconds": round(seconds, 2), "tokens_per_second": round(n_tokens * config.epoch / seconds)}
    log.info("fasttext: %d words, %d tokens x %d epochs in %.1fs", n_words, n_tokens, config.epoch, seconds)
    return summary


MAX_ATTEMPTS = 3


def _train_with_retries(corpus: str, config: FastTextTrainConfig, where: Path, dest: Path) -> FastTextModel:
    """Train into ``dest``; if fastText diverges, train again with a derived seed (at most 3 tries).

    fasttext==0.9.3 sometimes diverges ("Encountered NaN", or non-finite vectors) on
    small corpora even with thread=1; a retry with seed ``seed + 1000 * attempt`` is
    logged, so the run stays reproducible given the same outcome of the first try.
    The saved model is read back with :class:`FastTextModel` (the one ``.bin``
    reader) to check that every weight is finite.
    """
    import numpy as np

    params = asdict(config)
    problem = ""
    for attempt in range(MAX_ATTEMPTS):
        params["seed"] = config.seed + 1000 * attempt
        Path(dest).unlink(missing_ok=True)
        error = _train_in_fresh_process(corpus, params, str(dest))
        if not error:
            model = FastTextModel.load(dest)
            if np.isfinite(model.input_matrix).all() and np.isfinite(model.output_matrix).all():
                if attempt:
                    log.warning("fasttext: attempt %d (seed %d) succeeded after divergence (%s)",
                                attempt + 1, params["seed"], problem)
                return model
            error = "non-finite vectors"
        problem = error
        log.warning("fasttext: attempt %d with seed %d diverged (%s)", attempt + 1, params["seed"], problem)
    Path(dest).unlink(missing_ok=True)
    raise InputFileError(
        where, f"fastText training diverged {MAX_ATTEMPTS} times ({problem}); lower lr, raise bucket/dim"
    )


def _train_in_fresh_process(corpus: str, params: dict, dest: str) -> str:
    """Train in a new Python interpreter and save the model to ``dest``.

    Returns "" on success, else fastText's error ("Encountered NaN." ...).  Why a
    child process: fasttext==0.9.3 diverges far more often in a process whose freed
    heap memory holds stale values (measured: after freeing NaN-filled tensors with
    :func:`elmoc.train.precision.retain_freed_host_memory` active, the first attempt
    diverged every time; in a fresh process it did not), so training must not depend
    on what the calling process did before (a test session, a notebook, a trainer).
    """
    code = ("import json, sys; from elmoc.data.vectors.fasttext_model import _train_child; "
            "print(json.dumps(_train_child(*json.loads(sys.argv[1]))))")
    done = subprocess.run([sys.executable, "-c", code, json.dumps([corpus, params, dest])],
                          capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return f"fastText child process failed (exit {done.returncode}): {done.stderr.strip()[-500:]}"
    return json.loads(lines[-1])


def _train_child(corpus: str, params: dict, dest: str) -> str:
    """Body of :func:`_train_in_fresh_process` (runs in the child)."""
    try:
        model = _train_skipgram(corpus, params)
    except RuntimeError as e:
        return str(e) or "RuntimeError"
    model.save_model(dest)
    return ""


def _train_skipgram(corpus: str, params: dict):
    """``fasttext.train_unsupervised`` with ``seed`` honoured.

    The 0.9.3 Python binding rejects ``seed`` as a keyword although the C++ trainer
    reads it (each thread's RNG is seeded with ``thread_id + seed``), so the same
    three steps as ``train_unsupervised`` are done here with the full argument set.
    """
    from fasttext import FastText as ft  # the binding's module (fasttext==0.9.3 pinned)
    import fasttext_pybind

    args = dict(ft.unsupervised_default)
    args.update(params, input=corpus, model="skipgram", verbose=0)
    built = ft._build_args(args, set(params) | {"input", "model"})
    model = ft._FastText(args=built)
    fasttext_pybind.train(model.f, built)
    model.set_args(model.f.getArgs())
    return model


def link_or_copy(src: Path, dst: Path) -> None:
    """Place ``src`` at ``dst`` atomically: hard link, else symlink, else copy."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.link")
    tmp.unlink(missing_ok=True)
    try:
        os.link(src, tmp)
    except OSError:
        try:
            os.symlink(Path(src).resolve(), tmp)
        except OSError:
            shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def pretrained_fasttext(spec: FetchSpec, out: str | Path, cache: str | Path) -> Path:
    """Fetch a pretrained ``.bin`` (optionally a member of a zip) and place it at ``out``."""
    out = Path(out)
    fetched = obtain(spec, cache)
    if spec.members:
        if len(spec.members) != 1:
            raise ConfigError(f"a pretrained fastText source takes one member (the .bin), got {spec.members}")
        member_dir = Path(cache) / f"{fetched.name}.extracted"
        target = member_dir / Path(spec.members[0]).name
        if not target.is_file():
            from elmoc.io.atomic import atomic_directory

            with atomic_directory(member_dir) as tmp:
                extract_members(fetched, spec.members, tmp)
        fetched = target
    link_or_copy(fetched, out)
    log.info("pretrained fastText model %s -> %s", fetched, out)
    return out


def evaluate_fasttext(
    model_path: str | Path, datasets: dict[str, str | Path], out: str | Path, extra: dict | None = None
) -> dict:
    """Word-similarity Spearman for each named dataset; written as JSON to ``out``.

    ``extra`` (e.g. the training summary) is stored under ``"training"``.
    """
    model_path = Path(model_path)
    model = FastTextModel.load(model_path)
    results = {"model": str(model_path), "dim": model.dim, "words": model.nwords,
               "training": extra or {}, "datasets": {}}
    for name, path in sorted(datasets.items()):
        pairs = read_similarity_file(path)
        scores = evaluate_pairs(pairs, model.word_vector, lambda w: model.word_id(w) >= 0)
        results["datasets"][name] = {"file": str(path), **scores}
        log.info("%s: spearman %s on %d pairs (%d covered, %s)", name, scores["spearman_all"], scores["pairs"],
                 scores["covered"], scores["spearman_covered"])
    with atomic_file(out) as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    return results


def make_fasttext(
    out: str | Path, datasets: dict[str, str | Path], *, corpus: str | Path | None = None,
    config: FastTextTrainConfig | None = None, pretrained: str | None = None, sha256: str | None = None,
    member: str | None = None, cache: str | Path = "resources/downloads/.cache", eval_out: str | Path | None = None,
) -> dict:
    """``elmoc fasttext``: train on the shards under ``corpus`` (with ``config``) or fetch
    ``pretrained`` (pinned by ``sha256``; ``member`` = the .bin inside a zip) into ``out``,
    then evaluate it on ``datasets`` into ``eval_out`` (default: ``out`` with ``.eval.json``)."""
    from elmoc.data.corpus.prepare import shard_paths

    out = Path(out)
    if (corpus is None) == (pretrained is None):
        raise ConfigError("give exactly one of a training corpus or a pretrained model source")
    if corpus is not None:
        summary = train_fasttext(shard_paths(corpus), out, config or FastTextTrainConfig())
    else:
        spec = FetchSpec(source=pretrained, sha256=sha256, members=[member] if member else [])
        pretrained_fasttext(spec, out, cache)
        summary = {"pretrained": pretrained}
    return evaluate_fasttext(out, datasets, Path(eval_out) if eval_out else out.with_suffix(".eval.json"),
                             extra=summary)
