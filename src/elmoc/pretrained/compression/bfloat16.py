"""``bfloat16``: every float tensor stored in bfloat16, widened to float32 on load."""
from __future__ import annotations

from elmoc.pretrained.compression.float16 import Float16Format
from elmoc.registry import register


@register("compression", "bfloat16")
class Bfloat16Format(Float16Format):
    compute = "weights stored in bfloat16, widened to float32 on load: computed in float32"
    table_group = "cast"
    TABLE_COPY = False
