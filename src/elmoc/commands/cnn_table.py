"""``elmoc cnn-table``: run a trained ELMo char-CNN over the vocabulary (ELMo-C-CNN ablations)."""
from __future__ import annotations

from elmoc.commands._options import FILE, add_output

NAME = "cnn-table"
GROUP = "internals"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = (
    'elmoc cnn-table --checkpoint results/demo/lm/elmo/forward/model.pt --vocab results/demo/vocab/vocab.txt '
    '--output results/demo/vectors/cnn.npy'
)
HELP = "write the trained char-CNN's vector of every vocabulary word as a frozen .npy table"
DESCRIPTION = (
    "Loads the char-CNN input layer (CNN + highway + projection) of a trained LM (model.pt) whose "
    "input type is 'char_cnn' (the ELMo variant: the forward direction's file, or the joint bi-LM's, "
    "whose one char-CNN both directions share), runs it once over every vocabulary word in chunks "
    "(2000 words, as the paper's code) and writes a float32 [vocab, dim] table aligned with --vocab "
    "(spec 1.3: ELMo-C-CNN, -CNN-CC, -CC-CNN). Written atomically."
)


INPUTS = ('checkpoint', 'vocab')  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output',)


def implicit_inputs(args) -> dict:
    """The run of --checkpoint, its vocabulary and its spec's files."""
    from elmoc.commands._paths import lm_file_inputs

    return lm_file_inputs(args.checkpoint, "--checkpoint")


def add_arguments(parser) -> None:
    parser.add_argument("--checkpoint", required=True,
                        help="trained ELMo LM: the forward direction's model.pt, or a joint bi-LM's "
                        "(results/demo/lm/elmo/joint/model.pt), whose char-CNN both directions share")
    parser.add_argument("--vocab", required=True, help="vocabulary the table is aligned with (results/demo/vocab/vocab.txt)")
    add_output(parser, FILE, "output .npy (results/demo/vectors/cnn.npy)", old=("--out",))
    parser.add_argument("--chunk", type=int, default=2000, help="words per forward pass (default 2000)")


def char_cnn_table(checkpoint_path, vocab, chunk: int = 2000):
    """``(V, dim)`` float32 numpy table of the checkpoint's char-CNN over ``vocab``."""
    import numpy as np
    import torch

    from elmoc.errors import ConfigError, InputFileError
    from elmoc.registry import build
    from elmoc.model_file import load_checkpoint

    payload = load_checkpoint(checkpoint_path)  # input_layer.* is the same in a joint bi-LM's file
    spec = payload.get("spec") or {}
    input_cfg = spec.get("input") or {}
    if input_cfg.get("type") != "char_cnn":
        raise InputFileError(
            checkpoint_path, f"input layer is {input_cfg.get('type')!r}, not 'char_cnn'; use the ELMo variant's model.pt"
        )
    cfg = {k: v for k, v in input_cfg.items() if k != "weights"}
    layer = build("input", cfg, vocab=vocab)
    prefix = "input_layer."
    state = {k[len(prefix):]: v for k, v in payload["model"].items() if k.startswith(prefix)}
    missing, unexpected = layer.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise InputFileError(checkpoint_path, f"char-CNN weights do not match the spec: missing {missing}, unexpected {unexpected}")
    if chunk < 1:
        raise ConfigError(f"--chunk must be >= 1, got {chunk}")
    layer.eval()
    rows = []
    with torch.no_grad():
        for start in range(0, len(vocab), chunk):
            ids = torch.arange(start, min(start + chunk, len(vocab)))[None, :]  # (1, chunk)
            rows.append(layer(ids)[0].numpy())
    return np.concatenate(rows, axis=0).astype(np.float32)


def run(args) -> int:
    import logging

    import numpy as np

    from elmoc.data.vocab.vocabulary import Vocabulary
    from elmoc.io.atomic import atomic_file

    vocab = Vocabulary.load(args.vocab)
    table = char_cnn_table(args.checkpoint, vocab, args.chunk)
    with atomic_file(args.output, "wb", encoding=None) as f:
        np.save(f, table)
    logging.getLogger("elmoc.cnn_table").info("wrote %s table to %s", table.shape, args.output)
    return 0
