"""Progress lines of long loops in the job log (training epochs, dev and test evaluations).

A paper-size evaluation runs for a long time without a line of its own (coref's full
development set, SRL's dev decoding over ~35K predicates); :class:`Progress` logs
``<what>: <done>/<total> batches (<pct>%), <rate> batches/s, ETA <time>`` every
``every_s`` seconds of it, through ``logging`` (so it lands in the job's log and in the
run folder's ``task.log``), and one closing line with its duration when it logged any.
"""
from __future__ import annotations

import logging
from time import monotonic

log = logging.getLogger("elmoc.tasks.runner")  # the runner's lines


def duration(seconds: float) -> str:
    """``seconds`` in words a log reader takes in at once: ``42 s``, ``3.5 min``, ``2.1 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


class Progress:
    """Counts a loop's batches and logs where it is every ``every_s`` seconds.

    Args:
        what: what the loop is, for the log (``"srl dev evaluation"``).
        total: the loop's batch count.
        every_s: seconds between two lines (None or 0: no lines).
        done: batches done before this process (a resumed epoch), not counted in the rate.
    """

    def __init__(self, what: str, total: int, every_s: float | None, done: int = 0):
        self.what, self.total, self.every_s = what, total, every_s
        self.done = self.start_done = done
        self.t0 = self.last = monotonic()
        self.lines = 0

    def update(self, n: int = 1) -> None:
        """``n`` more batches done; logs a line when ``every_s`` passed since the last one."""
        self.done += n
        now = monotonic()
        if self.every_s and now - self.last >= self.every_s:
            self.last = now
            self.lines += 1
            rate = (self.done - self.start_done) / max(now - self.t0, 1e-9)
            eta = (self.total - self.done) / rate if rate > 0 else float("inf")
            log.info("%s: %d/%d batches (%.0f%%), %.2f batches/s, ETA %s", self.what, self.done, self.total,
                     100.0 * self.done / max(self.total, 1), rate, duration(eta) if eta != float("inf") else "?")

    def close(self) -> None:
        """A closing line with the loop's duration, when it logged any progress line."""
        if self.lines:
            log.info("%s: %d batches in %s", self.what, self.done - self.start_done, duration(monotonic() - self.t0))
