"""The contract every downstream task follows, so ONE loop trains them all.

A task is a class registered as ``("task", <type>)`` (``@register("task", "sst")``)
and built from the ``tasks.<name>`` section of the workflow config::

    tasks:
      sst5:
        type: sst                    # registry name = module name
        train: ../shared/data/sst5/train.txt
        dev: ../shared/data/sst5/dev.txt
        test: ../shared/data/sst5/test.txt
        granularity: 5-class         # any other key: a constructor argument of the task
        model: {encoder_hidden: 300} # model hyperparameters, checked by the task
        trainer: {batch_size: 100, lr: 1.0e-3, epochs: 40, patience: 5}  # elmoc.tasks.runner.TrainerConfig
        with_fasttext: true          # workflow only: also feed FastText vectors next to the LM features

``trainer`` and ``with_fasttext`` are read by the runner/workflow, everything else
goes to the constructor through :func:`elmoc.registry.build` (unknown keys are an
error).  Data paths are ``train``, ``dev``, ``test``; a task that cannot run
because a path is not configured says so in :meth:`Task.missing_data`, and the
runner writes a ``"status": "no data: set tasks.<name>.<key>"`` JSON instead of
failing.

A new task is one file: a module of this package, or a ``.py`` file named in
``ELMOC_PLUGINS``.  The workflow schema knows no task by name: it takes any section
whose ``type`` is registered, and :mod:`elmoc.tasks.config` checks the section's keys
against the class when the workflow is parsed (``snakemake -n`` names a misspelled
key or type) and fills in :meth:`Task.section_defaults`.  So the class holds the
task's defaults, and nothing else names them:

* constructor keyword defaults: the task's options (filled into the section, in the
  constructor's order, so every rule's ``--section-json`` names each value the run uses);
* ``default_model``: the ``model`` keys and their paper values (no other key is accepted);
* ``default_trainer``: the paper's ``TrainerConfig`` values (a section's ``trainer`` is
  merged over them; the dataclass's own defaults below that);
* ``default_with_fasttext``: whether LM runs also get the static word vectors
  (``with_fasttext``; the FastText baseline always gets them);
* ``merged_options``: constructor options that are mappings merged over the class's
  own defaults by the constructor (``model``; the CoNLL tasks' ``splits``): not filled in.

What a subclass implements (instances are any Python objects the task likes):

* ``metric_name``: the headline metric written to the metrics JSON ("accuracy", "f1", ...).
* ``metric_label``: what ``metric_name`` is, in words, written beside it (e.g. SRL's
  "span F1 (AllenNLP ...)"); ``extra_metrics``: further ``compute()`` keys reported
  beside the headline one in the metrics JSON (``extra_scores``), each with its label
  (SRL's official CoNLL-2005 score).
* ``lowercase_words``: look static word vectors up lowercased (GloVe 6B's habit); False (the
  cased FastText-CC table's own case) in every task; NER sets it from its ``lowercase`` option.
* :meth:`read` ``(split) -> list`` of instances for "train" / "dev" / "test";
  malformed input raises :class:`~elmoc.errors.InputFileError` with file and line.
* :meth:`sentences` ``(instances) -> iterable of token lists``: every sentence
  whose contextual features the instances need (``elmoc task-sentences`` writes
  them, ``elmoc extract`` computes them, :class:`~elmoc.features.store.FeatureStore`
  finds them again by text).
* :meth:`build_model` ``(inputs) -> TaskModel``: ``inputs`` is a
  :class:`~elmoc.tasks.embedder.TaskInputs`; call ``inputs.embedder(...)`` to get a
  :class:`~elmoc.tasks.embedder.TokenEmbedder` (FastText vectors and/or the
  scalar mix of LM layers, whichever the run was given).
* :meth:`collate` ``(instances, inputs) -> dict`` batch; text fields are
  :class:`~elmoc.tasks.embedder.TextBatch` made by ``inputs.encode(token_lists)``.
* :meth:`new_metric` ``() -> Metric``.
* :meth:`length` ``(instance) -> int`` for length bucketing (default: 1).

What a saved task model needs (:mod:`elmoc.tasks.task_model`, ``elmoc task --save-model`` and
``elmoc predict``); the defaults serve a task whose model depends on its section alone:

* :meth:`vocabularies` ``() -> dict`` (JSON): what :meth:`build_model` and :meth:`collate` derive
  from the data files (NER's tags and characters, SRL's tags), saved beside the weights;
  :meth:`use_vocabularies` ``(saved)`` sets them again, so the model is rebuilt without the data.
* :meth:`read_input` ``(path) -> list``: the instances of a file in the task's own format
  (default: ``path`` read as the test split), gold labels ignored.
* :meth:`sentence_instance` ``(tokens) -> instance``: an unlabelled instance of one sentence,
  for a ``sentences.txt`` input; None (the default) for a task whose instances are not one
  sentence (a pair, a predicate, a document): it then reads its own format only.
* :meth:`prediction_record` ``(instance, prediction) -> dict`` (JSON): one instance's tokens and
  its prediction, labels as strings; ``prediction`` is one row of ``TaskOutput.predictions``.

What the tables read (:mod:`elmoc.tables`), beyond the metrics JSON the runner writes:

* ``elmoc majority-baseline`` (:func:`elmoc.tables.summary.majority_baseline`) calls
  :meth:`missing_data`, ``read("train")`` and ``read("test")``, and treats instances that
  have a ``label`` attribute as single-label classification: ``label`` is the gold class
  (hashable, compared with ``==``) and the score is the accuracy of always answering the
  most frequent training label.  An instance of any other kind of task must not have an
  attribute called ``label`` (NER and SRL carry ``tags``, coref ``clusters``); its record
  then says ``"status": "n/a: not a single-label classification task"``.  ``metric_name``
  is written beside the score.
* the task tables read each run's JSON: ``metric`` (= ``metric_name``), ``dev`` and ``test``
  (``compute()[metric_name]``, a fraction in [0, 1], shown times 100; higher is better),
  and ``extra_scores`` (one entry per ``extra_metrics`` key, a column ``<task>:<key>``).
  Rows and columns are keyed by the section name (``tasks.<name>``), not by ``type``.

A :class:`TaskModel` maps a batch to :class:`TaskOutput` ``(loss, predictions)``;
``loss`` is the training loss of the batch with the reduction of the task's
reference implementation (AllenNLP): a mean for most tasks, the sum over sentences
for NER's CRF.  The runner adds ``mix_l2`` times :meth:`TaskModel.mix_penalty`
(L2 on the scalar-mix weights) to it, moves the model and every tensor of a batch
(also inside lists, dicts and dataclasses such as ``TextBatch``) to the run's
device; a model creates any other tensor on its inputs' device.  A :class:`Metric`
accumulates ``update(predictions, batch)`` and reports ``compute() -> dict`` whose
``metric_name`` entry drives early stopping (higher is better).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import torch
from torch import nn

from elmoc.errors import ConfigError, InputFileError
from elmoc.metrics.base import Metric  # noqa: F401  (re-exported: part of the task contract)

SPLITS = ("train", "dev", "test")


@dataclass
class TaskOutput:
    """What a task model returns for one batch.

    Attributes:
        loss: scalar tensor, the batch's loss (what is differentiated).
        predictions: whatever the task's metric reads (e.g. (batch,) long labels).
    """

    loss: torch.Tensor
    predictions: Any


class TaskModel(nn.Module):
    """Base class of task models; subclasses implement ``forward(batch) -> TaskOutput``."""

    def mix_penalty(self) -> torch.Tensor:
        """Sum of ||w||^2 over every scalar mix in the model (0 when none)."""
        from elmoc.features.scalar_mix import ScalarMix

        penalties = [m.l2_penalty() for m in self.modules() if isinstance(m, ScalarMix)]
        if not penalties:
            return torch.zeros((), device=next(self.parameters()).device)
        return torch.stack(penalties).sum()


def read_lines(path: str | Path, encoding: str = "utf-8") -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of a data file (:func:`elmoc.data.corpus.readers.read_lines`);
    undecodable bytes are an InputFileError with the line."""
    from elmoc.data.corpus.readers import read_lines as _read_lines

    return _read_lines(path, encoding, "set the task's encoding option (e.g. cp1252) if the file uses another one",
                       empty_ok=True)


