"""The newcomer trials of issue 46: each method a plug-in file in ``tests/methods/plugins``,
registered through ``ELMOC_PLUGINS`` for one test and taken out of the registry after it."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from elmoc import registry

PLUGINS = Path(__file__).parent / "plugins"
NEWCOMERS = {"linear_probe": ("recipe", "linear_probe"), "low_rank": ("compression", "low_rank"),
             "random_prune": ("prune_method", "random")}


@pytest.fixture
def newcomer(monkeypatch):
    """``newcomer("low_rank")``: the plug-in file registered for this test (the environment too,
    so a child ``elmoc`` process sees it); the registry is as before after it."""
    used = []

    def register(name: str) -> Path:
        path = PLUGINS / f"{name}.py"
        used.append(name)
        monkeypatch.setenv(registry.PLUGINS, os.pathsep.join(str(PLUGINS / f"{n}.py") for n in used))
        registry.list_available(NEWCOMERS[name][0])  # imports it
        return path

    yield register
    for name in used:
        kind, registered = NEWCOMERS[name]
        registry._REGISTRY.get(kind, {}).pop(registered, None)
        registry._PLUGINS_IMPORTED.discard(str(PLUGINS / f"{name}.py"))
