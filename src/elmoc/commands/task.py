"""``elmoc task``: train and evaluate one downstream task for one variant and seed."""
from __future__ import annotations

NAME = "task"
HELP = "train a downstream task model on LM features and/or FastText vectors; write the metrics JSON"
DESCRIPTION = (
    "Trains the task model of tasks.<task> in --config (any registered task: sst, snli, ner, ...) on its "
    "train split with early stopping on dev, restores the best epoch and scores test. Inputs: --features "
    "(HDF5 from `elmoc extract`, mixed by a learned scalar mix), --fasttext (a fastText .bin model, or a .npy "
    "table together with --vocab), or both (concatenated, like BCN's GloVe+ELMo). Writes "
    '{"task", "variant", "seed", "metric", "metric_label", "dev", "test", "extra_scores", "scale", "num_train", '
    '"num_test", "seconds", "status", "device", "threads", ...} to --output (extra_scores: scores beside the '
    "headline one, each with its label, e.g. SRL's official CoNLL-2005 F1 beside the span F1). A task whose "
    'data paths are not configured gets '
    '"status": "no data: set tasks.<task>.<key>" instead of an error. --device cuda (or cuda:N, or auto '
    'when a GPU is visible) trains on the GPU; the code path is the CPU one plus .to(device). '
    "The run keeps its state in <output without .json>.run/ (results/tasks/<task>/<variant>/seed<N>.run/): "
    "checkpoint.pt, written atomically at every epoch's end, every trainer.checkpoint_minutes (default 30) "
    "and on a stop, holds the model, optimizer, learning-rate schedules, early-stopping state, every random "
    "generator and the position in the epoch's shuffled batches; a rerun of the same command resumes from it "
    "and ends with the result an uninterrupted run writes (on the CPU at the same thread count, bit for bit; "
    "timings aside). A checkpoint of other settings, features, vectors or task data files is kept as "
    "checkpoint.<hash>.pt and the run starts afresh (--stale-checkpoint). On SIGTERM, SIGUSR1 or SIGINT the "
    "step (or evaluation batch) in progress is finished, the checkpoint saved and the command exits 75 "
    "(EX_TEMPFAIL: rerun to resume); inside a SLURM job it also stops and saves --stop-margin seconds before the "
    "job's end time. The checkpoint is removed once the metrics JSON is written. Only one run writes a run "
    "folder at a time (.train.lock; exit 73); every attempt is appended to attempts.jsonl there, and after "
    "two that crashed with the same error at the same checkpoint step a new one is refused (delete that "
    "file after fixing the cause); task.log there keeps every attempt's log lines. Long training epochs and "
    "evaluations log done/total batches, rate and ETA every trainer.progress_seconds (default 60). "
    "A section with encoder: fine_tune reads no --features: the bi-LM of --lm (a model directory from "
    "`elmoc export`) runs inside the task model and trains with it by the section's fine_tune recipe "
    "(ulmfit, full, full_constant or frozen; docs/downstream.md); the JSON then has \"encoder\": \"fine_tune\" and its "
    "\"recipe\". "
    "--save-model DIR also writes the trained model (best epoch) as a directory for `elmoc predict`, with a "
    "copy of the LM's model directory in DIR/lm (--lm of a fine-tuned run, whose fine-tuned weights are in "
    "the task model's weights; --lm-model, the directory the --features came from, for a features run)."
)


INPUTS = ('config', 'features', 'fasttext', 'vocab', 'lm', 'lm_model')  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output', 'save_model')


def implicit_inputs(args) -> dict:
    """The task section's data files (train, dev, test, ...) and every other file it names."""
    from elmoc.commands._paths import spec_inputs
    from elmoc.tasks.config import task_section_from_args

    try:
        section, _ = task_section_from_args(args)
    except Exception:  # noqa: BLE001 (a bad config is refused by the run, in one line)
        return {}
    return spec_inputs(section, f"tasks.{args.task}")


