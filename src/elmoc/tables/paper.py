"""Every published number of the paper (Li et al., TACL 2019) that elmoc prints beside ours.

One module for all of them: Table 2 (time, batch, parameters, downstream scores),
Table 3 (the ELMo-C ablations) and the speed Tables 4 and 5.  Keys of the
downstream tables are our variant names (config/lm/<name>.yaml); keys of the
speed tables are the bench's row labels (elmoc.bench.scenarios).
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
    "elmo-c-rnd-input": "-RND-INPUT",
}

TASKS = ("snli", "coref", "sst5", "ner", "srl")
TASK_LABELS = {"snli": "SNLI", "coref": "Coref", "sst5": "SST-5", "ner": "NER", "srl": "SRL (span F1)",
               # scores reported beside a task's headline one (elmoc.tasks.base: extra_metrics)
               "srl:conll05-f1": "SRL (CoNLL-05 script)"}
# Scores our runs report beside a task's headline one; Tables 2/3 always have their column.
EXTRA_SCORES = {"srl": ("conll05-f1",)}

# Row order of the two downstream tables.
TABLE2_ROWS = ("fasttext", "elmo", "elmo-a", "elmo-sub", "elmo-c")
TABLE3_ROWS = ("elmo-c", "elmo-c-oneb", "elmo-c-rnd", "elmo-c-cnn", "elmo-c-cnn-cc", "elmo-c-cc-cnn")
# Table 3's rows of opt-in variants (pretrain.extra_variants), after the others and only when the
# variant has results: section 5.1's random input embedding, not in the paper's Table 3.
TABLE3_OPT_IN_ROWS = ("elmo-c-rnd-input",)

# Tables 2/3: value, std (None where the paper gives one run).  SNLI accuracy, Coref
# average F1, SST-5 accuracy, NER F1, SRL span F1 (AllenNLP's; the paper printed no
# official CoNLL-2005 score, footnote 6); SST-5 and NER are mean +/- std of 3 runs.
DOWNSTREAM: dict[str, dict[str, tuple[float, float | None]]] = {
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
    # section 5.1, in the text: "a random input embedding ... unstable", SNLI only
    "elmo-c-rnd-input": {"snli": (85.8, None)},
}

# Table 2's training columns: wall time in days, GPUs, batch per GPU, trainable parameters.
TABLE2_TRAINING = {
    "elmo": {"days": 14.0, "gpus": 3, "batch_per_gpu": 128, "params": 499e6},
    "elmo-a": {"days": 5.7, "gpus": 4, "batch_per_gpu": 256, "params": 196e6},
    "elmo-sub": {"days": 3.9, "gpus": 4, "batch_per_gpu": 320, "params": 92e6},
    "elmo-c": {"days": 2.5, "gpus": 4, "batch_per_gpu": 768, "params": 76e6},
}

# Section 4.1: heldout perplexities on the 1B Word Benchmark's held-out data (ELMo-A "35.8,
# lower than ELMo's 39.7"); the other models' are not given (ELMo-C's loss is no perplexity).
HELDOUT_PERPLEXITY = {"elmo-a": 35.8, "elmo": 39.7}

# The paper's scale, for the captions.
PAPER_SCALE = {
    "corpus": "1B Word Benchmark (0.8B training tokens), 793K-word vocabulary",
    "model": "2-layer LSTM, cell 4096, projection 512; 300-d FastText-CC vectors",
    "hardware": "GPUs (Table 2's time column)",
    "seeds": "SST-5 and NER: 3 runs; others: 1",
}

# Table 4: label -> (params, max batch per card, S1, S2, S3); CONT in seconds, others ratios to CONT.
TABLE4 = {
    "CONT": ("76M", 640, 0.47, 115.28, 34.58),
    "FIXED": ("76M", 512, 1.17, 1.24, 1.24),
    "SUBWORD": ("92M", 320, 1.09, 1.53, 1.55),
    "ADAPTIVE 40K": ("97M", 384, 1.08, 1.30, 1.34),
    "ADAPTIVE 800K": ("196M", 256, 1.16, 1.47, 1.89),
    "ADAPTIVE 2000K": ("213M", 192, 1.25, 1.82, 2.49),
    "SAMPLED 40K": ("96M", 512, 1.07, 1.18, 1.30),
    "SAMPLED 800K": ("483M", 256, 1.15, 1.35, 1.91),
    "SAMPLED 2000K": ("1102M", 64, 1.16, 2.35, 16.09),
}

# Table 5: output layer -> encoder -> CONT seconds per 1M words, or ratio to CONT (None = OOM).
TABLE5 = {
    "CONT": {"LSTM": 3.97, "LSTMX2": 10.42, "TRANS BASE": 15.87, "ELMO": 34.58, "TRANS LARGE": 48.55, "GPT": 43.53},
    "FIXED": {"LSTM": 1.93, "LSTMX2": 1.32, "TRANS BASE": 1.52, "ELMO": 1.24, "TRANS LARGE": 1.37, "GPT": 1.14},
    "SUBWORD": {"LSTM": 2.32, "LSTMX2": 1.49, "TRANS BASE": 1.78, "ELMO": 1.55, "TRANS LARGE": 1.72, "GPT": 1.44},
    "ADAPTIVE": {"LSTM": 4.58, "LSTMX2": 2.20, "TRANS BASE": 2.62, "ELMO": 1.89, "TRANS LARGE": 3.28, "GPT": 2.33},
    "SAMPLED": {"LSTM": 2.50, "LSTMX2": 1.60, "TRANS BASE": 2.91, "ELMO": 1.91, "TRANS LARGE": None, "GPT": 8.31},
}
TABLE5_ENCODERS = ("LSTM", "LSTMX2", "TRANS BASE", "ELMO", "TRANS LARGE", "GPT")
