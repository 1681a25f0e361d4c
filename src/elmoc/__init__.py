"""elmoc: ELMo with continuous outputs.

``from elmoc import Elmo, batch_to_ids`` (AllenNLP's ``allennlp.modules.elmo`` API; and
``embed_sentences``, ``load_bilm``) loads
:mod:`elmoc.pretrained.elmo` (:mod:`elmoc.pretrained.loader`) on first use, so
``import elmoc`` stays light (no torch).
"""
__version__ = "0.1.0"

_LAZY = {"Elmo": "elmoc.pretrained.elmo", "batch_to_ids": "elmoc.pretrained.elmo",
         "embed_sentences": "elmoc.pretrained.elmo",
         "load_bilm": "elmoc.pretrained.loader"}
__all__ = ["__version__", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'elmoc' has no attribute {name!r}")
