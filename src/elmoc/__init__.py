"""elmoc: ELMo with continuous outputs."""
__version__ = "0.1.0"
