"""ULMFiT's intermediate step: a trained LM trained on a task's own text (``elmoc lm-finetune``).

Howard & Ruder (2018) fine-tune the general-domain LM on the target task's text, with the LM's
own objective, before the task itself.  Here every training run of a variant (forward and
backward, the one joint bi-LM, or the one masked LM: :func:`elmoc.directions.runs`) continues
from its ``model.pt`` weights on the task's sentences, through the one training loop
(:func:`elmoc.train.loop.train`): the LM's own input layer, encoder, output layer and loss
(continuous or softmax), and the spec's ``train`` settings but ``epochs`` and the batch.

The optimizer (``schedule``, :class:`LMFineTuneSettings`): by default ULMFiT's (section 3.2):
Adam (section 4's betas 0.7 / 0.99) with discriminative rates, the output layer at the peak
``lr`` and each layer below at the rate above divided by ``decay`` 2.6, every rate on the
slanted triangular schedule (``cut_frac`` 0.1, ``ratio`` 32) over the run's steps (the spec's
``optimizer`` becomes ``slanted_adam``: :mod:`elmoc.train.optim`), at ``batch_size`` 64 rows
(section 4) of the spec's ``bptt``.  ``schedule: pretraining`` is elmoc's former stage: a fresh
optimizer of the LM's own spec (its warm-up restarting at step 1; or Adam at a constant ``lr``)
at the pretraining batch.

The task text: ``--text`` is the task's split folder (``results/tasks/{task}/text/``, written by
``elmoc task-sentences --split-dir``: ``train.txt``, ``dev.txt``, ``test.txt``, each split's
distinct tokenized sentences) of which the train and dev sentences are read by default
(``text: train_dev``); ``text: transductive`` adds the test split's (ULMFiT's target-task text
with the test documents in it), and the fine-tuned model says so (``lm_finetuned.text``).  A
sentences file instead of the folder is read whole (its splits unknown: ``text: file``).  The
text is split in order: the first 90 % is the training shard, the last 10 % (at least one
sentence) the heldout text whose metric ``heldout.json`` reports before and after
(:data:`HELDOUT_FRACTION`).

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
the task text), with ``lm_finetuned: {"source": ..., "text": ..., "splits": [...]}`` saying where it
came from and which splits' text it read.
"""
from __future__ import annotations

import copy
import functools
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from elmoc.config import check_choice, load_yaml
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
SPLITS = ("train", "dev", "test")  # the files of a task's split folder (elmoc task-sentences --split-dir)
# lm_finetune.text: the splits whose sentences the LM is fine-tuned on (ULMFiT section 3.2 fine-tunes on
# the target task's data; reading the test split's text makes the result transductive, so not by default)
TEXTS = {"train_dev": ("train", "dev"), "transductive": SPLITS}
FILE_TEXT = "file"  # the record's `text` when --text is a sentences file (its splits unknown)
ULMFIT_LM_LR = 0.004  # ULMFiT section 4: "a base learning rate of 0.004 ... for fine-tuning the LM"
ULMFIT_BETAS = (0.7, 0.99)  # ULMFiT section 4: Adam with beta1 0.7 (not 0.9) and beta2 0.99
ULMFIT_BATCH = 64  # ULMFiT section 4: "a batch size of 64"

# (spec, spec's file for errors, run, train settings) -> (vocab, vocab_path, make_batches,
# make_heldout, steps_per_epoch): `elmoc train`'s data of a spec (elmoc.train.lm_data.lm_data)
DataFactory = Callable[[dict, Path, str, TrainSettings], tuple[Any, Any, BatchFactory, HeldoutFactory | None, int]]


