"""Compressed storage formats registered with :mod:`elmoc.registry` (kind "compression";
``elmoc compress --format``).

Importing this package imports every module in it, so a new file's ``@register``
decorator cannot be forgotten.  The contract is :class:`elmoc.pretrained.formats.CompressionFormat`.
"""
import importlib as _importlib
import pkgutil as _pkgutil

for _module in _pkgutil.iter_modules(__path__):
    _importlib.import_module(f"{__name__}.{_module.name}")
