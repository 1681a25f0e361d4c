"""The task models beside AllenNLP's (issue 45): one training step (forward, loss, backward,
gradient clipping, optimizer step) of elmoc's SST-5 BCN, SNLI ESIM and NER biLSTM-CRF against
allennlp-models 2.10.1's ``BiattentiveClassificationNetwork``, ``ESIM`` and ``CrfTagger``, on the
same precomputed ELMo features, same batch, same threads.

elmoc's side is the real task model at paper size, built from ``config/paper.yaml``'s task section
by ``task_durations.build_task_model`` and stepped by ``task_durations.training_step`` (the
runner's step: loss + scalar-mix L2, backward, clipping, optimizer step). Its batch is the task's
own collate of ``task_durations``' synthetic instances of the dataset's mean length
(``task_durations.DATASETS``) at the section's batch size, with every tensor then replaced by the
shared inputs below.

AllenNLP's side is each model built with the hyperparameters of its own training configuration in
allennlp-models 2.10.1 (``training_config/classification/biattentive_classification_network_elmo
.jsonnet``, ``training_config/pair_classification/esim_elmo.jsonnet``,
``training_config/tagging/ner_elmo.jsonnet``): layer sizes, dropouts, the BCN's maxout output
layer, ESIM's initializers, the tagger's 2-layer LSTM, BIOUL CRF without start/end transitions
and L2 of 0.1 on the scalar mix, Adam at the configured rate and gradient-norm clipping. The ELMo
LM is out of it on both sides: where AllenNLP's model runs ELMo (the BCN's ``elmo``, the
``elmo_token_embedder`` of ESIM's and the tagger's text field embedder), a minimal stand-in takes
the precomputed layers and mixes them with AllenNLP's own ``ScalarMix`` (no layer norm, dropout
0.0, as the configs set), 1,024-d out: :class:`PrecomputedElmo` for the BCN,
:class:`PrecomputedElmoEmbedder` in the text field embedders. The other token embedders are
AllenNLP's: the BCN's frozen 300-d word embedding (GloVe there, random here, as elmoc's FastText
rows are random), the tagger's trainable 50-d word embedding and 16-d character CNN (128 filters
of width 3). Its step is its trainer's (``GradientDescentTrainer``): gradients set to None,
forward (AllenNLP's models compute their metrics in training too: the tagger's Viterbi decoding
and span F1 included), loss + the regularization penalty, backward, ``clip_grad_norm_``, Adam,
``loss.item()``.

The shared inputs (:func:`shared_inputs`): the elmoc worker reports its batch's shapes (batch,
lengths, layers, feature width, word-table rows, characters, labels); both workers then draw the
same arrays from one NumPy seed: the ELMo layers (3 x 1024, standard normal) of each text field,
the word ids, character ids, labels and (NER) valid BIOUL tag sequences. Each worker prints a
checksum of its features; the driver refuses to compare sides whose features differ.

Each side is one long-lived worker process (``side_by_side``: ``--threads`` torch, OpenMP and MKL
threads; one warm-up step; then the driver's rounds, alternating which side goes first; best of
``--rounds``, CPU and wall seconds). ``--profile N`` adds the top N operators of one step of each
side (``torch.profiler``, by self CPU time). Coreference is not compared (not built here).

``--device cuda`` (or ``cuda:N``) puts both sides' models and batches on that GPU (each step in
wall seconds between two ``torch.cuda.synchronize`` calls; the batch is moved in each step, as
both trainers do). ``--tiny`` shrinks elmoc's model and inputs (tests; the figures mean nothing).

Usage:
    PYTHONPATH=src .venv/bin/python benchmarks/task_models_vs_allennlp.py \
        [--allennlp-python /tmp/allennlp-venv/bin/python] [--tasks sst5 snli ner] [--threads 1]
        [--rounds 5] [--device cpu|cuda] [--profile 12] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Callable, NamedTuple

import side_by_side
import task_durations as td  # stdlib, NumPy and torch at import: importable in AllenNLP's venv too

HERE = Path(__file__).resolve().parent
TASKS = ("sst5", "snli", "ner")
NER_KINDS = 4  # LOC, MISC, ORG, PER: labels O, then B-, I-, L-, U- of each kind (elmoc's NerTask order)
MODELS = {"sst5": "BiattentiveClassificationNetwork", "snli": "ESIM", "ner": "CrfTagger"}


# -- the inputs both sides get ----------------------------------------------------------------
def shared_inputs(shapes: dict, seed: int) -> dict:
    """NumPy arrays of one batch from ``shapes`` (what the elmoc worker reports): per text field
    ``features/<field>`` (layers, batch, length, dim) float32 and, where the model reads them,
    ``words/<field>`` (batch, length) ids in [2, words), ``chars/<field>`` (batch, length, width)
    in [2, chars); ``label`` (batch,) in [0, classes) or NER's ``tags`` (batch, length) of valid
    BIOUL sequences (an entity of one or two tokens every 4 tokens, as task_durations' instances)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    batch, layers, dim = shapes["batch"], shapes["layers"], shapes["dim"]
    out = {}
    for field, length in shapes["lengths"].items():
        out[f"features/{field}"] = rng.standard_normal((layers, batch, length, dim), dtype=np.float32)
        if shapes.get("words"):
            out[f"words/{field}"] = rng.integers(2, shapes["words"], (batch, length))
        if shapes.get("chars"):
            out[f"chars/{field}"] = rng.integers(2, shapes["chars"], (batch, length, shapes["char_width"]))
    if shapes.get("classes"):
        out["label"] = rng.integers(0, shapes["classes"], batch)
    if shapes.get("labels"):
        (length,) = shapes["lengths"].values()
        tags = np.zeros((batch, length), dtype=np.int64)
        for row in tags:
            for i in range(0, length - 1, 4):
                kind = 1 + 4 * int(rng.integers(NER_KINDS))  # index of B-<kind>; I, L, U follow
                row[i : i + 2] = (kind, kind + 2) if rng.random() < 0.5 else (kind + 3, 0)
        out["tags"] = tags
    return out


def checksum(arrays: dict) -> float:
    """The sum of every feature array, rounded: equal on both sides when they drew the same features."""
    return round(float(sum(a.astype("float64").sum() for k, a in arrays.items() if k.startswith("features/"))), 3)


# -- elmoc's side -----------------------------------------------------------------------------
class ElmocSide(NamedTuple):
    step: Callable[[], None]
    model: object
    batch: dict
    shapes: dict
    what: str
    checksum: float


def elmoc_side(args, workdir: Path) -> ElmocSide:
    """elmoc's task model ``args.task`` built and stepped as task_durations builds and steps it:
    its own collated batch, every tensor of it then replaced by the shared inputs."""
    import torch

    name = args.task
    s = td.build_task_model(name, td.task_sections()[name], args.tiny, workdir, seed=args.seed, device=args.device)
    s.model.train()
    batch = s.task.collate(s.train_pool, s.inputs)
    texts = {k: v for k, v in batch.items() if hasattr(v, "features")}
    embedder = s.model.embedder
    shapes = {"batch": s.batch, "lengths": {k: int(v.mask.shape[1]) for k, v in texts.items()},
              "layers": s.inputs.store.num_layers, "dim": s.inputs.feature_dim,
              "words": embedder.words.num_embeddings if embedder.words is not None else 0}
    if name == "ner":
        shapes.update(chars=s.model.chars.embedding.num_embeddings, char_width=int(batch["chars"].shape[2]),
                      labels=list(s.model.labels))
    else:
        shapes["classes"] = s.task.num_classes if name == "sst5" else 3
    arrays = shared_inputs(shapes, args.seed)
    for field, text in texts.items():
        text.features = torch.from_numpy(arrays[f"features/{field}"])
        if text.word_ids is not None:
            text.word_ids = torch.from_numpy(arrays[f"words/{field}"])
    if name == "ner":
        batch["chars"], batch["tag_ids"] = torch.from_numpy(arrays["chars/text"]), torch.from_numpy(arrays["tags"])
    else:
        batch["label"] = torch.from_numpy(arrays["label"])
    update = td.training_step(s)
    params = sum(p.numel() for p in s.params)
    adam = "fused Adam" if s.trainer.fused_optimizer else "Adam"  # config/paper.yaml's trainer.fused_optimizer
    what = f"elmoc {type(s.model).__name__} ({params:,} trainable parameters, {adam})"
    return ElmocSide(lambda: update(batch), s.model, batch, shapes, what, checksum(arrays))


# -- AllenNLP's side --------------------------------------------------------------------------
def _allennlp_modules():
    """AllenNLP imported (torchvision's placeholder first) and the two ELMo stand-ins defined."""
    sys.path.insert(0, str(HERE))
    from allennlp_elmo import _import_torchvision_or_placeholder

    _import_torchvision_or_placeholder()
    import torch
    from allennlp.modules.scalar_mix import ScalarMix
    from allennlp.modules.token_embedders import TokenEmbedder

    class PrecomputedElmo(torch.nn.Module):
        """What the BCN calls as ``Elmo`` (one output representation): the precomputed layers
        (layers, batch, length, dim) mixed by AllenNLP's ``ScalarMix``, no layer norm, dropout 0.0."""

        def __init__(self, layers: int, dim: int):
            super().__init__()
            self._scalar_mixes = torch.nn.ModuleList([ScalarMix(layers, do_layer_norm=False)])
            self._dim = dim

        def get_output_dim(self) -> int:
            return self._dim

        def forward(self, features):
            return {"elmo_representations": [self._scalar_mixes[0](list(features.unbind(0)))], "mask": None}

    class PrecomputedElmoEmbedder(TokenEmbedder):
        """The ``elmo_token_embedder`` of a text field embedder, on precomputed layers: AllenNLP's
        ``ScalarMix`` (no layer norm, dropout 0.0), 1,024-d out."""

        def __init__(self, layers: int, dim: int):
            super().__init__()
            self._mix = ScalarMix(layers, do_layer_norm=False)
            self._dim = dim

        def get_output_dim(self) -> int:
            return self._dim

        def forward(self, features, mask=None):
            return self._mix(list(features.unbind(0)), mask)

    return PrecomputedElmo, PrecomputedElmoEmbedder


def allennlp_side(args, shapes: dict):
    """(step, description, checksum) of AllenNLP's model for ``args.task`` as its training
    config builds it (module docstring), on the shared inputs of ``shapes``."""
    import torch

    PrecomputedElmo, PrecomputedElmoEmbedder = _allennlp_modules()
    import allennlp
    from allennlp.data import Vocabulary
    from allennlp.modules import FeedForward
    from allennlp.modules.seq2seq_encoders import LstmSeq2SeqEncoder
    from allennlp.modules.text_field_embedders import BasicTextFieldEmbedder
    from allennlp.modules.token_embedders import Embedding
    from allennlp.nn import Activation, util

    arrays = {k: torch.from_numpy(v) for k, v in shared_inputs(shapes, args.seed).items()}
    layers, dim = shapes["layers"], shapes["dim"]
    vocab = Vocabulary()
    relu, linear = Activation.by_name("relu")(), Activation.by_name("linear")()
    if args.task == "sst5":  # biattentive_classification_network_elmo.jsonnet
        from allennlp.modules import Maxout
        from allennlp_models.classification.models.biattentive_classification_network import (
            BiattentiveClassificationNetwork)

        vocab.add_tokens_to_namespace([str(i) for i in range(shapes["classes"])], "labels")
        words = Embedding(embedding_dim=300, num_embeddings=shapes["words"], trainable=False)
        model = BiattentiveClassificationNetwork(
            vocab, BasicTextFieldEmbedder({"tokens": words}), embedding_dropout=0.5,
            pre_encode_feedforward=FeedForward(300 + dim, 1, [300], [relu], [0.25]),
            encoder=LstmSeq2SeqEncoder(300, 300, 1, bidirectional=True),
            integrator=LstmSeq2SeqEncoder(1800, 300, 1, bidirectional=True), integrator_dropout=0.1,
            output_layer=Maxout(2400, 3, [1200, 600, shapes["classes"]], 4, [0.2, 0.3, 0.0]),
            elmo=PrecomputedElmo(layers, dim), use_input_elmo=True, use_integrator_output_elmo=False)
        inputs = {"tokens": {"tokens": {"tokens": arrays["words/text"]}, "elmo": {"elmo_tokens": arrays["features/text"]}},
                  "label": arrays["label"]}
        lr, grad_norm = 1e-3, 5.0
    elif args.task == "snli":  # esim_elmo.jsonnet
        from allennlp.modules.matrix_attention import DotProductMatrixAttention
        from allennlp.nn import Initializer, InitializerApplicator
        from allennlp_models.pair_classification.models.esim import ESIM

        vocab.add_tokens_to_namespace([str(i) for i in range(shapes["classes"])], "labels")
        init = {name: Initializer.by_name(name)() for name in ("xavier_uniform", "zero", "orthogonal", "lstm_hidden_bias")}
        model = ESIM(
            vocab, BasicTextFieldEmbedder({"elmo": PrecomputedElmoEmbedder(layers, dim)}),
            encoder=LstmSeq2SeqEncoder(dim, 300, 1, bidirectional=True), matrix_attention=DotProductMatrixAttention(),
            projection_feedforward=FeedForward(2400, 1, 300, relu),
            inference_encoder=LstmSeq2SeqEncoder(300, 300, 1, bidirectional=True),
            output_feedforward=FeedForward(2400, 1, 300, relu, 0.5), output_logit=FeedForward(300, 1, 3, linear),
            dropout=0.5, initializer=InitializerApplicator([
                (".*linear_layers.*weight", init["xavier_uniform"]), (".*linear_layers.*bias", init["zero"]),
                (".*weight_ih.*", init["xavier_uniform"]), (".*weight_hh.*", init["orthogonal"]),
                (".*bias_ih.*", init["zero"]), (".*bias_hh.*", init["lstm_hidden_bias"])]))
        field = {f: {"elmo": {"features": arrays[f"features/{f}"],
                              "mask": torch.ones(arrays[f"features/{f}"].shape[1:3], dtype=torch.bool)}}
                 for f in ("premise", "hypothesis")}
        inputs = {**field, "label": arrays["label"]}
        lr, grad_norm = 4e-4, 10.0
    else:  # ner_elmo.jsonnet
        from allennlp.modules.seq2vec_encoders import CnnEncoder
        from allennlp.modules.token_embedders import TokenCharactersEncoder
        from allennlp.nn import RegularizerApplicator
        from allennlp.nn.regularizers import L2Regularizer
        from allennlp_models.tagging.models.crf_tagger import CrfTagger

        vocab.add_tokens_to_namespace(shapes["labels"], "labels")
        embedder = BasicTextFieldEmbedder({
            "tokens": Embedding(embedding_dim=50, num_embeddings=shapes["words"], trainable=True),
            "elmo": PrecomputedElmoEmbedder(layers, dim),
            "token_characters": TokenCharactersEncoder(
                Embedding(embedding_dim=16, num_embeddings=shapes["chars"]),
                CnnEncoder(16, 128, (3,), relu))})
        model = CrfTagger(vocab, embedder, LstmSeq2SeqEncoder(50 + dim + 128, 200, 2, dropout=0.5, bidirectional=True),
                          label_encoding="BIOUL", dropout=0.5, include_start_end_transitions=False,
                          regularizer=RegularizerApplicator([("scalar_parameters", L2Regularizer(0.1))]))
        inputs = {"tokens": {"tokens": {"tokens": arrays["words/text"]}, "elmo": {"features": arrays["features/text"]},
                             "token_characters": {"token_characters": arrays["chars/text"]}},
                  "tags": arrays["tags"]}
        lr, grad_norm = 1e-3, 5.0
    device = torch.device(args.device)
    model.to(device).train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=lr)

    def step():  # GradientDescentTrainer's batch: move, forward, + penalty, backward, rescale, step
        for p in params:
            p.grad = None
        loss = model(**util.move_to_device(inputs, device))["loss"]
        penalty = model.get_regularization_penalty()
        if penalty is not None:
            loss = loss + penalty
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in params if p.grad is not None], grad_norm)
        optimizer.step()
        loss.item()

    what = (f"AllenNLP {allennlp.__version__} {type(model).__name__} "
            f"({sum(p.numel() for p in params):,} trainable parameters)")
    return step, what, checksum({k: v.numpy() for k, v in arrays.items()})