def check_options(owner: str, given: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """Merge ``given`` over ``defaults``; an unknown key is a ConfigError listing the accepted ones."""
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise ConfigError(f"{owner} must be a mapping, got {given!r}")
    from elmoc.config_section import check_keys

    check_keys(given, defaults, owner)
    return {**defaults, **given}


class Task:
    """Base class of downstream tasks (see the module docstring for the contract).

    Args:
        train, dev, test: data paths (None = not configured).
        model: model hyperparameters, merged over ``default_model``.
    """

    metric_name: str = "accuracy"
    metric_label: str = ""
    extra_metrics: dict[str, str] = {}
    default_model: dict[str, Any] = {}
    default_trainer: dict[str, Any] = {}
    default_with_fasttext: bool = False
    merged_options: tuple[str, ...] = ("model",)
    required_data: tuple[str, ...] = SPLITS
    lowercase_words: bool = False

    def __init__(self, train: str | None = None, dev: str | None = None, test: str | None = None,
                 model: dict[str, Any] | None = None):
        self.paths = {"train": train, "dev": dev, "test": test}
        self.model_options = check_options(f"task {self.registered_name!r} model", model or {}, self.default_model)

    registered_name: str = "task"

    @classmethod
    def section_defaults(cls) -> dict[str, Any]:
        """What the workflow fills into a section of this task that lacks it, in this order:
        each constructor option with its default (but ``merged_options``), then ``with_fasttext``."""
        options = inspect.signature(cls.__init__).parameters.values()
        defaults = {p.name: p.default for p in options
                    if p.default is not inspect.Parameter.empty and p.name not in cls.merged_options}
        return {**defaults, "with_fasttext": cls.default_with_fasttext}

    # -- data -----------------------------------------------------------------
    def missing_data(self) -> str | None:
        """Name of the first required data key that is not configured, or None."""
        for key in self.required_data:
            if not self.paths.get(key):
                return key
        return None

    def path(self, split: str) -> Path:
        """The configured file of ``split``; a missing file is an InputFileError."""
        value = self.paths.get(split)
        if not value:
            raise ConfigError(f"task {self.registered_name!r}: no {split!r} path configured")
        path = Path(value)
        if not path.is_file():
            raise InputFileError(path, f"{split} data file not found; check the task's {split!r} path")
        return path

    def read(self, split: str) -> list:
        raise NotImplementedError

    def sentences(self, instances: Sequence[Any]) -> Iterable[list[str]]:
        raise NotImplementedError

    def length(self, instance: Any) -> int:
        return 1

    # -- model ----------------------------------------------------------------
    def build_model(self, inputs) -> TaskModel:
        raise NotImplementedError

    def collate(self, instances: Sequence[Any], inputs) -> dict:
        raise NotImplementedError

    def new_metric(self) -> Metric:
        raise NotImplementedError

    # -- a saved task model (elmoc.tasks.task_model) ------------------------------------------
    def vocabularies(self) -> dict[str, Any]:
        """What the model's shape and the batches depend on beyond the section (JSON); {} here."""
        return {}

    def use_vocabularies(self, saved: dict[str, Any]) -> None:
        """Set what :meth:`vocabularies` returned, instead of reading the data files."""

    def read_input(self, path: str | Path) -> list:
        """Instances of ``path``, a file in the task's own format (read as the test split)."""
        saved = self.paths
        self.paths = {**saved, "test": str(path)}
        try:
            return self.read("test")
        finally:
            self.paths = saved

    def sentence_instance(self, tokens: Sequence[str]) -> Any:
        """An unlabelled instance of one sentence, or None when the task's instances are not single sentences."""
        return None

    def prediction_record(self, instance: Any, prediction: Any) -> dict[str, Any]:
        """One output line of ``elmoc predict``: the instance's tokens and its prediction, labels as strings."""
        raise ConfigError(f"task {self.registered_name!r} writes no predictions: its class needs a "
                          "prediction_record method (tasks/base.py)")
