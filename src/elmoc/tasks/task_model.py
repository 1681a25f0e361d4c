"""A trained task model as a self-contained directory: written by ``elmoc task --save-model DIR``,
read by ``elmoc predict --task-model DIR`` (registers nothing).

The directory (replaced whole by its writer, :func:`elmoc.io.output_paths.output_directory`)::

    task-model.json   {"format": 1, "task": section name, "section": the completed task section,
                       "variant", "seed", "encoder": "features", "metric", "dev", "test",
                       "eval_batch_size", "vocabularies": Task.vocabularies(),
                       "word_vectors": {"dim", "lowercase"} or null,
                       "features": {"num_layers", "dim"} or null}
    weights.pt        the best epoch's state dict (``torch.save``; read back weights-only)
    words.json        the words of the word table, row i + 2 = words[i] (rows 0/1: pad/unk); with word vectors only
    lm/               the bi-LM's model directory (``elmoc export``; hard links where the filesystem allows)
    README.md         how to use it

The word table's numbers are in ``weights.pt`` (the embedder's ``words.weight``); a word outside
``words.json`` gets the unk row, as an unseen word did in training.  LM features are computed in
process by the bi-LM of ``lm/`` run as fine-tuning runs it (:class:`~elmoc.tasks.fine_tune.LMInputs`):
with the ``frozen`` recipe for a model trained on extracted features (the numbers ``elmoc extract``
writes for the same sentences, up to float rounding of other batch shapes; the LM's weights, which such
a model's ``weights.pt`` does not hold, are those of ``lm/``), with the run's recipe and its
fine-tuned weights (in ``weights.pt``) for a fine-tuned one.  :func:`task_inputs` is the
one place that turns the directory's ``encoder`` into the model's inputs.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from elmoc.errors import ConfigError, InputFileError
from elmoc.tasks.base import Task, TaskModel
from elmoc.tasks.embedder import TaskInputs

META = "task-model.json"
WEIGHTS = "weights.pt"
WORDS = "words.json"
LM_DIR = "lm"
FORMAT = 1
NOT_A_TASK_MODEL = "not a task model directory (no task-model.json); write one with `elmoc task ... --save-model DIR`"


def save_task_model(directory: str | Path, *, name: str, section: dict[str, Any], variant: str, seed: int,
                    task: Task, model: TaskModel, inputs: TaskInputs, lm_dir: str | Path | None,
                    result: dict[str, Any], eval_batch_size: int) -> Path:
    """Write the task model directory of a finished run (module docstring).

    Args:
        name: the section's name (``sst5``); section: its completed mapping.
        model: the trained model with the best epoch's weights; inputs: the run's inputs.
        lm_dir: the model directory the features came from (required when the run read features).
        result: what ``run_task`` returned (its ``metric``, ``dev`` and ``test`` are recorded).
    """
    from elmoc.io.output_paths import output_directory

    from elmoc.tasks.fine_tune import LMInputs

    fine_tuned = isinstance(inputs, LMInputs)  # its LM's (fine-tuned) weights are in the model's, under lm.*
    if (inputs.store is not None or fine_tuned) and lm_dir is None:
        raise ConfigError("--save-model of a run on LM features needs the model directory they came from: "
                          "add --lm-model DIR (results/models/<variant>, `elmoc export`)")
    meta = {"format": FORMAT, "task": name, "section": section, "variant": variant, "seed": seed,
            "encoder": "fine_tune" if fine_tuned else "features",
            "recipe": inputs.fine_tune.recipe if fine_tuned else None,
            "metric": result["metric"], "dev": result["dev"], "test": result["test"],
            "eval_batch_size": eval_batch_size, "vocabularies": task.vocabularies(),
            "word_vectors": (None if inputs.word_index is None else
                             {"dim": inputs.word_dim, "lowercase": inputs.lowercase}),
            "features": ({"num_layers": inputs.num_lm_layers, "dim": inputs.feature_dim} if fine_tuned else
                         None if inputs.store is None else {"num_layers": inputs.store.num_layers,
                                                            "dim": inputs.feature_dim})}
    with output_directory(directory, "task", {"--lm-model": lm_dir}) as tmp:
        torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, tmp / WEIGHTS)
        if inputs.word_index is not None:
            words = sorted(inputs.word_index, key=inputs.word_index.__getitem__)
            (tmp / WORDS).write_text(json.dumps(words, ensure_ascii=False) + "\n", encoding="utf-8")
        if lm_dir is not None:
            shutil.copytree(lm_dir, tmp / LM_DIR, copy_function=_link_or_copy)
        (tmp / META).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        (tmp / "README.md").write_text(_readme(meta, lm_dir), encoding="utf-8")
    return Path(directory)


def _link_or_copy(source: str, target: str) -> None:
    """A hard link (the LM's files are never rewritten in place: export replaces its folder whole), else a copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _readme(meta: dict[str, Any], lm_dir: str | Path | None) -> str:
    inputs = " and ".join(x for x in ("LM features from lm/" if meta["features"] else "",
                                       "word vectors (words.json)" if meta["word_vectors"] else "") if x)
    return (f"# Task model: {meta['task']} ({meta['section']['type']}), {meta['variant']}, seed {meta['seed']}\n\n"
            f"Trained by `elmoc task` on {inputs}; best epoch's {meta['metric']}: dev {meta['dev']:.4f}, "
            f"test {meta['test']:.4f}.\n" + (f"`lm/` is a copy of the model directory `{lm_dir}`.\n" if lm_dir else "")
            + "\nPredict (JSON lines, one record per instance):\n\n"
            "    elmoc predict --task-model THIS_DIR sentences.txt --output predictions.jsonl\n"
            "    elmoc predict --task-model THIS_DIR --input-format task data_in_the_task_format --output p.jsonl\n\n"
            "`sentences.txt`: one whitespace-tokenized sentence per line (single-sentence tasks). Files:\n"
            f"`{META}` (the task section, variant, seed, label vocabularies), `{WEIGHTS}` (the state dict), "
            f"`{WORDS}` (the word table's words), `{LM_DIR}/` (the bi-LM).\n")


@dataclass
class SavedTaskModel:
    """A loaded task model directory: the task (its vocabularies set), the model in eval mode on
    ``device``, and its inputs (:func:`task_inputs`)."""

    directory: Path
    meta: dict[str, Any]
    task: Task
    model: TaskModel
    inputs: TaskInputs
    device: torch.device

    def predict(self, instances: Sequence[Any], batch_size: int | None = None,
                chunk: int = 2000) -> Iterator[dict[str, Any]]:
        """One :meth:`Task.prediction_record` per instance, in input order; ``chunk`` instances at a
        time are batched by length (the bi-LM runs on each batch) and their records yielded."""
        from elmoc.tasks.runner import bucket_batches, to_device

        batch_size = batch_size or int(self.meta["eval_batch_size"])
        for start in range(0, len(instances), chunk):
            part = instances[start: start + chunk]
            records: list[dict | None] = [None] * len(part)
            with torch.no_grad():
                for idx in bucket_batches([self.task.length(x) for x in part], batch_size, None):
                    batch = to_device(self.task.collate([part[i] for i in idx], self.inputs), self.device)
                    predictions = self.model(batch).predictions
                    rows = predictions.tolist() if isinstance(predictions, torch.Tensor) else list(predictions)
                    for i, row in zip(idx, rows):
                        records[i] = self.task.prediction_record(part[i], row)
            yield from records


def read_meta(directory: str | Path) -> dict[str, Any]:
    """``task-model.json`` of ``directory``; anything else is one InputFileError naming it."""
    directory = Path(directory)
    path = directory / META
    if not path.is_file():
        raise InputFileError(directory, NOT_A_TASK_MODEL)
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise InputFileError(path, f"not valid JSON ({e}); write the task model again") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise InputFileError(path, f"not a task model of format {FORMAT}; write it again with this elmoc's "
                             "`elmoc task --save-model`")
    return meta


def task_inputs(directory: Path, meta: dict[str, Any], device: torch.device) -> TaskInputs:
    """The inputs the saved model reads: the word table's words (vectors from the weights) and, when it
    read LM layers, the bi-LM of ``lm/`` with the ``frozen`` recipe (``encoder: features``) or the
    run's own (``fine_tune``)."""
    if meta["encoder"] not in ("features", "fine_tune"):
        raise InputFileError(directory / META, f"encoder {meta['encoder']!r} is not one this elmoc predicts with "
                             "(features, fine_tune); use the elmoc that wrote it")
    table, words = None, None
    if meta["word_vectors"]:
        try:
            words = json.loads((directory / WORDS).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:  # truncated, overwritten or missing: one line, not a traceback
            raise InputFileError(directory / WORDS, f"is not the word table's list of words ({e}); write the task "
                                 "model again with `elmoc task --save-model`") from None
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise InputFileError(directory / WORDS, "is not a JSON list of words; write the task model again with "
                                 "`elmoc task --save-model`")
        table = np.zeros((len(words), int(meta["word_vectors"]["dim"])), dtype=np.float32)
    lowercase = bool(meta["word_vectors"] and meta["word_vectors"]["lowercase"])
    if not meta["features"]:
        return TaskInputs(table, words, None, lowercase)
    from elmoc.pretrained.loader import load_bilm
    from elmoc.tasks.fine_tune import FineTuneSettings, LMInputs

    # a features model: the frozen recipe is the feature path's numbers; a fine-tuned one: its own recipe
    section = {"recipe": "frozen"} if meta["encoder"] == "features" else meta["section"].get("fine_tune")
    settings = FineTuneSettings.from_section(section, f"{directory / META} fine_tune")
    inputs = LMInputs(load_bilm(directory / LM_DIR, device), settings, table, words, lowercase)
    want = (meta["features"]["num_layers"], meta["features"]["dim"])
    if (inputs.num_lm_layers, inputs.feature_dim) != tuple(want):
        raise InputFileError(directory / LM_DIR, f"gives {inputs.num_lm_layers} layers x {inputs.feature_dim} dims "
                             f"but the task model was trained on {want[0]} x {want[1]}: save it again with the "
                             "--lm-model its features were extracted from")
    return inputs


def lm_weights_of(model: TaskModel, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` of a model trained on extracted features (it saved no ``<embedder>.lm.*`` keys) with
    the bi-LM's entries taken from ``model``'s own LM, loaded from ``lm/``.  Not for a fine-tuned
    model: its ``weights.pt`` holds its own LM weights, and one it lacks is an error, not a fill."""
    from elmoc.tasks.fine_tune import LMTokenEmbedder

    state = dict(state)
    for name, module in model.named_modules():
        if isinstance(module, LMTokenEmbedder):
            prefix = f"{name}.lm." if name else "lm."
            for key, value in module.lm.state_dict().items():
                state.setdefault(prefix + key, value)
    return state


def saved_task(directory: str | Path) -> tuple[dict[str, Any], Task]:
    """(``task-model.json``, the task it describes with its saved vocabularies): no weights, no LM."""
    from elmoc.tasks.config import build_task

    meta = read_meta(directory)
    task, _ = build_task(meta["section"], f"{Path(directory) / META} section")
    task.use_vocabularies(meta["vocabularies"])
    return meta, task


def load_task_model(directory: str | Path, device: str | torch.device = "cpu") -> SavedTaskModel:
    """The task model of ``directory`` ready to predict (module docstring)."""
    from elmoc.io.safe_load import load_weights_only

    directory = Path(directory)
    meta, task = saved_task(directory)
    device = torch.device(device)
    inputs = task_inputs(directory, meta, device)
    model = task.build_model(inputs)
    state = load_weights_only(directory / WEIGHTS, what="a task model's weights",
                              fix="write the task model again with `elmoc task --save-model`")
    try:
        model.load_state_dict(lm_weights_of(model, state) if meta["encoder"] == "features" else state)
    except RuntimeError as e:
        raise InputFileError(directory / WEIGHTS, f"does not fit the model the saved section builds "
                             f"({str(e).strip().splitlines()[0]}); write the task model again") from None
    return SavedTaskModel(directory, meta, task, model.to(device).eval(), inputs, device)


def read_instances(task: Task, path: str | Path, input_format: str | None = None) -> list:
    """The instances of ``path`` to predict on: ``sentences`` (one tokenized sentence per line,
    :meth:`Task.sentence_instance`) or ``task`` (the task's own format, :meth:`Task.read_input`); None:
    sentences for a single-sentence task, else task.  Bad input is one InputFileError or ConfigError
    naming the file and the fix."""
    from elmoc.features.sentences import read_sentences

    if not Path(path).exists():
        raise InputFileError(path, "input file not found")
    single = task.sentence_instance(["probe"]) is not None
    input_format = input_format or ("sentences" if single else "task")
    name = task.registered_name
    if input_format == "sentences":
        if not single:
            raise ConfigError(f"{path}: task {name} does not read one sentence per line; give a file in its own "
                              "format (--input-format task)")
        return [task.sentence_instance(tokens) for tokens in read_sentences(path)]
    try:
        return task.read_input(path)
    except InputFileError as e:
        where = e.path if e.line is None else f"{e.path}:{e.line}"
        other = " (or one sentence per line with --input-format sentences)" if single else ""
        raise InputFileError(e.path, f"{str(e)[len(where) + 2:]}: not task {name}'s input format; give a file "
                             f"in it{other}", e.line) from None
