"""ULMFiT's intermediate step: a trained LM trained on a task's own text (``elmoc lm-finetune``).

Howard & Ruder (2018) fine-tune the general-domain LM on the target task's text, with the LM's
own objective, before the task itself.  Here every training run of a variant (forward and
backward, the one joint bi-LM, or the one masked LM: :func:`elmoc.directions.runs`) continues
from its ``model.pt`` weights on the task's sentences, through the one training loop
(:func:`elmoc.train.loop.train`): the LM's own input layer, encoder, output layer and loss
(continuous or softmax), a fresh optimizer (the spec's, or Adam at a constant ``lr``), and the
spec's batching and ``train`` settings but ``epochs``.

The task text (``results/tasks/{task}/sentences.txt``: one tokenized sentence a line; every
split's sentences, test included, as ULMFiT uses the target task's unlabelled text) is split in
file order: the first 90 % is the training shard, the last 10 % (at least one sentence) the
heldout text whose metric ``heldout.json`` reports before and after (:data:`HELDOUT_FRACTION`).

Work folder (never a rule output; the command's ``--output`` sits in it): ``text/train/
shard_000.txt`` and ``text/heldout.txt``, then one training run's folder per run
(``forward/``, ``backward/``, ``joint/`` or ``masked/``: ``checkpoint.pt``, ``model.pt``,
``heldout.json``, ``train_log.jsonl``).  A finished run (its ``model.pt`` of this very spec and
these input files) is skipped; an unfinished one resumes from its ``checkpoint.pt`` as
``elmoc train`` does (a checkpoint of another spec, text or source weights is set aside), so a
killed run rerun with the same command ends bit-identical to an uninterrupted one (CPU).
The run's checkpoints name the source ``model.pt`` (the spec's ``lm_finetune.source``, as
``elmoc distill`` adds its ``distill`` section), so its sha256 is among the run's input
fingerprints; the fine-tuned ``model.pt`` is an ordinary LM of the trained LM's spec (reading
the task text), with ``lm_finetuned: {"source": ...}`` saying where it came from.
"""
from __future__ import annotations

import copy
import functools
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from elmoc.config import load_yaml
from elmoc.config_section import Section
from elmoc.directions import runs
from elmoc.errors import ConfigError, InputFileError
from elmoc.io.atomic import atomic_file
from elmoc.lm import LanguageModel
from elmoc.model_file import load_checkpoint
from elmoc.train.checkpoint import MODEL, InputFingerprints, config_hash
from elmoc.train.hooks.base import StartFrom
from elmoc.train.loop import MODELS, BatchFactory, HeldoutFactory, Trainer, train
from elmoc.train.settings import TrainSettings
from elmoc.train.signals import StopSignals, stoppable

log = logging.getLogger(__name__)

HELDOUT_FRACTION = 0.1  # the task text's last 10 % is the heldout text
SECTION = "lm_finetune"  # the section a run's checkpoints add to its spec: the model.pt it starts from
PROVENANCE = "lm_finetuned"  # the key of the fine-tuned model.pt that keeps that section
TEXT_TRAIN, TEXT_HELDOUT = Path("text/train"), Path("text/heldout.txt")
SHARD = "shard_000.txt"

# (spec, spec's file for errors, run, train settings) -> (vocab, vocab_path, make_batches,
# make_heldout, steps_per_epoch): `elmoc train`'s data of a spec (elmoc.train.lm_data.lm_data)
DataFactory = Callable[[dict, Path, str, TrainSettings], tuple[Any, Any, BatchFactory, HeldoutFactory | None, int]]


@dataclass(frozen=True)
class LMFineTuneSettings:
    """The ``--section-json`` of ``elmoc lm-finetune`` (the workflow's ``fine_tune.lm_finetune``
    when it is a mapping).

    Attributes:
        epochs: passes over the task text's training part.
        lr: None: a fresh optimizer of the LM's own spec (its schedule restarts at step 1, warm-up
            included); a number: Adam at this constant learning rate instead.
    """

    KEYS = ("epochs", "lr")
    epochs: int = 1
    lr: float | None = None

    @classmethod
    def from_section(cls, section: Section) -> "LMFineTuneSettings":
        section = Section(section.data, section.name, cls.KEYS)
        epochs = section.get("epochs", int, cls.epochs)
        lr = section.get("lr", (int, float), None)
        if isinstance(epochs, bool) or epochs < 1:
            raise ConfigError(f"config {section.name}.epochs must be a positive integer, got {epochs!r}")
        if lr is not None and (isinstance(lr, bool) or not lr > 0):
            raise ConfigError(f"config {section.name}.lr must be a number > 0 (or null: the LM's own optimizer), "
                              f"got {lr!r}")
        return cls(epochs, None if lr is None else float(lr))


