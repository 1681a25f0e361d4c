"""`elmoc train`: pretrain one direction of an LM, or a joint bi-LM, from a resolved spec."""
from __future__ import annotations

import argparse

from elmoc.directions import RUNS

NAME = "train"
TRAIN_TEXT_LOG = "train.log"  # in --output-dir: every attempt's log lines (rank 0), appended
HELP = "pretrain one direction (forward or backward) of an LM variant, or its joint bi-LM, from its spec"
DESCRIPTION = (
    "Train the LM described by a spec YAML (see `elmoc spec` and config/lm/) on the "
    "corpus shards it names, evaluating on the heldout file before and after. "
    "Writes a resumable checkpoint.pt every train.checkpoint_every steps and "
    "train_log.jsonl to --output-dir, and model.pt (the final LM, no optimizer state) "
    "and heldout.json at the very end. Resumes from checkpoint.pt there unless "
    "--no-resume, after checking it was made for the same spec, direction and "
    "vocabulary. On SIGTERM or SIGUSR1 it finishes the current step, saves "
    "checkpoint.pt and exits with status 75 (EX_TEMPFAIL): rerun the same command to "
    "resume; it also stops and saves by itself --stop-margin seconds before a SLURM job's "
    "end time. Only one trainer writes an output folder at a time (<output-dir>/.train.lock; "
    "a second one is refused with exit status 73). Every attempt's outcome is appended to "
    "<output-dir>/attempts.jsonl; when the last two crashed with the same error at the same "
    "checkpoint step, a new attempt is refused at once (delete that file after fixing the "
    "cause). Rank 0's log lines are also appended to <output-dir>/train.log. Under "
    "`elmoc with-gpus` the job's status is 75 when every process stopped and "
    "saved. For data parallelism launch it with torchrun (WORLD_SIZE > 1); "
    "train.batch_size stays the global batch. A spec with train.directions: joint "
    "(the softmax family, as bilm-tf trains ELMo) is one bidirectional model with a "
    "shared input and output layer, trained with --direction joint on forward and "
    "backward windows of the same corpus position; its loss is the mean of the two "
    "directions' mean losses, its token counts count both directions, and heldout.json "
    "gives the combined metric (perplexity: exp of the mean of the two mean NLLs) with "
    "each direction's under \"forward\" and \"backward\". A spec with train.objective: "
    "masked_lm is one masked LM (a bidirectional encoder predicting BERT-masked words, "
    "train.masking), trained with --direction masked; its heldout metric is taken over "
    "the masked positions of the heldout windows, masked with a fixed seed."
)


INPUTS = ('spec',)  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output_dir',)
RESUMES = ("train",)  # the runs whose checkpoint.pt/model.pt it may resume or replace in --output-dir (cli)


def implicit_inputs(args: argparse.Namespace) -> dict:
    """The files the spec names (vocabulary, corpus, vectors table, tokenizer): inputs too."""
    from elmoc.commands._paths import spec_file_inputs

    return spec_file_inputs(args.spec, "--spec")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spec", required=True, help="LM spec YAML (results/lm/<variant>/spec.yaml)")
    parser.add_argument("--direction", choices=RUNS, required=True,
                        help="forward or backward: one direction of a spec with train.directions: separate "
                             "(the default); joint: both at once, for a spec with train.directions: joint; "
                             "masked: the one model of a spec with train.objective: masked_lm")
    parser.add_argument("--output-dir", required=True, help="where checkpoint.pt, model.pt, heldout.json, train_log.jsonl go")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, or cuda:N (default cpu)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--no-resume", action="store_true",
                        help="delete an existing checkpoint.pt and start from scratch")
    parser.add_argument("--stale-checkpoint", choices=["refuse", "set-aside"], default="refuse",
                        help="a checkpoint.pt of another spec, direction or vocabulary: refuse it with one line "
                             "(default), or keep it as checkpoint.<config hash>.pt and start afresh (the workflow)")
    parser.add_argument("--max-steps", type=int, default=None, help="override train.max_steps")
    parser.add_argument("--stop-margin", type=_seconds_or_auto, default=None, metavar="SECONDS|auto",
                        help="inside a SLURM job, stop and save this many seconds before its end time (default "
                             "auto: the trainer's, from its longest checkpoint write; the workflow: "
                             "resources.pretrain.stop_margin_s)")


