"""The `elmoc` Snakemake logger of profiles/default (src/snakemake_logger_plugin_elmoc): one line
per finished job, errors in full, the scheduler's chatter left out, a dry run's plan as
Snakemake prints it (issue 52)."""
from __future__ import annotations

import logging
import re
from types import SimpleNamespace

import pytest

pytest.importorskip("snakemake_interface_logger_plugins")

from snakemake_interface_logger_plugins.common import LogEvent  # noqa: E402

from snakemake_logger_plugin_elmoc import PASS, LogHandler  # noqa: E402


def handler(dryrun=False):
    settings = SimpleNamespace(printshellcmds=False, nocolor=True, quiet=set(), debug_dag=False, verbose=False,
                               show_failed_logs=True, stdout=dryrun, dryrun=dryrun)
    return LogHandler(settings, None)


def record(msg, level=logging.INFO, **extra):
    rec = logging.LogRecord("snakemake.logging", level, __file__, 1, msg, None, None)
    rec.__dict__.update(extra)
    return rec


def test_one_line_per_finished_job_and_no_chatter():
    h = handler()
    assert h.line(record("Select jobs to execute...")) is None
    assert h.line(record("Execute 2 jobs...")) is None
    assert h.line(record("job info", event=LogEvent.JOB_INFO, jobid=12, rule_name="pretrain",
                         wildcards={"variant": "elmo-c", "direction": "forward"})) is None
    assert h.line(record("echo hi", event=LogEvent.SHELLCMD, shellcmd="echo hi")) is None
    assert h.line(record("Finished jobid: 12 (Rule: pretrain)", event=LogEvent.JOB_FINISHED, job_id=12)) is None
    line = h.line(record(None, event=LogEvent.PROGRESS, done=3, total=65))
    assert re.fullmatch(r"\[\d\d:\d\d:\d\d\] 3/65 done: pretrain \(elmo-c, forward\)", line), line
    assert h.line(record("Job stats: ...", event=LogEvent.RUN_INFO, stats={"pretrain": 15, "total": 65})) \
        == "65 jobs to run"


def test_errors_warnings_and_other_messages_pass(capsys):
    h = handler()
    failed = record("Exiting because a job execution failed. Look above for error messages", level=logging.ERROR)
    assert h.line(failed) is PASS
    assert h.line(record("MissingInputException in rule x", level=logging.WARNING)) is PASS
    assert h.line(record("Nothing to be done (all requested files are present and up to date).")) is PASS
    h.emit(failed)  # through Snakemake's own console
    assert "Exiting because a job execution failed" in capsys.readouterr().err


def test_a_dry_run_prints_its_plan():
    h = handler(dryrun=True)
    assert h.line(record("Execute 2 jobs...")) is PASS
    assert h.line(record("Job stats:\njob count", event=LogEvent.RUN_INFO, stats={"total": 3})) is PASS


def test_snakemake_finds_the_plugin():
    from snakemake_interface_logger_plugins.registry import LoggerPluginRegistry

    assert LoggerPluginRegistry().get_plugin("elmoc").log_handler is LogHandler
