"""One ``elmoc task`` run (also started by ``elmoc compression-table``): the section and its
inputs checked, the run folder's lock, log and attempt record, the runner (resuming its
checkpoint), the metrics JSON and the saved task model.

``args`` is the command's parsed options (an ``argparse.Namespace`` or any object with the same
attributes): task, config / section_json, variant, seed, output, features, fasttext, lm, vocab,
scale, threads, device, checkpoint_minutes, stop_margin, stale_checkpoint, save_model, lm_model.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def run_task_command(args: Any) -> int:
    """The whole run, with its exit status recorded for ``elmoc with-gpus`` and in attempts.jsonl."""
    import os
    import signal

    from elmoc.attempts import CRASHED, DONE, STOPPED, RepeatedCrash, error_line
    from elmoc.process_tree import EXIT_DIR_ENV, EXIT_SIGINT, EXIT_STOPPED, die_with_parent, record_exit
    from elmoc.train.signals import StopSignals

    if EXIT_DIR_ENV in os.environ:  # started by `elmoc with-gpus`: its death stops the run (saving)
        die_with_parent(signal.SIGTERM)
    guard: dict = {"attempts": None}
    try:
        with StopSignals() as stop:  # from the start: a signal while the data loads stops after the first step
            status = _run(args, guard, stop)
    except KeyboardInterrupt:
        record_exit(EXIT_SIGINT, "interrupted")
        if guard["attempts"] is not None:
            guard["attempts"].record(STOPPED, EXIT_SIGINT, "interrupted")
        raise
    except BaseException as e:
        status = getattr(e, "exit_status", 1)
        record_exit(status, error_line(e))
        if guard["attempts"] is not None and not isinstance(e, (RepeatedCrash, SystemExit)):
            guard["attempts"].record(CRASHED, status, error_line(e))
        raise
    record_exit(status, "stopped" if status == EXIT_STOPPED else "done")
    if guard["attempts"] is not None:
        guard["attempts"].record(STOPPED if status == EXIT_STOPPED else DONE, status)
    return status


class _Run:
    """What the run's steps share: the task, its trainer settings and section, the record being
    filled, the device, the start times and the fine-tuning settings (None: features)."""

    def __init__(self, args: Any):
        import time

        import torch

        from elmoc.devices import resolve_device
        from elmoc.tasks.config import build_task, task_section_from_args
        from elmoc.tasks.runner import TrainerConfig

        self.start, self.cpu_start = time.time(), time.process_time()
        self.device = resolve_device(args.device)
        if args.threads:
            torch.set_num_threads(args.threads)
        self.section, scale = task_section_from_args(args)
        self.task, trainer_options = build_task(self.section)
        self.fine_tune = fine_tune_settings(args, self.section)
        self.trainer = TrainerConfig.from_dict(trainer_options, self.task.default_trainer)
        if args.checkpoint_minutes is not None:
            _check_minutes(args.checkpoint_minutes)
            self.trainer.checkpoint_minutes = args.checkpoint_minutes
        self.record = {"task": args.task, "variant": args.variant, "seed": args.seed, "metric": self.task.metric_name,
                       "scale": args.scale or scale, "device": str(self.device), "threads": torch.get_num_threads(),
                       "encoder": "features" if self.fine_tune is None else "fine_tune",
                       "recipe": None if self.fine_tune is None else self.fine_tune.recipe}


def _check_minutes(minutes: float) -> None:
    from elmoc.errors import ConfigError

    if minutes < 0:
        raise ConfigError(f"--checkpoint-minutes must be >= 0, got {minutes}")


def _run(args: Any, guard: dict, stop) -> int:
    from elmoc.attempts import OutputLock
    from elmoc.io.run_log import keep_log
    from elmoc.records import write_task_record
    from elmoc.tasks.checkpoint import TASK_TEXT_LOG, run_dir

    run = _Run(args)
    missing = run.task.missing_data()
    if missing:
        run.record.update({"dev": None, "test": None, "num_train": 0, "num_test": 0, "seconds": 0.0,
                           "status": f"no data: set tasks.{args.task}.{missing}"})
        log.warning("%s: %s", args.task, run.record["status"])
        write_task_record(args.output, run.record)
        return 0
    check_inputs(args, run.fine_tune)
    folder = run_dir(args.output)
    lock = OutputLock(folder).acquire()  # one run per folder
    handler = keep_log(folder / TASK_TEXT_LOG)
    try:
        return _train(args, guard, stop, run, folder)
    finally:  # (a process ends anyway; a caller in the same process gets its file and lock back)
        logging.getLogger().removeHandler(handler)
        handler.close()
        lock.release()


def check_inputs(args: Any, fine_tune) -> None:
    """--features / --fasttext / --lm and --save-model / --lm-model go together (one line each);
    a --save-model folder that would be refused is refused before hours of training."""
    from elmoc.errors import ConfigError

    if not args.features and not args.fasttext and fine_tune is None:
        raise ConfigError("give --features (LM features) and/or --fasttext (word vectors)")
    if args.save_model:
        from elmoc.io.output_paths import check_output_directory

        if bool(args.features) != bool(args.lm_model):
            raise ConfigError("--save-model of a run on --features needs the model directory they came from: add "
                              "--lm-model DIR (results/models/<variant>, `elmoc export`)" if args.features else
                              "--lm-model names the LM of --features (a fine-tuned run saves the LM of --lm); "
                              "drop it")
        check_output_directory(args.save_model, "task", {"--lm-model": args.lm_model, "--lm": args.lm})
    elif args.lm_model:
        raise ConfigError("--lm-model goes with --save-model (the LM copied into the task model directory)")


def fine_tune_settings(args: Any, section: dict):
    """The section's fine-tuning settings (None for ``encoder: features``), checked against --lm
    and --features (one line each)."""
    from elmoc.errors import ConfigError
    from elmoc.pretrained.loader import read_model_meta
    from elmoc.tasks.fine_tune import FineTuneSettings, encoder_mode

    where = f"tasks.{args.task}"
    settings = FineTuneSettings.from_section(section.get("fine_tune"), f"{where}.fine_tune")
    if encoder_mode(section, where) == "features":
        if args.lm:
            raise ConfigError(f"--lm is read only when {where}.encoder is fine_tune (it is features); set it, "
                              "or give --features instead")
        return None
    if args.features:
        raise ConfigError(f"--features with {where}.encoder: fine_tune; the bi-LM of --lm computes the layers, "
                          "drop --features")
    if not args.lm:
        raise ConfigError(f"{where}.encoder is fine_tune: give --lm DIR, the variant's model directory "
                          "written by `elmoc export` (results/models/{variant})")
    read_model_meta(args.lm)  # not a model directory: one line naming it
    return settings


def _attempts(args: Any, run: _Run, folder, guard: dict):
    """The run's attempt record (refusing a third try of the same crash), announced to with-gpus."""
    import json
    import os
    from dataclasses import asdict

    from elmoc.attempts import AttemptLog, announce_attempt, checkpoint_step, spec_fingerprint
    from elmoc.process_tree import EXIT_DIR_ENV
    from elmoc.tasks.checkpoint import run_spec

    inputs_paths = {"features": args.features, "fasttext": args.fasttext, "vocab": args.vocab, "lm": args.lm}
    spec = run_spec(args.task, run.section, asdict(run.trainer), args.seed, inputs_paths)
    attempts = AttemptLog(folder, lambda: checkpoint_step(folder),
                          spec_fingerprint(json.dumps(spec, sort_keys=True, default=str)))
    attempts.check()
    if os.environ.get(EXIT_DIR_ENV):  # with-gpus records the job's outcome
        announce_attempt(os.environ[EXIT_DIR_ENV], attempts)
    else:
        guard["attempts"] = attempts
    return spec


