"""Where the workflow's method runs keep their files: one function per layout, used by the rules
(workflow/rules/*.smk and helpers/, with ``{wildcard}`` placeholders for arguments) and by the code
that writes or reads the folders, so the two cannot drift apart.

- prune: ``results/prune/<variant>/<plan>/<run>/`` (:func:`prune_dir`) holds one training run per
  round, ``round<k>/`` (:func:`prune_round`), with a lottery ticket's controls ``control<k>/``
  (:func:`prune_control`) and ``ticket/`` / ``control/`` (:data:`TICKET`, :data:`CONTROL`);
- students: ``results/distill/<student>/`` (:func:`student_dir`);
- compressed copies and the smaller models of the compression table:
  ``results/compressed/<variant>/<role>/`` (:func:`compressed_dir`), roles ``student-<name>``
  (:func:`student_role`) and ``pruned-<plan>-<level>`` (:func:`pruned_role`).
"""
from __future__ import annotations

TICKET, CONTROL = "ticket", "control"


def prune_dir(variant: str, plan: str, run: str) -> str:
    """The output folder of one ``elmoc prune`` job (a plan of ``prune.plans`` on one training run)."""
    return f"results/prune/{variant}/{plan}/{run}"


def prune_round(number: int) -> str:
    """The folder of prune round ``number`` (1-based) inside :func:`prune_dir`."""
    return f"round{number}"


def prune_control(number: int) -> str:
    """The folder of round ``number``'s lottery-ticket control (rewinding each round)."""
    return f"{CONTROL}{number}"


def student_dir(student: str) -> str:
    """The folder of a distilled student: ``spec.yaml``, ``<direction>/model.pt``, ``model/``."""
    return f"results/distill/{student}"


def compressed_dir(variant: str, role: str = "") -> str:
    """The model directory of one row of ``variant``'s compression table (no ``role``: the folder
    holding them all)."""
    return f"results/compressed/{variant}" + (f"/{role}" if role else "")


def student_role(student: str) -> str:
    return f"student-{student}"


def pruned_role(plan: str, level: float | str) -> str:
    """A prune round's row name: ``pruned-<plan>-<level>`` (0.5 -> "0.5", 1 -> "1")."""
    return f"pruned-{plan}-{level if isinstance(level, str) else format(float(level), 'g')}"