def add_arguments(parser) -> None:
    from elmoc.commands.train import _seconds_or_auto
    from elmoc.tasks.config import add_task_section_arguments

    add_task_section_arguments(parser, config_help="workflow config (uses tasks.<task> and scale) or a single task section YAML")
    parser.add_argument("--variant", required=True, help="name recorded in the metrics JSON (LM variant, or 'fasttext')")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--output", required=True, help="metrics JSON to write (e.g. results/tasks/sst5/elmo-c/seed1.json)")
    parser.add_argument("--features", help="HDF5 features of the task's sentences (results/features/{variant}/{task}.hdf5)")
    parser.add_argument("--fasttext", help="static word vectors: fastText .bin model or .npy table (with --vocab)")
    parser.add_argument("--lm", metavar="DIR", help="encoder: fine_tune: the bi-LM's model directory "
                        "(`elmoc export`, results/models/{variant}); not with --features")
    parser.add_argument("--vocab", help="vocabulary file the .npy table follows (results/vocab/vocab.txt)")
    parser.add_argument("--scale", choices=["demo", "cpu", "full"], help="label of the run (default: the config's `scale`, else demo)")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    parser.add_argument("--device", default="cpu",
                        help="cpu, cuda, cuda:N, or auto (cuda when available); default cpu")
    parser.add_argument("--checkpoint-minutes", type=float, default=None, metavar="MINUTES",
                        help="override trainer.checkpoint_minutes (default 30; 0: only at epochs' ends and stops)")
    parser.add_argument("--stop-margin", type=_seconds_or_auto, default=None, metavar="SECONDS|auto",
                        help="inside a SLURM job, stop and save this many seconds before its end time (default "
                             "auto: max(300 s, 2 x the longest checkpoint write + a step); the workflow: "
                             "resources.task_run.stop_margin_s)")
    parser.add_argument("--stale-checkpoint", choices=["set-aside", "refuse"], default="set-aside",
                        help="a checkpoint.pt of other settings, features or data files: keep it as "
                             "checkpoint.<hash>.pt and start afresh (default), or refuse it with one line")
    parser.add_argument("--save-model", metavar="DIR", help="also write the trained task model as a directory "
                        "(weights, section, vocabularies, lm/) that `elmoc predict --task-model DIR` reads")
    parser.add_argument("--lm-model", metavar="DIR", help="with --save-model and --features: the model directory "
                        "(`elmoc export`, results/models/<variant>) the features came from; copied into DIR/lm")


def run(args) -> int:
    import logging
    import os
    import signal

    from elmoc.attempts import CRASHED, DONE, STOPPED, RepeatedCrash, error_line
    from elmoc.process_tree import EXIT_DIR_ENV, EXIT_SIGINT, EXIT_STOPPED, die_with_parent, record_exit

    log = logging.getLogger(__name__)
    if EXIT_DIR_ENV in os.environ:  # started by `elmoc with-gpus`: its death stops the run (saving)
        die_with_parent(signal.SIGTERM)
    from elmoc.train.signals import StopSignals

    guard: dict = {"attempts": None}
    try:
        with StopSignals() as stop:  # from the start: a signal while the data loads stops after the first step
            status = _run(args, log, guard, stop)
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


def _run(args, log, guard: dict, stop) -> int:
    import logging
    import time

    import torch

    from elmoc.attempts import OutputLock
    from elmoc.commands.train import keep_log
    from elmoc.devices import resolve_device
    from elmoc.errors import ConfigError
    from elmoc.tasks.checkpoint import TASK_TEXT_LOG, run_dir
    from elmoc.tasks.config import build_task, task_section_from_args
    from elmoc.tasks.runner import TrainerConfig

    start, cpu_start = time.time(), time.process_time()
    device = resolve_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    section, scale = task_section_from_args(args)
    scale = args.scale or scale
    task, trainer_options = build_task(section)
    fine_tune = _fine_tune_settings(args, section)
    trainer = TrainerConfig.from_dict(trainer_options, task.default_trainer)
    if args.checkpoint_minutes is not None:
        if args.checkpoint_minutes < 0:
            raise ConfigError(f"--checkpoint-minutes must be >= 0, got {args.checkpoint_minutes}")
        trainer.checkpoint_minutes = args.checkpoint_minutes
    record = {"task": args.task, "variant": args.variant, "seed": args.seed, "metric": task.metric_name,
              "scale": scale, "device": str(device), "threads": torch.get_num_threads(),
              "encoder": "features" if fine_tune is None else "fine_tune",
              "recipe": None if fine_tune is None else fine_tune.recipe}
    missing = task.missing_data()
    if missing:
        record.update({"dev": None, "test": None, "num_train": 0, "num_test": 0, "seconds": 0.0,
                       "status": f"no data: set tasks.{args.task}.{missing}"})
        log.warning("%s: %s", args.task, record["status"])
        from elmoc.records import write_task_record

        write_task_record(args.output, record)
        return 0
    if not args.features and not args.fasttext and fine_tune is None:
        raise ConfigError("give --features (LM features) and/or --fasttext (word vectors)")
    if args.save_model:
        from elmoc.io.output_paths import check_output_directory

        if bool(args.features) != bool(args.lm_model):
            raise ConfigError("--save-model of a run on --features needs the model directory they came from: add "
                              "--lm-model DIR (results/models/<variant>, `elmoc export`)" if args.features else
                              "--lm-model names the LM of --features (a fine-tuned run saves the LM of --lm); "
                              "drop it")
        check_output_directory(args.save_model, "task", {"--lm-model": args.lm_model, "--lm": args.lm})  # before hours of training
    elif args.lm_model:
        raise ConfigError("--lm-model goes with --save-model (the LM copied into the task model directory)")
    folder = run_dir(args.output)
    lock = OutputLock(folder).acquire()  # one run per folder
    handler = keep_log(folder / TASK_TEXT_LOG)
    try:
        return _train(args, log, guard, stop, task, trainer, section, record, folder, start, cpu_start, device,
                      fine_tune)
    finally:  # (a process ends anyway; a caller in the same process gets its file and lock back)
        logging.getLogger().removeHandler(handler)
        handler.close()
        lock.release()


