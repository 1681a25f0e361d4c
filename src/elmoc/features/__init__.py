"""Contextual features: extraction to HDF5, reading them back, and layer mixing."""
