# Every nested section checked when the workflow is parsed (issue 46.2), through the parsers the
# commands use, so that `snakemake -n` refuses an unknown key or value in one line naming it and
# the closest valid one, instead of the job failing when it runs: each variant's and student's
# LM blocks (elmoc.train.spec_check), the students' distillation settings, the fine_tune
# recipes' options and the prune plans. (Task sections: helpers/tasks.smk complete_task_sections.)
import difflib
import re

from snakemake.exceptions import WorkflowError

from elmoc.config import STUDENT_WORKFLOW_KEYS
from elmoc.errors import ConfigError


def method_sections():
    """A check per nested section of the config, each a callable raising a one-line ConfigError
    that names the section's place: the one function to swap for the registries' validator
    (issue 46.1) once recipes, compression formats and prune methods are registered kinds.
    Today it calls the parsers the commands use (elmoc train / distill / task / prune)."""
    from elmoc.config_section import Section
    from elmoc.train.spec_check import check_spec

    checks = [lambda v=v: check_spec(lm_spec(v), f"config pretrain.variants.{v} (preset + overrides)")
              for v in variants()]
    for s in distill_students():
        from elmoc.train.distill import DistillSettings

        own = {k: v for k, v in (config["distill"]["students"][s] or {}).items() if k not in STUDENT_WORKFLOW_KEYS}
        checks.append(lambda s=s: check_spec(student_spec(s), f"config distill.students.{s} (its LM spec)"))
        checks.append(lambda s=s, own=own: DistillSettings.from_section(Section(own, f"distill.students.{s}")))
    for recipe, entry in (fine_tune_block().get("recipes") or {}).items():
        from elmoc.tasks.fine_tune import FineTuneSettings

        options = {k: v for k, v in (entry or {}).items() if k not in FINETUNE_WORKFLOW_KEYS}
        checks.append(lambda r=recipe, o=options: FineTuneSettings.from_section(o, f"fine_tune.recipes.{r}"))
    for plan, section in ((config.get("prune") or {}).get("plans") or {}).items():
        from elmoc.train.prune_loop import PruneSettings

        checks.append(lambda p=plan, d=section: PruneSettings.from_section(
            Section(d or {}, f"prune.plans.{p}", PruneSettings.KEYS)))
    return checks


def with_closest_value(message):
    """A parser's "X must be one of A, B, got 'c'" with the closest allowed value named."""
    found = re.search(r"must be one of (.+?), got '([^']*)'", message)
    if not found or "did you mean" in message:  # the registries' own check names it already
        return message
    allowed = [a.strip(" '[]") for a in re.split(r",| or ", found.group(1)) if a.strip(" '[]")]
    close = difflib.get_close_matches(found.group(2), allowed, n=1)
    return message + (f" (did you mean {close[0]!r}?)" if close else "")


def check_method_sections():
    """WorkflowError in one line for the first nested section its parser refuses (method_sections)."""
    for check in method_sections():
        try:
            check()
        except ConfigError as e:
            raise WorkflowError(with_closest_value(str(e))) from None


check_method_sections()