@dataclass(frozen=True)
class LMFineTuneSettings:
    """The ``--section-json`` of ``elmoc lm-finetune`` (the workflow's ``fine_tune.lm_finetune``
    when it is a mapping).

    Attributes:
        epochs: passes over the task text's training part (ULMFiT tunes it on dev: section 4).
        schedule: ``slanted`` (ULMFiT section 3.2: discriminative rates and the slanted triangular
            schedule, Adam with section 4's betas) or ``pretraining`` (elmoc's former stage: the
            LM's own optimizer, warm-up restarting, at the pretraining batch).
        lr: ``slanted``: the peak rate of the top layer (the output layer; None: 0.004, ULMFiT
            section 4).  ``pretraining``: None: a fresh optimizer of the LM's own spec; a number:
            Adam at this constant rate instead.
        decay: ``slanted``: layer l - 1 trains at layer l's rate / decay (2.6: section 3.2).
        cut_frac, ratio: ``slanted``: the schedule's rising fraction of the steps (0.1) and how much
            lower its lowest rate is than the peak (32); section 3.2's values.
        batch_size: rows of the spec's ``bptt`` tokens per step; None: 64 (ULMFiT section 4) under
            ``slanted`` (halved until the text gives one step: a test fixture's text), the spec's
            pretraining batch under ``pretraining``.
        min_steps: fewer optimizer steps in the whole run than this is one warning line (the text
            is too short for the batch to mean much).
        text: ``train_dev`` (the train and dev splits' sentences) or ``transductive`` (test's too);
            read from the task's split folder.
    """

    KEYS = ("epochs", "schedule", "lr", "decay", "cut_frac", "ratio", "batch_size", "min_steps", "text")
    epochs: int = 1
    schedule: str = "slanted"
    lr: float | None = None
    decay: float = 2.6
    cut_frac: float = 0.1
    ratio: float = 32.0
    batch_size: int | None = None
    min_steps: int = 20
    text: str = "train_dev"

    @classmethod
    def from_section(cls, section: Section) -> "LMFineTuneSettings":
        section = Section(section.data, section.name, cls.KEYS)
        name = section.name
        epochs = section.get("epochs", int, cls.epochs)
        schedule = section.get("schedule", str, cls.schedule)
        check_choice(schedule, SCHEDULES, f"{name}.schedule")
        text = section.get("text", str, cls.text)
        check_choice(text, TEXTS, f"{name}.text")
        lr = section.get("lr", (int, float), None)
        numbers = {key: float(section.get(key, (int, float), getattr(cls, key))) for key in ("decay", "ratio")}
        cut_frac = float(section.get("cut_frac", (int, float), cls.cut_frac))
        batch_size = section.get("batch_size", int, None)
        min_steps = section.get("min_steps", int, cls.min_steps)
        if isinstance(epochs, bool) or epochs < 1:
            raise ConfigError(f"config {name}.epochs must be a positive integer, got {epochs!r}")
        if lr is not None and (isinstance(lr, bool) or not lr > 0):
            raise ConfigError(f"config {name}.lr must be a number > 0 (or null: the schedule's default), got {lr!r}")
        for key, value in numbers.items():
            if not value > 0:
                raise ConfigError(f"config {name}.{key} must be a number > 0, got {value!r}")
        if not 0 < cut_frac < 1:
            raise ConfigError(f"config {name}.cut_frac must be in (0, 1), got {cut_frac!r}")
        if batch_size is not None and (isinstance(batch_size, bool) or batch_size < 1):
            raise ConfigError(f"config {name}.batch_size must be a positive integer (or null: the schedule's "
                              f"default), got {batch_size!r}")
        if isinstance(min_steps, bool) or min_steps < 0:
            raise ConfigError(f"config {name}.min_steps must be an integer >= 0, got {min_steps!r}")
        return cls(epochs, schedule, None if lr is None else float(lr), numbers["decay"], cut_frac,
                   numbers["ratio"], batch_size, min_steps, text)

    def optimizer(self, total_steps: int) -> dict[str, Any] | None:
        """The fine-tuning runs' ``optimizer`` section over ``total_steps`` steps (None: the spec's own)."""
        return SCHEDULES[self.schedule].optimizer(self, total_steps)

    @property
    def rows(self) -> int | None:
        """Rows per step before the text is seen: ``batch_size``, else the schedule's default (None:
        the spec's pretraining batch)."""
        return self.batch_size if self.batch_size is not None else SCHEDULES[self.schedule].rows


def slanted_optimizer(settings: LMFineTuneSettings, total_steps: int) -> dict[str, Any]:
    """ULMFiT's (section 3.2): ``slanted_adam`` with its discriminative rates (:mod:`elmoc.train.optim`)."""
    return {"type": "slanted_adam", "lr": ULMFIT_LM_LR if settings.lr is None else settings.lr,
            "betas": list(ULMFIT_BETAS), "decay": settings.decay, "cut_frac": settings.cut_frac,
            "ratio": settings.ratio, "total_steps": total_steps}


def pretraining_optimizer(settings: LMFineTuneSettings, total_steps: int) -> dict[str, Any] | None:
    """elmoc's former stage: the LM's own optimizer (None), or Adam at the constant ``lr``."""
    return None if settings.lr is None else {"type": "adam", "lr": settings.lr}


@dataclass(frozen=True)
class Schedule:
    """An ``lm_finetune.schedule``: its optimizer section (settings, total steps -> section or None
    for the spec's own) and its default rows per step (None: the spec's)."""

    optimizer: Callable[[LMFineTuneSettings, int], dict[str, Any] | None]
    rows: int | None


