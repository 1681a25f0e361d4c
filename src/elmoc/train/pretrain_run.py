"""One ``elmoc train`` run (and ``elmoc distill``'s, with its own trainer): the spec checked
before the output folder exists, the folder's lock, log and attempt record, and the loop."""
from __future__ import annotations

from typing import Any

TRAIN_TEXT_LOG = "train.log"  # in the output folder: every attempt's log lines (rank 0), appended


def run_training(args, trainer=None, preflight=None) -> int:
    """``elmoc train`` with the parsed ``args`` (spec, direction, output_dir, device, threads,
    no_resume, stale_checkpoint, max_steps, stop_margin): the run's attempt record, lock and log
    around :func:`elmoc.train.loop.train`; the exit status.  ``trainer``: the loop's Trainer class or factory (``elmoc distill`` passes its own);
    ``preflight(spec, vocab)``: the caller's own checks of the config, run with train's before
    the output folder is touched (a refused config leaves no folder, lock, attempt or log)."""
    import os
    import signal
    from pathlib import Path

    from elmoc.attempts import CRASHED, DONE, STOPPED, AttemptLog, OutputLock, RepeatedCrash, announce_attempt, \
        checkpoint_step, error_line, spec_fingerprint
    from elmoc.io.run_log import keep_log
    from elmoc.process_tree import EXIT_DIR_ENV, EXIT_SIGINT, EXIT_STOPPED, die_with_parent, record_exit

    if "LOCAL_RANK" in os.environ or EXIT_DIR_ENV in os.environ:  # started by torchrun or `elmoc with-gpus`
        die_with_parent(signal.SIGTERM)  # its launcher dies: stop after the step and save (not `nohup` users)
    attempts = None
    try:
        if os.environ.get("RANK", "0") == "0":  # the process that writes the folder, before torch starts
            spec_text = _check_spec_direction(args)  # a wrong direction is refused before the folder exists
            _refuse_spec_among_outputs(args)
        prepared = _prepare(args, preflight)  # every rank; a bad config is refused before the folder exists
        if os.environ.get("RANK", "0") == "0":
            OutputLock(args.output_dir).acquire()  # held until this process exits
            keep_log(Path(args.output_dir) / TRAIN_TEXT_LOG)
            attempts = AttemptLog(args.output_dir, lambda: checkpoint_step(Path(args.output_dir)),
                                  spec_fingerprint(spec_text, args.direction, str(args.max_steps)))
            if not args.no_resume:
                attempts.check()
            if os.environ.get(EXIT_DIR_ENV):  # with-gpus records the whole job's outcome, every rank's
                announce_attempt(os.environ[EXIT_DIR_ENV], attempts)
                attempts = None
        status = _train(args, trainer, prepared)
    except KeyboardInterrupt:
        record_exit(EXIT_SIGINT, "interrupted")
        if attempts is not None:
            attempts.record(STOPPED, EXIT_SIGINT, "interrupted")
        raise
    except BaseException as e:
        status = getattr(e, "exit_status", 1)
        record_exit(status, error_line(e))
        if attempts is not None and not isinstance(e, (RepeatedCrash, SystemExit)):
            attempts.record(CRASHED, status, error_line(e))
        raise
    record_exit(status, "stopped" if status == EXIT_STOPPED else "done")
    if attempts is not None:
        attempts.record(STOPPED if status == EXIT_STOPPED else DONE, status)
    return status


def _refuse_spec_among_outputs(args: Any) -> None:
    """The spec must not be one of the files train writes into --output-dir."""
    from pathlib import Path

    from elmoc.io.output_paths import refuse_outputs_among_inputs
    from elmoc.train.checkpoint import CHECKPOINT, HELDOUT, MODEL, TRAIN_LOG

    names = (CHECKPOINT, MODEL, HELDOUT, TRAIN_LOG, TRAIN_TEXT_LOG)
    refuse_outputs_among_inputs("train", {f"--output-dir's {name}": Path(args.output_dir) / name for name in names},
                                {"--spec": args.spec})


def _load_spec(path: str) -> dict:
    """The LM spec at ``path`` (one-line errors for a missing, invalid or non-mapping file, or
    an unknown key)."""
    from elmoc.config import check_spec_keys, load_yaml

    spec = load_yaml(path, mapping="an LM spec")
    check_spec_keys(spec, path)
    return spec


def _check_spec_direction(args: Any) -> str:
    """The spec's text, after refusing a --direction the spec does not train (one line)."""
    from pathlib import Path

    from elmoc.directions import check_run

    check_run(_load_spec(args.spec), args.direction, args.spec)
    return Path(args.spec).read_text(encoding="utf-8")


def _prepare(args: Any, preflight=None) -> tuple:
    """``(spec, settings, lm_data(...))`` of the run, the config checked (the spec's train section,
    its data and vocabulary, and the caller's ``preflight``) before the output folder exists."""
    from elmoc.train.settings import TrainSettings

    spec = _load_spec(args.spec)
    if args.max_steps is not None:
        spec.setdefault("train", {})["max_steps"] = args.max_steps
    settings = TrainSettings.from_config(spec.get("train", {}))
    from elmoc.train.lm_data import lm_data

    data = lm_data(spec, args.spec, args.direction, settings)
    if preflight is not None:
        preflight(spec, data[0])
    return spec, settings, data


def _train(args: Any, trainer, prepared: tuple) -> int:
    from pathlib import Path

    import torch

    from elmoc.train.loop import train
    from elmoc.train.signals import EXIT_INTERRUPTED

    if args.threads:
        torch.set_num_threads(args.threads)
    spec, settings, (vocab, vocab_path, make_batches, make_heldout, steps_per_epoch) = prepared
    result = train(spec, vocab, Path(args.output_dir), make_batches, make_heldout,
                   direction=args.direction, vocab_path=str(vocab_path), device=args.device,
                   resume=not args.no_resume, steps_per_epoch=steps_per_epoch, spec_path=args.spec,
                   stale_checkpoint=args.stale_checkpoint, stop_margin_s=args.stop_margin, settings=settings,
                   trainer=trainer)
    return EXIT_INTERRUPTED if result.interrupted else 0
