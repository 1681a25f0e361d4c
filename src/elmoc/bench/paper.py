"""The paper's speed figures (Li et al. 2019, Tables 4 and 5; spec 4), for side-by-side reports."""
from __future__ import annotations

# Table 4: label -> (params, max batch per card, S1, S2, S3); CONT absolute seconds, others ratios.
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
