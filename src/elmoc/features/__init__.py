"""Contextual features: the feature bi-LM (bilm.py), out-of-vocabulary vectors (oov.py),
sentences in (sentences.py), features of a sentence list (embed.py), the HDF5 feature file
written and read (store.py), and layer mixing (scalar_mix.py)."""
