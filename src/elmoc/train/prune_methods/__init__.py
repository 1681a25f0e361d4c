"""Prune methods registered with :mod:`elmoc.registry` (kind "prune_method"; ``prune.method``).

Importing this package imports every module in it, so a new file's ``@register``
decorator cannot be forgotten.  The contract is in :mod:`elmoc.train.prune_methods.base`.
"""
import importlib as _importlib
import pkgutil as _pkgutil

for _module in _pkgutil.iter_modules(__path__):
    _importlib.import_module(f"{__name__}.{_module.name}")
