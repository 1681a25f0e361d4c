"""``elmoc task``: train and evaluate one downstream task for one variant and seed."""
from __future__ import annotations

from elmoc.commands._options import FILE, add_output

NAME = "task"
GROUP = "evaluate"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = (
    'elmoc task --task sst5 --config config/config.yaml --variant elmo-c --features '
    'results/demo/features/elmo-c/sst5.hdf5 --output results/demo/tasks/sst5/elmo-c/seed1.json'
)
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
    "The run keeps its state in <output without .json>.run/ (results/demo/tasks/<task>/<variant>/seed<N>.run/): "
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
    from elmoc.commands._options import add_device, seconds_or_auto
    from elmoc.tasks.config import add_task_section_arguments

    add_task_section_arguments(parser, config_help="workflow config (uses tasks.<task> and scale) or a single task section YAML")
    parser.add_argument("--variant", required=True, help="name recorded in the metrics JSON (LM variant, or 'fasttext')")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    add_output(parser, FILE, "metrics JSON to write (e.g. results/demo/tasks/sst5/elmo-c/seed1.json)")
    parser.add_argument("--features", help="HDF5 features of the task's sentences (results/demo/features/{variant}/{task}.hdf5)")
    parser.add_argument("--fasttext", help="static word vectors: fastText .bin model or .npy table (with --vocab)")
    parser.add_argument("--lm", metavar="DIR", help="encoder: fine_tune: the bi-LM's model directory "
                        "(`elmoc export`, results/demo/models/{variant}); not with --features")
    parser.add_argument("--vocab", help="vocabulary file the .npy table follows (results/demo/vocab/vocab.txt)")
    parser.add_argument("--scale", choices=["demo", "cpu", "full"], help="label of the run (default: the config's `scale`, else demo)")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    add_device(parser)
    parser.add_argument("--checkpoint-minutes", type=float, default=None, metavar="MINUTES",
                        help="override trainer.checkpoint_minutes (default 30; 0: only at epochs' ends and stops)")
    parser.add_argument("--stop-margin", type=seconds_or_auto, default=None, metavar="SECONDS|auto",
                        help="inside a SLURM job, stop and save this many seconds before its end time (default "
                             "auto: max(300 s, 2 x the longest checkpoint write + a step); the workflow: "
                             "resources.task_run.stop_margin_s)")
    parser.add_argument("--stale-checkpoint", choices=["set-aside", "refuse"], default="set-aside",
                        help="a checkpoint.pt of other settings, features or data files: keep it as "
                             "checkpoint.<hash>.pt and start afresh (default), or refuse it with one line")
    parser.add_argument("--save-model", metavar="DIR", help="also write the trained task model as a directory "
                        "(weights, section, vocabularies, lm/) that `elmoc predict --task-model DIR` reads")
    parser.add_argument("--lm-model", metavar="DIR", help="with --save-model and --features: the model directory "
                        "(`elmoc export`, results/demo/models/<variant>) the features came from; copied into DIR/lm")


def run(args) -> int:
    from elmoc.tasks.task_run import run_task_command

    return run_task_command(args)