SCHEDULES = {"slanted": Schedule(slanted_optimizer, ULMFIT_BATCH), "pretraining": Schedule(pretraining_optimizer, None)}


@dataclass
class FineTuned:
    """What :func:`finetune` did: each run's fine-tuned ``model.pt`` (run -> path), or the name of
    the stop signal that interrupted a run (rerun the same command to resume)."""

    models: dict[str, Path]
    interrupted: str | None = None


def read_lines(path: Path) -> list[str]:
    """The non-blank lines of a sentences file, stripped, in order; one-line errors."""
    try:
        lines = [line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines()]
    except FileNotFoundError:
        raise InputFileError(path, "not found; write the task's sentences first (elmoc task-sentences --split-dir "
                             "results/tasks/<task>/text, or snakemake results/tasks/<task>/text/train.txt)") from None
    except UnicodeDecodeError as e:
        raise InputFileError(path, f"is not UTF-8 text ({e.reason} at byte {e.start}); give the task's "
                             "tokenized sentences, one a line") from None
    return [line for line in lines if line]


def task_text(text: str | Path, mode: str) -> tuple[list[str], dict[str, Any]]:
    """The sentences to fine-tune on and what the record says of them (``{"text", "splits"}``).

    ``text`` is a task's split folder (``train.txt``, ``dev.txt``, ``test.txt``): the splits of
    ``mode`` (:data:`TEXTS`), one file after the other (each holds its split's distinct
    sentences: the dev split's come last, most of the heldout text); or a sentences file,
    read whole (``{"text": "file"}``, a warning: its splits are unknown)."""
    text = Path(text)
    if not text.is_dir():
        log.warning("%s is a sentences file: its splits are unknown (with the test split's sentences in it the "
                    "fine-tuning is transductive); give the task's split folder (elmoc task-sentences --split-dir) "
                    "to read the train and dev text only", text)
        return read_lines(text), {"text": FILE_TEXT}
    splits = TEXTS[mode]
    lines = [line for split in splits for line in read_lines(text / f"{split}.txt")]
    if "test" in splits:
        log.warning("lm_finetune.text transductive: the LM is fine-tuned on the test split's sentences too")
    return lines, {"text": mode, "splits": list(splits)}


def split_text(lines: list[str], where: str | Path) -> tuple[list[str], list[str]]:
    """(training sentences, heldout sentences) of the task text ``lines`` (from ``where``): the
    last :data:`HELDOUT_FRACTION` of them (rounded up) heldout."""
    if len(lines) < 2:
        raise InputFileError(where, f"has {len(lines)} sentence(s); LM fine-tuning needs at least 2 (the last "
                             f"{HELDOUT_FRACTION:.0%} are its heldout text): give the task's text")
    heldout = math.ceil(len(lines) * HELDOUT_FRACTION)  # at least one, never under 10 %
    return lines[:-heldout], lines[-heldout:]


def write_text(text: str | Path, work_dir: Path, mode: str = "train_dev") -> tuple[Path, Path, dict[str, Any]]:
    """The task text (:func:`task_text`) split into ``work_dir/text/train/shard_000.txt`` and
    ``text/heldout.txt`` (each written whole; :func:`split_text`).  Returns (training folder,
    heldout file, the text's record)."""
    lines, record = task_text(text, mode)
    train_part, heldout_part = split_text(lines, text)
    train_dir, heldout = work_dir / TEXT_TRAIN, work_dir / TEXT_HELDOUT
    train_dir.mkdir(parents=True, exist_ok=True)
    for path, part in ((train_dir / SHARD, train_part), (heldout, heldout_part)):
        with atomic_file(path) as f:
            f.write("\n".join(part) + "\n")
    log.info("task text %s (%s): %d sentences to train on, the last %d heldout", text, record["text"],
             len(train_part), len(heldout_part))
    return train_dir, heldout, record


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


