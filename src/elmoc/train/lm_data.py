"""What training an LM on its spec's corpus needs: the vocabulary, the batch factories of
:func:`elmoc.train.loop.train` and the steps per epoch (``elmoc train``, ``prune``, ``distill``,
``lm-finetune``)."""
from __future__ import annotations


def lm_data(spec: dict, spec_path, direction: str, settings):
    """What training on ``spec``'s corpus needs: ``(vocab, vocab_path, make_batches,
    make_heldout or None, steps_per_epoch)`` (the batch factories of
    :func:`elmoc.train.loop.train`); a spec without data or vocabulary is one line naming
    ``spec_path``.  ``elmoc train``, ``elmoc prune`` and ``elmoc lm-finetune`` train with it."""
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