def _inputs(args: Any, run: _Run, data: dict):
    """The task model's inputs: the bi-LM in process (fine_tune) or features and/or vectors."""
    from elmoc.tasks.embedder import TaskInputs

    sentences = [s for split in data.values() for s in run.task.sentences(split)]
    if run.fine_tune is not None:
        from elmoc.tasks.fine_tune import LMInputs

        return LMInputs.create(sentences, args.lm, run.fine_tune, vectors=args.fasttext, vocab=args.vocab,
                               lowercase=run.task.lowercase_words)
    return TaskInputs.create(sentences, vectors=args.fasttext, vocab=args.vocab, features=args.features,
                             lowercase=run.task.lowercase_words)


def _train(args: Any, guard: dict, stop, run: _Run, folder) -> int:
    """The run itself, inside its folder's lock: the attempt record, data and inputs, the
    runner (resuming its checkpoint), the metrics JSON."""
    import time

    from elmoc.records import write_task_record
    from elmoc.tasks.checkpoint import CHECKPOINT, TaskCheckpoint
    from elmoc.tasks.runner import RunInterrupted, run_task
    from elmoc.train.signals import EXIT_INTERRUPTED

    spec = _attempts(args, run, folder, guard)
    data = {split: run.task.read(split) for split in ("train", "dev", "test")}
    inputs = _inputs(args, run, data)
    checkpoint = TaskCheckpoint(folder / CHECKPOINT, spec, stale=args.stale_checkpoint)
    trained = []
    try:
        result = run_task(run.task, inputs, args.seed, run.trainer, data, run.device, checkpoint=checkpoint,
                          stop=stop, stop_margin_s=args.stop_margin, started=run.start, finished=trained.append)
    except RunInterrupted:
        return EXIT_INTERRUPTED
    record = run.record
    record.update(result)  # its "seconds": every attempt's wall time, set-up included
    record["cpu_seconds"] = round(time.process_time() - run.cpu_start, 2)
    record["status"] = "ok"
    record["inputs"] = {"features": args.features, "fasttext": args.fasttext,
                        **({"lm": args.lm, "fine_tune": run.fine_tune.record()} if run.fine_tune is not None else {})}
    log.info("%s/%s seed %d: dev %s %.4f, test %.4f (%.0f s)", args.task, args.variant, args.seed,
             run.task.metric_name, record["dev"], record["test"], record["seconds"])
    if args.save_model:
        _save_model(args, run, trained[0], inputs, result)
    write_task_record(args.output, record)  # checked against the record type the tables read
    checkpoint.remove()  # the result is written: the checkpoint has served
    return 0