def _seconds_or_auto(text: str) -> float | None:
    if text == "auto":
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0 or 'auto', got {text!r}")
    return value


def run(args: argparse.Namespace, trainer=None, preflight=None) -> int:
    """``trainer``: the loop's Trainer class or factory (``elmoc distill`` passes its own);
    ``preflight(spec, vocab)``: the caller's own checks of the config, run with train's before
    the output folder is touched (a refused config leaves no folder, lock, attempt or log)."""
    import os
    import signal
    from pathlib import Path

    from elmoc.attempts import CRASHED, DONE, STOPPED, AttemptLog, OutputLock, RepeatedCrash, announce_attempt, \
        error_line, spec_fingerprint
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


def _refuse_spec_among_outputs(args: argparse.Namespace) -> None:
    """The spec must not be one of the files train writes into --output-dir."""
    from pathlib import Path

    from elmoc.io.output_paths import refuse_outputs_among_inputs
    from elmoc.train.checkpoint import CHECKPOINT, HELDOUT, MODEL, TRAIN_LOG

    names = (CHECKPOINT, MODEL, HELDOUT, TRAIN_LOG, TRAIN_TEXT_LOG)
    refuse_outputs_among_inputs("train", {f"--output-dir's {name}": Path(args.output_dir) / name for name in names},
                                {"--spec": args.spec})