def finetune_spec(spec: dict[str, Any], train_dir: Path, heldout: Path, settings: LMFineTuneSettings,
                  rows: int | None = None, total_steps: int = 1) -> dict[str, Any]:
    """The LM spec of a fine-tuning run: the trained LM's ``spec`` reading the task text, trained
    ``settings.epochs`` epochs (no step limit, no rewind weights) at ``rows`` rows per step (None:
    the spec's), with the schedule's optimizer over ``total_steps`` steps
    (:meth:`LMFineTuneSettings.optimizer`)."""
    spec = copy.deepcopy(spec)
    spec["data"] = {**(spec.get("data") or {}), "train": str(train_dir), "heldout": str(heldout)}
    train_section = spec.setdefault("train", {})
    train_section["epochs"] = settings.epochs
    if rows is not None:
        train_section["batch_size"] = rows
    for key in ("max_steps", "rewind_step"):
        train_section.pop(key, None)
    optimizer = settings.optimizer(total_steps)
    if optimizer is not None:
        spec["optimizer"] = optimizer
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

    def __init__(self, spec: dict[str, Any], *args: Any, source: str | Path, text: dict[str, Any] | None = None,
                 **kwargs: Any):
        self.lm_spec = spec
        super().__init__(run_spec(spec, source, text), *args, **kwargs)

    def build_model(self) -> Any:
        return MODELS.get(self.direction, LanguageModel).from_spec(self.lm_spec, self.vocab)

    def final_payload(self) -> dict[str, Any]:
        payload = super().final_payload()
        payload.update(spec=self.lm_spec, config_hash=config_hash(self.lm_spec), **{PROVENANCE: self.spec[SECTION]})
        return payload


def run_spec(spec: dict[str, Any], source: str | Path, text: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a fine-tuning run's checkpoints record as its spec: ``spec``, the source file and
    which splits' text it reads (:func:`task_text`'s record)."""
    return {**spec, SECTION: {"source": str(source), **(text or {})}}


def finished(out: Path, spec: dict[str, Any], source: Path, text: dict[str, Any] | None = None) -> bool:
    """Whether ``out/model.pt`` is this run's: made from this very spec, source and input files.
    A ``model.pt`` of another spec or input is removed (the run starts over)."""
    path = out / MODEL
    if not path.is_file():
        return False
    payload = load_checkpoint(path, mmap=True)
    full = run_spec(spec, source, text)
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
    train_dir, heldout, record = write_text(text, work_dir, settings.text)
    models = {}
    for run, source in sources.items():
        payload = load_checkpoint(source)
        spec, train_settings, data, steps = batches(payload["spec"], source, run, train_dir, heldout, settings,
                                                    data_for, text)
        vocab, vocab_path, make_batches, make_heldout = data
        out = work_dir / run
        if not finished(out, spec, source, record):
            result = train(spec, vocab, out, make_batches, make_heldout, direction=run,
                           vocab_path=None if vocab_path is None else str(vocab_path), device=device,
                           steps_per_epoch=steps, stale_checkpoint="set-aside", settings=train_settings,
                           hooks=[StartFrom(payload["model"])], stop=stop,
                           trainer=functools.partial(LMFineTuneTrainer, source=source, text=record))
            if result.interrupted:
                return FineTuned(models, result.interrupted)
        models[run] = out / MODEL
    return FineTuned(models)


def batches(source_spec: dict[str, Any], source: Path, run: str, train_dir: Path, heldout: Path,
            settings: LMFineTuneSettings, data_for: DataFactory, text: str | Path) -> tuple[dict, TrainSettings,
                                                                                         tuple, int]:
    """(the run's spec, its train settings, (vocab, vocab_path, make_batches, make_heldout), steps
    per epoch) of the LM of ``source_spec`` on the task text: at the schedule's rows per step, halved
    while the text gives no step when the rows are the schedule's default (a one-line error when
    even so, or with ``batch_size`` set, the text is shorter than one window; a warning line when
    the run has fewer than ``min_steps`` steps), with the optimizer over the run's steps."""
    rows = settings.rows
    while True:
        spec = finetune_spec(source_spec, train_dir, heldout, settings, rows)
        train_settings = TrainSettings.from_config(spec["train"])
        vocab, vocab_path, make_batches, make_heldout, steps = data_for(spec, source, run, train_settings)
        if steps or settings.batch_size is not None or rows is None or rows == 1:
            break
        rows = max(1, rows // 2)
    if not steps:
        raise InputFileError(text, f"is too short for one training window of {source} ({train_settings.batch_size} rows x bptt "
                             f"{train_settings.bptt} tokens): give a longer task text, or a smaller "
                             "lm_finetune.batch_size")
    total = steps * settings.epochs
    if total < settings.min_steps:
        log.warning("%s: %d optimizer steps in all (%d rows x %d tokens per step, %d epoch(s)), fewer than "
                    "lm_finetune.min_steps %d: give a longer text, more epochs or a smaller batch_size", text,
                    total, train_settings.batch_size, train_settings.bptt, settings.epochs, settings.min_steps)
    else:
        log.info("%s: %d steps of %d rows x %d tokens per epoch, %d in all", text, steps,
                 train_settings.batch_size, train_settings.bptt, total)
    spec = finetune_spec(source_spec, train_dir, heldout, settings, rows, total)
    return spec, TrainSettings.from_config(spec["train"]), (vocab, vocab_path, make_batches, make_heldout), steps
