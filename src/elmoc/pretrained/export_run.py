"""``elmoc export``'s run: a trained variant (or the released bilm-tf ELMo) as a model directory,
bilm-tf files or ``model.pt`` files, its options checked first."""
from __future__ import annotations

from typing import Any


def run_export(args: Any, command: str) -> int:
    """``elmoc export`` with its parsed options (``args``: variant, results, forward, backward,
    bilm_tf_options, bilm_tf_weights, format, spec, vocab, direction, to, fasttext_model,
    char_cnn_model, boundaries, no_boundaries, output_dir): the options checked against each other
    (one line each), then the model directory (or bilm-tf files, or model.pt files) written;
    ``command``: the command line, for the model card."""
    from elmoc.errors import ConfigError
    from elmoc.features.boundaries import boundaries_flags
    from elmoc.io.output_paths import check_output_directory
    from elmoc.pretrained import bilm_tf, writer

    if bool(args.bilm_tf_options) != bool(args.bilm_tf_weights):
        raise ConfigError("give both --bilm-tf-options and --bilm-tf-weights")
    if args.bilm_tf_options and args.to == "bilm-tf":
        raise ConfigError("--to bilm-tf exports a trained variant; --bilm-tf-options/--bilm-tf-weights already are "
                          "bilm-tf's files")
    if args.bilm_tf_options:
        _from_bilm_tf(args)
        return 0
    if args.format != "directory":
        raise ConfigError("--format checkpoints applies to --bilm-tf-options/--bilm-tf-weights")
    if args.to == "bilm-tf" and (args.fasttext_model or args.char_cnn_model or args.boundaries or args.no_boundaries):
        raise ConfigError("--to bilm-tf writes the char-CNN and LSTM weights alone (AllenNLP always reads <S> ... "
                          "</S>): drop --fasttext-model, --char-cnn-model and --boundaries")
    check_output_directory(args.output_dir, "export", {"--forward": args.forward, "--backward": args.backward,
                                               "--fasttext-model": args.fasttext_model,
                                               "--char-cnn-model": args.char_cnn_model})
    if args.variant:
        if args.forward or args.backward:
            raise ConfigError("give --variant or --forward/--backward, not both")
        files = writer.lm_files(args.results, args.variant)
    elif args.forward:
        files = {"forward": args.forward, "backward": args.backward}  # no backward: checked by the loader
    else:
        raise ConfigError("give --variant (or --forward and --backward; --forward alone for a one-direction LM)")
    if args.to == "bilm-tf":
        bilm_tf.export_bilm_tf(files["forward"], files.get("backward"), args.output_dir)
        return 0
    boundaries = boundaries_flags(args.boundaries, args.no_boundaries)
    writer.export_model(files["forward"], files.get("backward"), args.output_dir, fasttext_model=args.fasttext_model,
                        boundaries=boundaries, command=command,
                        char_cnn_model=args.char_cnn_model)
    return 0


def _from_bilm_tf(args: Any) -> None:
    """The released bilm-tf ELMo as a model directory, or (``--format checkpoints``) as model.pt files."""
    from elmoc.directions import DIRECTIONS
    from elmoc.errors import ConfigError
    from elmoc.io.output_paths import check_output_directory
    from elmoc.pretrained import bilm_tf

    if args.format == "checkpoints":
        if not args.spec or not args.vocab:
            raise ConfigError("--format checkpoints needs --spec (the variant's spec.yaml) and --vocab")
        from elmoc.config import load_yaml

        bilm_tf.bilm_tf_checkpoints(args.bilm_tf_options, args.bilm_tf_weights, args.output_dir,
                                    load_yaml(args.spec, mapping="an LM spec"), args.vocab,
                                    [args.direction] if args.direction else DIRECTIONS)
    else:
        check_output_directory(args.output_dir, "export", {"--bilm-tf-options": args.bilm_tf_options,
                                                           "--bilm-tf-weights": args.bilm_tf_weights,
                                                           "--vocab": args.vocab})
        bilm_tf.convert_bilm_tf(args.bilm_tf_options, args.bilm_tf_weights, args.output_dir, vocab=args.vocab)
