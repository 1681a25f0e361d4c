"""``float16``: every float tensor stored in float16, widened to float32 on load."""
from __future__ import annotations

from pathlib import Path

from elmoc.pretrained.formats import CompressionFormat, State, narrow
from elmoc.registry import register


@register("compression", "float16")
class Float16Format(CompressionFormat):
    compute = "weights stored in float16, widened to float32 on load: computed in float32"
    table_group = "cast"
    TABLE_COPY = True

    def store(self, source: Path, states: dict[str, State]) -> dict[str, State]:
        return {d: narrow(s, self.name) for d, s in states.items()}

    def store_composer(self, state: State) -> State:
        return narrow(state, self.name)