# -- the worker and the driver ----------------------------------------------------------------
def top_operators(step, count: int) -> list:
    """[name, self CPU seconds, calls] of the ``count`` costliest operators of one ``step()``."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    rows = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)[:count]
    return [[e.key, e.self_cpu_time_total / 1e6, e.count] for e in rows]


def worker(args) -> int:
    device, sync, ready = side_by_side.worker_device(args, "")
    with tempfile.TemporaryDirectory(prefix="task-vs-allennlp-") as tmp:
        if args.worker == "elmoc":
            step, _, _, shapes, ready["ready"], ready["checksum"] = elmoc_side(args, Path(tmp))
        else:
            shapes = json.loads(args.shapes)
            step, ready["ready"], ready["checksum"] = allennlp_side(args, shapes)
        ready["shapes"] = shapes
        if args.profile:
            step()  # warm
            sync()
            ready["profile"] = top_operators(step, args.profile)
        return side_by_side.serve(step, sync, ready)


def _start(python: str, side: str, args, task: str, shapes: dict | None = None):
    argv = ["--task", task, "--threads", str(args.threads), "--seed", str(args.seed), "--device", args.device,
            "--profile", str(args.profile)] + (["--tiny"] if args.tiny else []) + (
            ["--shapes", json.dumps(shapes)] if shapes is not None else [])
    return side_by_side.start(__file__, python, side, argv, args.threads,
                              HERE.parent / "src" if side == "elmoc" else None)


def compare(task: str, args) -> dict:
    """Both sides of ``task``, alternating rounds: the elmoc worker starts first and its batch's
    shapes are handed to AllenNLP's."""
    started: dict = {}

    def elmoc():
        started["elmoc"] = _start(sys.executable, "elmoc", args, task)
        return started["elmoc"]

    starters = {"elmoc": elmoc}
    if args.allennlp_python:
        starters["allennlp"] = lambda: _start(args.allennlp_python, "allennlp", args, task,
                                              started["elmoc"][1]["shapes"])
    sides = side_by_side.rounds(starters, args.rounds)
    if "allennlp" in sides and sides["allennlp"]["checksum"] != sides["elmoc"]["checksum"]:
        raise SystemExit(f"task_models_vs_allennlp: error: {task}: the two sides drew different features "
                         f"(checksums {sides['elmoc']['checksum']} and {sides['allennlp']['checksum']}); "
                         "check both venvs' NumPy")
    return {"sides": sides, "allennlp_over_elmoc": side_by_side.ratio(sides)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--allennlp-python", help="python of the AllenNLP 2.10.1 venv with allennlp-models "
                   "(benchmarks/allennlp-venv.txt, benchmarks/allennlp-models-venv.txt); without it only elmoc's side runs")
    p.add_argument("--task", choices=TASKS, help=argparse.SUPPRESS)
    p.add_argument("--shapes", help=argparse.SUPPRESS)
    p.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    side_by_side.add_arguments(p, seed=1)
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="also list the top N operators (self CPU time) of one step of each side")
    p.add_argument("--tiny", action="store_true", help="elmoc's model and inputs shrunk: for the tests")
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)
    side_by_side.refuse_a_missing_gpu(p, args.device)
    result = {"threads": args.threads, "rounds": args.rounds, "device": args.device, "tiny": args.tiny, "tasks": {}}
    print(f"threads {args.threads}, best of {args.rounds} alternating rounds, device {args.device}; one training "
          "step (forward, loss, backward, clipping, optimizer step) on the same precomputed ELMo features")
    print("task | batch x length | elmoc s CPU (wall) | AllenNLP s CPU (wall) | AllenNLP / elmoc CPU (wall)")
    for task in args.tasks:
        r = result["tasks"][task] = compare(task, args)
        elmoc, allen = r["sides"]["elmoc"], r["sides"].get("allennlp")
        shape = f"{elmoc['shapes']['batch']} x " + " + ".join(str(n) for n in elmoc["shapes"]["lengths"].values())
        cell = lambda s: f"{s['best']['cpu_s']:.3f} ({s['best']['wall_s']:.3f})"  # noqa: E731
        ratio = r["allennlp_over_elmoc"]
        print(f"{task} | {shape} | {cell(elmoc)} | {cell(allen) if allen else 'not run'} | "
              + (f"{ratio['cpu_s']:.2f}x ({ratio['wall_s']:.2f}x)" if ratio else "no --allennlp-python"), flush=True)
        for side, s in r["sides"].items():
            print(f"  {side}: {s['ready']}")
            for name, seconds, calls in s.get("profile", []):
                print(f"    {name} | {1e3 * seconds:.1f} ms | {calls} calls")
    return side_by_side.finish(args, result)


if __name__ == "__main__":
    sys.exit(main())