def _save_model(args: Any, run: _Run, model, inputs, result: dict) -> None:
    from elmoc.tasks.config import complete_section
    from elmoc.tasks.task_model import save_task_model

    save_task_model(args.save_model, name=args.task, section=complete_section(run.section, f"tasks.{args.task}"),
                    variant=args.variant, seed=args.seed, task=run.task, model=model, inputs=inputs,
                    lm_dir=args.lm_model or args.lm, result=result, eval_batch_size=run.trainer.eval_batch_size)


def write_task_sentences(args: Any) -> int:
    """``elmoc task-sentences``: every distinct sentence of the task's splits, once, to
    ``args.output`` (when given), and each split's distinct sentences to ``args.split_dir``'s
    ``{train,dev,test}.txt`` (when given: the LM fine-tuning text, read by split); the number of
    distinct sentences over all splits."""
    from elmoc.errors import ConfigError
    from elmoc.features.store import sentence_key
    from elmoc.io.atomic import atomic_file
    from elmoc.tasks.config import build_task, task_section_from_args

    section, _ = task_section_from_args(args)
    task, _ = build_task(section)
    missing = task.missing_data()
    if missing:
        raise ConfigError(f"task {args.task!r} has no data: set tasks.{args.task}.{missing}")
    by_split: dict[str, dict[str, None]] = {}
    for split in ("train", "dev", "test"):
        by_split[split] = dict.fromkeys(sentence_key(tokens) for tokens in task.sentences(task.read(split)) if tokens)
    seen = {sentence: None for sentences in by_split.values() for sentence in sentences}
    outputs = [(args.output, seen)] if getattr(args, "output", None) else []
    split_dir = getattr(args, "split_dir", None)
    if split_dir:
        Path(split_dir).mkdir(parents=True, exist_ok=True)
        outputs += [(Path(split_dir) / f"{split}.txt", sentences) for split, sentences in by_split.items()]
    for path, sentences in outputs:
        with atomic_file(path) as f:
            for sentence in sentences:
                f.write(sentence + "\n")
    return len(seen)
