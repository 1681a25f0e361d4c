# The functions of tables.smk: the compression table's rows (copies, students, prune rounds) and the
# inputs of the tables.
from pathlib import Path
from types import SimpleNamespace

from elmoc.layouts import CONTROL, TICKET, compressed_dir, prune_dir, prune_round, pruned_role, student_dir, student_role
from elmoc.config import declared_values
from elmoc.tables import families

# the copies that compress_copy makes for the compression table (the registered formats with TABLE_COPY)
COMPRESSED_FORMATS = [name for name, copy in declared_values("compression", "TABLE_COPY").items() if copy]


def compressed_dirs(variant):
    """The model directories under results/<run>/compressed/{variant}/: the two copies, the configured
    students of this teacher, the configured prune plans' rounds and ticket (compressed_smaller_roles),
    plus any already there."""
    found = {p.parent.name for p in Path(compressed_dir(RESULTS, variant)).glob("*/elmoc-model.json")}
    roles = found | set(COMPRESSED_FORMATS) | set(compressed_smaller_roles(variant))
    return [compressed_dir(RESULTS, variant, role) for role in sorted(roles)]


def compressed_smaller_roles(variant):
    """Role -> how the workflow makes it, for the smaller models of ``variant`` that the config asks
    for: ``student-{name}`` for each `distill.students` entry whose teacher is the variant,
    ``pruned-{plan}-{level}`` for each round of each `prune.plans` plan (round k = level k), and
    ``ticket`` / ``ticket-control`` from the first plan with ``ticket: true`` (the table has one
    ticket row pair)."""
    roles = {student_role(s): ("student", s) for s in distill_students() if student_teacher(s) == variant}
    plans = (config.get("prune") or {}).get("plans") or {}
    ticket = None
    for plan, section in plans.items():
        for k, level in enumerate(section.get("levels") or [], start=1):
            roles[pruned_role(plan, level)] = ("round", plan, prune_round(k))
        if section.get("ticket") and ticket is None:
            ticket = plan
    if ticket is not None:
        roles[TICKET] = ("round", ticket, TICKET)
        roles[f"{TICKET}-{CONTROL}"] = ("round", ticket, CONTROL)
    return roles


def pruned_models(variant, role):
    """{"forward": model.pt, "backward": model.pt} of a pruned role (compressed_smaller_roles): each
    run's model.pt of lm_models with results/<run>/lm/{variant}/{run}/ replaced by the plan's round folder."""
    _, plan, folder = compressed_smaller_roles(variant)[role]
    return {d: str(Path(prune_dir(RESULTS, variant, plan, Path(path).parent.name)) / folder / "model.pt")
            for d, path in lm_models(variant).items()}


def compressed_heldout(variant):
    """(role, heldout.json) pairs of the smaller models (compressed_smaller_roles), one per training
    run: a student's two directions (rule distill's outputs), a pruned round's, the ticket's and its
    control's file beside each direction's model.pt (written by the prune job whose prune.json the
    row's directory waits for, so present when the table runs)."""
    pairs = []
    for role, how in compressed_smaller_roles(variant).items():
        if how[0] == "student":
            files = [f"{student_dir(RESULTS, how[1])}/{d}/heldout.json" for d in DIRECTIONS]
        else:
            files = sorted({str(Path(m).parent / "heldout.json") for m in pruned_models(variant, role).values()})
        pairs += [(role, f) for f in files]
    return pairs


def compression_tasks():
    """The tasks of the compression table: tasks.run with data."""
    return [t for t in task_names() if task_has_data(t)]


def compression_task_data():
    return [f for t in compression_tasks() for f in task_data_inputs(SimpleNamespace(task=t))]


def majority_results():
    return expand(f"{RESULTS}/baselines/{{task}}/majority.json", task=task_names())


def preset_name(variant):
    """The preset a variant is built from (`preset:` of its entry, else its own name)."""
    return (config["pretrain"]["variants"].get(variant) or {}).get("preset", variant)


def beyond_variants():
    """The variants beyond the paper (a Transformer or a masked LM; elmoc.tables.families):
    with none, the workflow builds no table `beyond`."""
    return [v for v in variants() if families.is_beyond(lm_spec(v), preset_name(v))]