@dataclass
class FineTuned:
    """What :func:`finetune` did: each run's fine-tuned ``model.pt`` (run -> path), or the name of
    the stop signal that interrupted a run (rerun the same command to resume)."""

    models: dict[str, Path]
    interrupted: str | None = None


def split_text(path: str | Path) -> tuple[list[str], list[str]]:
    """(training sentences, heldout sentences) of a sentences file: its non-blank lines in file
    order, the last :data:`HELDOUT_FRACTION` of them (rounded up) heldout."""
    try:
        lines = [line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines()]
    except FileNotFoundError:
        raise InputFileError(path, "not found; write the task's sentences first (elmoc task-sentences, or "
                             "snakemake results/tasks/<task>/sentences.txt)") from None
    except UnicodeDecodeError as e:
        raise InputFileError(path, f"is not UTF-8 text ({e.reason} at byte {e.start}); give the task's "
                             "tokenized sentences, one a line") from None
    lines = [line for line in lines if line]
    if len(lines) < 2:
        raise InputFileError(path, f"has {len(lines)} sentence(s); LM fine-tuning needs at least 2 (the last "
                             f"{HELDOUT_FRACTION:.0%} are its heldout text): give the task's sentences.txt")
    heldout = math.ceil(len(lines) * HELDOUT_FRACTION)  # at least one, never under 10 %
    return lines[:-heldout], lines[-heldout:]


def write_text(text: str | Path, work_dir: Path) -> tuple[Path, Path]:
    """The task text split into ``work_dir/text/train/shard_000.txt`` and ``text/heldout.txt``
    (each written whole; :func:`split_text`).  Returns (training folder, heldout file)."""
    train_part, heldout_part = split_text(text)
    train_dir, heldout = work_dir / TEXT_TRAIN, work_dir / TEXT_HELDOUT
    train_dir.mkdir(parents=True, exist_ok=True)
    for path, lines in ((train_dir / SHARD, train_part), (heldout, heldout_part)):
        with atomic_file(path) as f:
            f.write("\n".join(lines) + "\n")
    log.info("task text %s: %d sentences to train on, the last %d heldout", text, len(train_part),
             len(heldout_part))
    return train_dir, heldout


def run_files(lm_dir: str | Path) -> dict[str, Path]:
    """Run -> ``model.pt`` of the trained variant in ``lm_dir`` (``results/lm/{variant}``: its
    ``spec.yaml`` says which runs it has)."""
    lm_dir = Path(lm_dir)
    spec = load_yaml(lm_dir / "spec.yaml", mapping="an LM spec")
    files = {run: lm_dir / run / MODEL for run in runs(spec)}
    for run, path in files.items():
        if not path.is_file():
            raise InputFileError(path, f"not found; train the {run} run first (snakemake {path})")
    return files


def finetune_spec(spec: dict[str, Any], train_dir: Path, heldout: Path, settings: LMFineTuneSettings) -> dict[str, Any]:
    """The LM spec of a fine-tuning run: the trained LM's ``spec`` reading the task text, trained
    ``settings.epochs`` epochs (no step limit, no rewind weights), with Adam at ``settings.lr``
    when one is given."""
    spec = copy.deepcopy(spec)
    spec["data"] = {**(spec.get("data") or {}), "train": str(train_dir), "heldout": str(heldout)}
    train_section = spec.setdefault("train", {})
    train_section["epochs"] = settings.epochs
    for key in ("max_steps", "rewind_step"):
        train_section.pop(key, None)
    if settings.lr is not None:
        spec["optimizer"] = {"type": "adam", "lr": settings.lr}
    # a short task text's heldout (a test fixture's last sentences) may hold fewer tokens than the
    # spec's heldout batch has rows: fewer rows, not a failed job (each row needs 2 tokens at least)
    rows = train_section.get("eval_batch_size") or train_section.get("batch_size") or 1
    words = [line.split() for line in heldout.read_text(encoding="utf-8").splitlines()]
    fits = max(1, sum(len(w) + 1 for w in words if w) - 1)  # every sentence + one boundary, a lower bound
    if rows > fits:
        log.info("%s: %d heldout tokens or more, fewer than %d rows: heldout batches of %d rows", heldout,
                 fits + 1, rows, fits)
        train_section["eval_batch_size"] = fits
    return spec