def keep_log(path):
    """Append this process's log records to ``path`` too: the history of every attempt in
    the output folder (Snakemake deletes a job's log file each time it starts the job).
    Returns the handler (``logging.getLogger().removeHandler`` it to stop)."""
    import logging
    import sys

    from elmoc.io.atomic import out_of_space

    class FileHandler(logging.FileHandler):
        def handleError(self, record):  # noqa: N802 (logging's name)
            # a full disk: this line is lost, and the command's own error names the file and says
            # what survived (no "--- Logging error ---" traceback per line before it)
            if not out_of_space(sys.exc_info()[1] or RuntimeError()):
                super().handleError(record)

    handler = FileHandler(path, mode="a", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s", "%Y-%m-%d %H:%M:%S"))
    logging.getLogger().addHandler(handler)
    return handler


def _load_spec(path: str) -> dict:
    """The LM spec at ``path`` (one-line errors for a missing, invalid or non-mapping file, or
    an unknown key)."""
    from elmoc.config import check_spec_keys, load_yaml

    spec = load_yaml(path, mapping="an LM spec")
    check_spec_keys(spec, path)
    return spec


def _check_spec_direction(args: argparse.Namespace) -> str:
    """The spec's text, after refusing a --direction the spec does not train (one line)."""
    from pathlib import Path

    from elmoc.directions import check_run

    check_run(_load_spec(args.spec), args.direction, args.spec)
    return Path(args.spec).read_text(encoding="utf-8")


def checkpoint_step(out_dir) -> int | None:
    """The step of ``out_dir``'s checkpoint.pt (metadata only, memory-mapped), or None: an LM's
    (``elmoc train``) or a downstream task run's (``elmoc task``, :mod:`elmoc.tasks.checkpoint`).
    Without one, nothing heavy is imported: ``elmoc with-gpus`` asks after every job it ran."""
    path = out_dir / "checkpoint.pt"  # = elmoc.train.checkpoint.CHECKPOINT (tests/core/test_cli_startup.py)
    if not path.is_file():
        return None
    from elmoc.model_file import FORMAT, load_checkpoint
    from elmoc.tasks.checkpoint import FORMAT as TASK_FORMAT

    try:
        return int(load_checkpoint(path, mmap=True, formats=(FORMAT, TASK_FORMAT))["step"])
    except Exception:  # unreadable or foreign: the resume says why; here it is "no step"
        return None


def _prepare(args: argparse.Namespace, preflight=None) -> tuple:
    """``(spec, settings, lm_data(...))`` of the run, the config checked (the spec's train section,
    its data and vocabulary, and the caller's ``preflight``) before the output folder exists."""
    from elmoc.train.settings import TrainSettings

    spec = _load_spec(args.spec)
    if args.max_steps is not None:
        spec.setdefault("train", {})["max_steps"] = args.max_steps
    settings = TrainSettings.from_config(spec.get("train", {}))
    data = lm_data(spec, args.spec, args.direction, settings)
    if preflight is not None:
        preflight(spec, data[0])
    return spec, settings, data


def _train(args: argparse.Namespace, trainer, prepared: tuple) -> int:
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


def lm_data(spec: dict, spec_path, direction: str, settings):
    """What training on ``spec``'s corpus needs: ``(vocab, vocab_path, make_batches,
    make_heldout or None, steps_per_epoch)`` (the batch factories of
    :func:`elmoc.train.loop.train`); a spec without data or vocabulary is one line naming
    ``spec_path``.  ``elmoc prune`` fine-tunes with the same."""
    from pathlib import Path

    from elmoc.data.batches import ShardBatches, iter_heldout, num_windows
    from elmoc.data.vocab.vocabulary import Vocabulary
    from elmoc.errors import ConfigError, InputFileError

    data = spec.get("data") or {}
    if "train" not in data:
        raise ConfigError(f"{spec_path}: the spec has no data.train (folder of shard_*.txt files)")
    shards = sorted(Path(data["train"]).glob("shard_*.txt"))
    if not shards:
        raise InputFileError(data["train"], "no shard_*.txt files; run `elmoc corpus` first")
    vocab_path = spec.get("vocab")
    if not vocab_path:
        raise ConfigError(f"{spec_path}: the spec names no vocab file")
    vocab = Vocabulary.load(vocab_path)
    eval_batch = settings.eval_batch_size or settings.batch_size
    masking = settings.masking_settings if direction == "masked" else None
    stream_fn = None
    if data.get("tokenizer"):  # subword LMs (ELMo-Sub): segment the word corpus on the fly
        from elmoc.data.vocab.subword import SubwordEncoder

        stream_fn = SubwordEncoder(data["tokenizer"]).stream
    train_stream_fn = stream_fn
    notes = settings.note_settings
    if stream_fn is not None and notes is not None and notes.words:  # TNF: each piece's word, for its note
        from functools import partial

        train_stream_fn = partial(stream_fn, words=dict(Vocabulary.load(notes.words).index))

    def make_batches(position, rank, world_size):
        batches = ShardBatches(shards, vocab, settings.batch_size, settings.bptt, direction,
                               seed=settings.seed, epochs=settings.epochs, rank=rank,
                               world_size=world_size, position=position, stream_fn=train_stream_fn,
                               masking=masking)
        for batch in batches:
            yield batch, batches.state_dict()

    def make_heldout():
        return iter_heldout(data["heldout"], vocab, eval_batch, settings.bptt, direction, stream_fn=stream_fn,
                            masking=masking)

    ratio = 1.0 if stream_fn is None else _pieces_per_token(shards[0], stream_fn)  # ELMo-Sub: pieces, not words
    steps_per_epoch = sum(num_windows((int(n * ratio) - 1) // settings.batch_size, settings.bptt)
                          for n in _shard_tokens(shards))
    return vocab, vocab_path, make_batches, make_heldout if data.get("heldout") else None, steps_per_epoch


def _pieces_per_token(shard, stream_fn, lines: int = 2000) -> float:
    """Subword pieces per word token (``<s>``/``</s>`` included) on the first ``lines`` lines
    of ``shard``: the factor from :func:`_shard_tokens`' word counts to the steps of a
    subword LM, so that its ETA's step total is not short by a third."""
    from itertools import islice

    with open(shard, encoding="utf-8") as f:
        sample = [line for line in islice(f, lines) if line.split()]
    words = sum(len(line.split()) + 2 for line in sample)
    return len(stream_fn(sample)) / words if words else 1.0


def _shard_tokens(shards) -> list[int]:
    """Tokens per shard as the word batcher sees them (words plus ``<s>``/``</s>`` per
    sentence), for the step count behind the ETA.  Taken from the corpus stage's
    ``stats.json`` when it lists these shards, so the corpus is not read an extra time;
    subword LMs scale it by :func:`_pieces_per_token` (a sample), so their ETA is approximate."""
    import json
    from pathlib import Path

    stats_path = Path(shards[0]).parent.parent / "stats.json"
    if stats_path.is_file():
        listed = {e["name"]: e for e in json.loads(stats_path.read_text(encoding="utf-8")).get("shards", [])}
        if all(Path(p).name in listed for p in shards):
            return [listed[Path(p).name]["tokens"] + 2 * listed[Path(p).name]["sentences"] for p in shards]
    counts = []
    for path in shards:
        total = 0
        with open(path, "rb") as f:
            for line in f:
                n = len(line.split())
                if n:
                    total += n + 2
        counts.append(total)
    return counts