def _fine_tune_settings(args, section):
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


def _train(args, log, guard, stop, task, trainer, section, record, folder, start, cpu_start, device,
           fine_tune=None) -> int:
    """The run itself, inside its folder's lock: the attempt record, data and inputs, the
    runner (resuming its checkpoint), the metrics JSON."""
    import json
    import os
    import time
    from dataclasses import asdict

    from elmoc.attempts import AttemptLog, announce_attempt, spec_fingerprint
    from elmoc.commands.train import checkpoint_step
    from elmoc.process_tree import EXIT_DIR_ENV
    from elmoc.tasks.checkpoint import CHECKPOINT, TaskCheckpoint, run_spec
    from elmoc.tasks.embedder import TaskInputs
    from elmoc.tasks.runner import RunInterrupted, run_task
    from elmoc.train.signals import EXIT_INTERRUPTED

    inputs_paths = {"features": args.features, "fasttext": args.fasttext, "vocab": args.vocab, "lm": args.lm}
    spec = run_spec(args.task, section, asdict(trainer), args.seed, inputs_paths)
    attempts = AttemptLog(folder, lambda: checkpoint_step(folder),
                          spec_fingerprint(json.dumps(spec, sort_keys=True, default=str)))
    attempts.check()
    if os.environ.get(EXIT_DIR_ENV):  # with-gpus records the job's outcome
        announce_attempt(os.environ[EXIT_DIR_ENV], attempts)
    else:
        guard["attempts"] = attempts
    data = {split: task.read(split) for split in ("train", "dev", "test")}
    sentences = [s for split in data.values() for s in task.sentences(split)]
    if fine_tune is not None:
        from elmoc.tasks.fine_tune import LMInputs

        inputs = LMInputs.create(sentences, args.lm, fine_tune, vectors=args.fasttext, vocab=args.vocab,
                                 lowercase=task.lowercase_words)
    else:
        inputs = TaskInputs.create(sentences, vectors=args.fasttext, vocab=args.vocab, features=args.features,
                                   lowercase=task.lowercase_words)
    checkpoint = TaskCheckpoint(folder / CHECKPOINT, spec, stale=args.stale_checkpoint)
    trained = []
    try:
        result = run_task(task, inputs, args.seed, trainer, data, device, checkpoint=checkpoint, stop=stop,
                          stop_margin_s=args.stop_margin, started=start, finished=trained.append)
    except RunInterrupted:
        return EXIT_INTERRUPTED
    record.update(result)  # its "seconds": every attempt's wall time, set-up included
    record["cpu_seconds"] = round(time.process_time() - cpu_start, 2)
    record["status"] = "ok"
    record["inputs"] = {"features": args.features, "fasttext": args.fasttext,
                        **({"lm": args.lm, "fine_tune": fine_tune.record()} if fine_tune is not None else {})}
    log.info("%s/%s seed %d: dev %s %.4f, test %.4f (%.0f s)", args.task, args.variant, args.seed,
             task.metric_name, record["dev"], record["test"], record["seconds"])
    if args.save_model:
        from elmoc.tasks.config import complete_section
        from elmoc.tasks.task_model import save_task_model

        save_task_model(args.save_model, name=args.task, section=complete_section(section, f"tasks.{args.task}"),
                        variant=args.variant, seed=args.seed, task=task, model=trained[0], inputs=inputs,
                        lm_dir=args.lm_model or args.lm, result=result, eval_batch_size=trainer.eval_batch_size)
    from elmoc.records import write_task_record

    write_task_record(args.output, record)  # checked against the record type the tables read
    checkpoint.remove()  # the result is written: the checkpoint has served
    return 0
