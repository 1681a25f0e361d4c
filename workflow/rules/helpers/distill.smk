# The functions of distill.smk (config `distill.students`).
from pathlib import Path

from elmoc.config import STUDENT_WORKFLOW_KEYS, resolve_student
from elmoc.layouts import student_dir

# a student's folder as a rule pattern (elmoc.layouts.student_dir)
STUDENT = student_dir(RESULTS, "{student}")


def distill_students():
    return list((config.get("distill") or {}).get("students") or {})


def student_spec(student):
    presets = Path(workflow.basedir) / config["pretrain"]["presets_dir"]
    return relocate(resolve_student(config, student, presets_dir=presets), RUN)


def student_teacher(student):
    return config["distill"]["students"][student]["teacher"]


def student_job(student):
    """The teacher's pretrain resources, one process (a student trains as its teacher did)."""
    return pretrain_job(student_teacher(student))


# the jobs training a student (rule distill)
STUDENT_JOB = one_gpu_lm_job(lambda w: student_job(w.student))


def student_section_json(wildcards):
    """The student's loss settings, what `elmoc distill --section-json` reads."""
    entry = config["distill"]["students"][wildcards.student] or {}
    return section_json({k: v for k, v in entry.items() if k not in STUDENT_WORKFLOW_KEYS})