class LMFineTuneTrainer(Trainer):
    """The loop's :class:`Trainer` for a fine-tuning run: the model is the LM of ``spec``, the
    spec its checkpoints record adds ``lm_finetune: {"source": ...}`` (hashed with the other
    inputs), and ``model.pt`` is the LM of ``spec`` with that section under ``lm_finetuned``.

    Built by :func:`elmoc.train.loop.train` (``trainer=functools.partial(LMFineTuneTrainer,
    source=...)``) with the fine-tuning run's LM spec and the Trainer's other arguments.
    """

    def __init__(self, spec: dict[str, Any], *args: Any, source: str | Path, **kwargs: Any):
        self.lm_spec = spec
        super().__init__(run_spec(spec, source), *args, **kwargs)

    def build_model(self) -> Any:
        return MODELS.get(self.direction, LanguageModel).from_spec(self.lm_spec, self.vocab)

    def final_payload(self) -> dict[str, Any]:
        payload = super().final_payload()
        payload.update(spec=self.lm_spec, config_hash=config_hash(self.lm_spec), **{PROVENANCE: self.spec[SECTION]})
        return payload


def run_spec(spec: dict[str, Any], source: str | Path) -> dict[str, Any]:
    """What a fine-tuning run's checkpoints record as its spec: ``spec`` and the source file."""
    return {**spec, SECTION: {"source": str(source)}}


def finished(out: Path, spec: dict[str, Any], source: Path) -> bool:
    """Whether ``out/model.pt`` is this run's: made from this very spec, source and input files.
    A ``model.pt`` of another spec or input is removed (the run starts over)."""
    path = out / MODEL
    if not path.is_file():
        return False
    payload = load_checkpoint(path, mmap=True)
    full = run_spec(spec, source)
    if (payload.get("spec"), payload.get(PROVENANCE)) == (spec, full[SECTION]) and \
            payload.get("inputs") == InputFingerprints.of_spec(full):
        log.info("%s is done (%s of this spec and text exists)", out, MODEL)
        return True
    log.warning("%s was made from another spec, text or source model: fine-tuning again", path)
    path.unlink()
    return False


@stoppable
def finetune(lm_dir: str | Path, text: str | Path, work_dir: str | Path, settings: LMFineTuneSettings,
             data_for: DataFactory, *, device: str = "cpu", stop: StopSignals | None = None) -> FineTuned:
    """Fine-tune every run of the variant in ``lm_dir`` on the sentences file ``text`` (module
    docstring), in ``work_dir``.

    Args:
        lm_dir: ``results/lm/{variant}``: ``spec.yaml`` and each run's ``model.pt``.
        text: the task's sentences, one tokenized sentence a line.
        work_dir: the work folder (split text, one training run folder per run).
        data_for: the batches of a spec (``elmoc train``'s :func:`elmoc.train.lm_data.lm_data`).
    """
    work_dir = Path(work_dir)
    sources = run_files(lm_dir)
    train_dir, heldout = write_text(text, work_dir)
    models = {}
    for run, source in sources.items():
        payload = load_checkpoint(source)
        spec = finetune_spec(payload["spec"], train_dir, heldout, settings)
        train_settings = TrainSettings.from_config(spec["train"])
        vocab, vocab_path, make_batches, make_heldout, steps = data_for(spec, source, run, train_settings)
        if not steps:
            raise InputFileError(text, f"is too short for one training window of {source} (train.batch_size "
                                 f"{train_settings.batch_size} rows x bptt {train_settings.bptt} tokens): give a "
                                 "longer task text")
        out = work_dir / run
        if not finished(out, spec, source):
            result = train(spec, vocab, out, make_batches, make_heldout, direction=run,
                           vocab_path=None if vocab_path is None else str(vocab_path), device=device,
                           steps_per_epoch=steps, stale_checkpoint="set-aside", settings=train_settings,
                           hooks=[StartFrom(payload["model"])], stop=stop,
                           trainer=functools.partial(LMFineTuneTrainer, source=source))
            if result.interrupted:
                return FineTuned(models, result.interrupted)
        models[run] = out / MODEL
    return FineTuned(models)
