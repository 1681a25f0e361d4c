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
    'when a GPU is visible) trains on the GPU; the code path is the CPU one plus .to(device).'
)


INPUTS = ('config', 'features', 'fasttext', 'vocab')  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output',)

def add_arguments(parser) -> None:
    from elmoc.tasks.config import add_task_section_arguments

    add_task_section_arguments(parser, config_help="workflow config (uses tasks.<task> and scale) or a single task section YAML")
    parser.add_argument("--variant", required=True, help="name recorded in the metrics JSON (LM variant, or 'fasttext')")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--output", required=True, help="metrics JSON to write (e.g. results/tasks/sst5/elmo-c/seed1.json)")
    parser.add_argument("--features", help="HDF5 features of the task's sentences (results/features/{variant}/{task}.hdf5)")
    parser.add_argument("--fasttext", help="static word vectors: fastText .bin model or .npy table (with --vocab)")
    parser.add_argument("--vocab", help="vocabulary file the .npy table follows (results/vocab/vocab.txt)")
    parser.add_argument("--scale", choices=["demo", "cpu", "full"], help="label of the run (default: the config's `scale`, else demo)")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    parser.add_argument("--device", default="cpu",
                        help="cpu, cuda, cuda:N, or auto (cuda when available); default cpu")


def run(args) -> int:
    import logging
    import time

    import torch

    from elmoc.errors import ConfigError
    from elmoc.tasks.config import build_task, task_section_from_args
    from elmoc.tasks.embedder import TaskInputs
    from elmoc.tasks.runner import TrainerConfig, run_task

    log = logging.getLogger(__name__)
    start, cpu_start = time.time(), time.process_time()
    from elmoc.devices import resolve_device

    device = resolve_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    section, scale = task_section_from_args(args)
    scale = args.scale or scale
    task, trainer_options = build_task(section)
    trainer = TrainerConfig.from_dict(trainer_options, task.default_trainer)
    record = {"task": args.task, "variant": args.variant, "seed": args.seed, "metric": task.metric_name,
              "scale": scale, "device": str(device), "threads": torch.get_num_threads()}
    missing = task.missing_data()
    if missing:
        record.update({"dev": None, "test": None, "num_train": 0, "num_test": 0, "seconds": 0.0,
                       "status": f"no data: set tasks.{args.task}.{missing}"})
        log.warning("%s: %s", args.task, record["status"])
    else:
        if not args.features and not args.fasttext:
            raise ConfigError("give --features (LM features) and/or --fasttext (word vectors)")
        data = {split: task.read(split) for split in ("train", "dev", "test")}
        sentences = [s for split in data.values() for s in task.sentences(split)]
        inputs = TaskInputs.create(sentences, vectors=args.fasttext, vocab=args.vocab, features=args.features,
                                   lowercase=task.lowercase_words)
        result = run_task(task, inputs, args.seed, trainer, data, device)
        record.update(result)
        record["seconds"] = round(time.time() - start, 2)
        record["cpu_seconds"] = round(time.process_time() - cpu_start, 2)
        record["status"] = "ok"
        record["inputs"] = {"features": args.features, "fasttext": args.fasttext}
        log.info("%s/%s seed %d: dev %s %.4f, test %.4f (%.0f s)", args.task, args.variant, args.seed,
                 task.metric_name, record["dev"], record["test"], record["seconds"])
    from elmoc.records import write_task_record

    write_task_record(args.output, record)  # checked against the record type the tables read
    return 0
