"""Convert between our per-sentence feature HDF5 and e2e-coref's document cache (spec 5.3, P24).

Two layouts hold the same numbers:

* ``allennlp elmo --all`` (what ``elmoc extract`` writes and
  :class:`~elmoc.features.store.FeatureStore` reads): dataset ``str(i)`` of shape
  ``(layers, tokens, dim)`` per sentence plus a ``sentence_to_index`` JSON.
* e2e-coref's ``cache_elmo.py`` / ``load_lm_embeddings``: one *group* per document,
  named by the doc key with ``/`` replaced by ``:``, holding dataset ``str(i)`` of
  shape ``(tokens, dim, layers)`` for the document's i-th sentence (layers last).

:func:`write_e2e_cache` exports our features for the original e2e-coref code;
:func:`e2e_cache_to_sentences` imports a cache made by e2e-coref (or by the
ELMo-C code's ``cache_name_for_coref``) so our coreference task can read it.
Both check sentence and token counts against the documents and raise
:class:`~elmoc.errors.InputFileError` on any disagreement; outputs are written
atomically.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from elmoc.data.atomic import atomic_path
from elmoc.errors import InputFileError
from elmoc.features.store import INDEX_KEY, FeatureStore, sentence_key


def e2e_group_name(doc_key: str) -> str:
    """e2e-coref's HDF5 group of a document: ``bc/cctv/00/cctv_0001_0`` -> ``bc:cctv:00:cctv_0001_0``."""
    return doc_key.replace("/", ":")


def write_e2e_cache(store: FeatureStore, documents: Sequence[tuple[str, Sequence[Sequence[str]]]],
                    output: str | Path) -> int:
    """Write ``documents`` (``(doc_key, sentences)`` pairs) in e2e-coref's layout.

    Returns the number of sentences written.  A sentence missing from ``store`` or
    with another token count is an InputFileError naming the feature file.
    """
    import h5py

    written = 0
    with atomic_path(output) as tmp:
        with h5py.File(tmp, "w") as h5:
            for doc_key, sentences in documents:
                group = h5.require_group(e2e_group_name(doc_key))
                for i, tokens in enumerate(sentences):
                    layers = store.get(tokens)  # (layers, tokens, dim), checked against the tokens
                    group.create_dataset(str(i), data=np.ascontiguousarray(layers.transpose(1, 2, 0)))
                    written += 1
    return written


def e2e_cache_to_sentences(cache: str | Path, documents: Sequence[tuple[str, Sequence[Sequence[str]]]],
                           output: str | Path) -> int:
    """Convert an e2e-coref cache into the per-sentence layout :class:`FeatureStore` reads.

    ``documents`` are ``(doc_key, sentences)`` pairs of the task data; every one must
    have a group with one ``(tokens, dim, layers)`` dataset per sentence.  Returns
    the number of distinct sentences written.
    """
    import h5py

    cache = Path(cache)
    if not cache.is_file():
        raise InputFileError(cache, "e2e-coref feature cache not found")
    index: dict[str, str] = {}
    with h5py.File(cache, "r") as source, atomic_path(output) as tmp:
        with h5py.File(tmp, "w") as target:
            shape_seen: tuple[int, int] | None = None
            for doc_key, sentences in documents:
                name = e2e_group_name(doc_key)
                if name not in source:
                    raise InputFileError(cache, f"no group {name!r} for document {doc_key!r}; the cache was built from other data")
                group = source[name]
                if len(group) != len(sentences):
                    raise InputFileError(cache, f"group {name!r} has {len(group)} sentences but the document has {len(sentences)}")
                for i, tokens in enumerate(sentences):
                    data = group[str(i)] if str(i) in group else None
                    if data is None or data.ndim != 3:
                        raise InputFileError(cache, f"{name}/{i}: expected a (tokens, dim, layers) dataset")
                    if data.shape[0] != len(tokens):
                        raise InputFileError(
                            cache, f"{name}/{i} has {data.shape[0]} token rows but the sentence has {len(tokens)} tokens"
                        )
                    if shape_seen is not None and data.shape[1:] != shape_seen:
                        raise InputFileError(cache, f"{name}/{i} has (dim, layers) {data.shape[1:]}, others {shape_seen}")
                    shape_seen = data.shape[1:]
                    text = sentence_key(tokens)
                    if text in index:
                        continue  # the same sentence in several documents: features are per sentence
                    key = str(len(index))
                    target.create_dataset(key, data=np.asarray(data[()], dtype=np.float32).transpose(2, 0, 1))
                    index[text] = key
            ds = target.create_dataset(INDEX_KEY, (1,), dtype=h5py.string_dtype())
            ds[0] = json.dumps(index)
    return len(index)
