"""Snakemake's console for elmoc's workflow: one line per finished job (issue 52).

A Snakemake logger plugin (``--logger elmoc``, set in profiles/default): instead of Snakemake's
five to fifteen lines per job (rule block, scheduler lines, timestamp, "Finished jobid",
"N of M steps") it writes one line when a job finishes::

    [02:27:28] 20/65 done: pretrain (elmo-c, forward)

Errors, warnings and any other message pass through as Snakemake formats them (a failed job's
block and log included); the scheduler's chatter ("Select jobs to execute...", "Execute 2
jobs...", the banner lines) is left out; a dry run (``-n``) prints its plan as Snakemake does. Long jobs add their own progress lines
(:mod:`elmoc.io.console`). profiles/verbose does not use this plugin: everything Snakemake says.
It lives beside the ``elmoc`` package so that installing elmoc installs it (Snakemake finds
logger plugins by their module name, ``snakemake_logger_plugin_<name>``).
"""
from __future__ import annotations

import logging
import sys
import time
from logging import LogRecord

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent

__all__ = ["LogHandler", "PASS"]

PASS = object()  # LogHandler.line's answer for a record Snakemake's own console writes

# messages of a normal run that say nothing a person watching needs
CHATTER = ("Select jobs to execute...", "Building DAG of jobs...", "Assuming unrestricted shared filesystem usage.",
           "Rules claiming more threads will be scaled down.")
CHATTER_PREFIXES = ("Execute ", "Using shell:", "Provided cores:", "Provided resources:", "Using workflow specific profile")
SILENT_EVENTS = {LogEvent.SHELLCMD, LogEvent.JOB_STARTED, LogEvent.GROUP_INFO, LogEvent.RESOURCES_INFO,
                 LogEvent.DEBUG_DAG, LogEvent.RULEGRAPH, LogEvent.WORKFLOW_STARTED}
ERROR_EVENTS = {LogEvent.ERROR, LogEvent.JOB_ERROR, LogEvent.GROUP_ERROR}


class LogHandler(LogHandlerBase):
    """One line per finished job on stderr; errors and other messages as Snakemake writes them."""

    def __post_init__(self) -> None:
        from snakemake.logging import ColorizingTextHandler, DefaultFilter, DefaultFormatter

        s = self.common_settings
        self.stream = sys.stdout if getattr(s, "stdout", False) else sys.stderr  # stdout in a dry run
        # Snakemake's own console, for what passes through (errors, a dry run's plan)
        self.snakemake_console = ColorizingTextHandler(nocolor=s.nocolor, stream=self.stream)
        self.snakemake_console.addFilter(DefaultFilter(s.quiet, s.debug_dag, s.verbose, s.dryrun, s.printshellcmds))
        self.snakemake_console.setFormatter(DefaultFormatter(s.quiet, s.show_failed_logs))
        self.jobs: dict[int, tuple[str, dict]] = {}  # jobid -> (rule, wildcards), from each job's info
        self.finished: int | None = None  # the job whose "N of M steps" comes next

    @property
    def writes_to_stream(self) -> bool:
        return True

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return True

    @property
    def has_formatter(self) -> bool:
        return True

    @property
    def needs_rulegraph(self) -> bool:
        return False

    def emit(self, record: LogRecord) -> None:
        try:
            text = self.line(record)
            if text is PASS:
                self.snakemake_console.handle(record)
            elif text:
                self.stream.write(text + "\n")
                self.stream.flush()
        except Exception:  # a logging failure must never stop the workflow
            self.handleError(record)

    def line(self, record: LogRecord) -> str | object | None:
        """What the console shows for ``record``: a line, None (nothing) or :data:`PASS` (what
        Snakemake's console shows). A dry run's plan is what was asked for: all of it passes."""
        event = getattr(record, "event", None)
        if self.common_settings.dryrun:
            return PASS
        if event == LogEvent.JOB_INFO:
            self.jobs[record.jobid] = (record.rule_name, dict(getattr(record, "wildcards", None) or {}))
            return None
        if event == LogEvent.JOB_FINISHED:
            self.finished = record.job_id
            return None
        if event == LogEvent.PROGRESS:
            rule, wildcards = self.jobs.get(self.finished, ("job", {}))
            where = f" ({', '.join(str(v) for v in wildcards.values())})" if wildcards else ""
            return f"[{time.strftime('%H:%M:%S')}] {record.done}/{record.total} done: {rule}{where}"
        if event == LogEvent.RUN_INFO:
            stats = getattr(record, "stats", None) or {}
            total = stats.get("total", sum(v for k, v in stats.items() if k != "total") if stats else None)
            return None if total is None else f"{total} jobs to run"
        if event in SILENT_EVENTS:
            return None
        if record.levelno < logging.WARNING and event not in ERROR_EVENTS:
            message = record.getMessage() if record.msg is not None else ""
            if message in CHATTER or message.startswith(CHATTER_PREFIXES):
                return None
        return PASS
