"""Published numbers of the paper (Li et al., TACL 2019), to print beside ours.

Table 2/3 downstream scores (SNLI accuracy, Coref average F1, SST-5 accuracy,
NER F1, SRL F1; SST-5 and NER are mean +/- std over 3 runs) and Table 2's
parameter counts.  Keys are our variant names (config/lm/<name>.yaml).
"""
from __future__ import annotations

PAPER_LABELS = {
    "fasttext": "FastText_CC",
    "elmo": "ELMo",
    "elmo-a": "ELMo-A",
    "elmo-sub": "ELMo-Sub",
    "elmo-c": "ELMo-C",
    "elmo-c-oneb": "-ONEB",
    "elmo-c-rnd": "-RND",
    "elmo-c-cnn": "-CNN",
    "elmo-c-cnn-cc": "-CNN-CC",
    "elmo-c-cc-cnn": "-CC-CNN",
}

TASKS = ("snli", "coref", "sst5", "ner", "srl")

# value, std (None where the paper gives one run)
DOWNSTREAM: dict[str, dict[str, tuple[float, float | None] | None]] = {
    "fasttext": {"snli": (87.7, None), "coref": (68.90, None), "sst5": (51.30, 0.77), "ner": (90.97, 0.43), "srl": (80.2, None)},
    "elmo": {"snli": (88.5, None), "coref": (72.9, None), "sst5": (52.96, 2.26), "ner": (92.51, 0.28), "srl": (83.4, None)},
    "elmo-a": {"snli": (88.9, None), "coref": (72.9, None), "sst5": (53.58, 0.77), "ner": (92.28, 0.20), "srl": (82.7, None)},
    "elmo-sub": {"snli": (87.1, None), "coref": (72.4, None), "sst5": (53.02, 2.08), "ner": (92.17, 0.56), "srl": (82.4, None)},
    "elmo-c": {"snli": (88.8, None), "coref": (72.9, None), "sst5": (53.80, 0.73), "ner": (92.24, 0.10), "srl": (82.4, None)},
    "elmo-c-oneb": {"snli": (88.4, None), "coref": (73.0, None), "sst5": (52.70, 0.90), "ner": (92.03, 0.47), "srl": (82.2, None)},
    "elmo-c-rnd": {"snli": (88.4, None), "coref": (72.4, None), "sst5": (53.01, 1.67), "ner": (91.99, 0.35), "srl": (82.9, None)},
    "elmo-c-cnn": {"snli": (88.2, None), "coref": (72.9, None), "sst5": (53.38, 0.68), "ner": (92.24, 0.36), "srl": (82.8, None)},
    "elmo-c-cnn-cc": {"snli": (88.0, None), "coref": (72.8, None), "sst5": (54.33, 1.26), "ner": (92.04, 0.33), "srl": (83.4, None)},
    "elmo-c-cc-cnn": {"snli": (88.4, None), "coref": (72.6, None), "sst5": (54.16, 0.96), "ner": (91.93, 0.53), "srl": (83.3, None)},
}

# Table 2: trainable parameters (millions) and training time.
PARAMETERS_M = {"elmo": 499, "elmo-a": 196, "elmo-sub": 92, "elmo-c": 76}
TRAIN_TIME = {"elmo": "14 days x 3 GPUs", "elmo-a": "5.7 days x 4", "elmo-sub": "3.9 days x 4", "elmo-c": "2.5 days x 4"}
