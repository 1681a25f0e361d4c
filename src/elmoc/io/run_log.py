"""A run folder's own log file: every attempt's log lines appended beside its outputs."""
from __future__ import annotations

import logging
import sys

from elmoc.io.atomic import out_of_space


def keep_log(path) -> logging.Handler:
    """Append this process's log records to ``path`` too: the history of every attempt in
    the output folder (Snakemake deletes a job's log file each time it starts the job).
    Returns the handler (``logging.getLogger().removeHandler`` it to stop)."""

    class FileHandler(logging.FileHandler):
        def handleError(self, record):  # noqa: N802 (logging's name)
            # a full disk: this line is lost, and the command's own error names the file and says
            # what survived (no "--- Logging error ---" traceback per line before it)
            if not out_of_space(sys.exc_info()[1] or RuntimeError()):
                super().handleError(record)

    handler = FileHandler(path, mode="a", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s", "%Y-%m-%d %H:%M:%S"))
    logging.getLogger().addHandler(handler)
    return handler
