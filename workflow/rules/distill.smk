# Distilled students (issue 36.1; opt-in: config `distill.students`, none by default).
#
#   results/<run>/distill/{student}/spec.yaml                 the student's LM spec (elmoc.config.resolve_student:
#                                                       its teacher's, or a preset's, with its overrides)
#   results/<run>/distill/{student}/{direction}/model.pt      elmoc distill: the student trained to reproduce the
#                                                       teacher's direction (an ordinary LM file)
#   results/<run>/distill/{student}/model/                    elmoc export of the two directions: a model directory
#
# As in pretrain.smk, checkpoint.pt is never an output: a killed job's rerun resumes it, and a
# changed student or teacher sets it aside (--stale-checkpoint set-aside) and starts afresh.


FINAL_OUTPUT_HOOKS.append(lambda: [f"{student_dir(RESULTS, s)}/model" for s in distill_students()])


rule student_spec:
    output:
        f"{STUDENT}/spec.yaml",
    params:
        elmoc=ELMOC,
        spec=lambda wildcards: section_json(student_spec(wildcards.student)),
    log:
        f"{LOGS}/distill/{{student}}.spec.log",
    localrule: True
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} spec --section-json {params.spec:q} --output {output} > {log} 2>&1"


rule distill:
    input:
        spec=f"{STUDENT}/spec.yaml",
        teacher=lambda wildcards: lm_models(student_teacher(wildcards.student))[wildcards.direction],
        artifacts=lambda wildcards: artifact_paths(student_spec(wildcards.student)),
    output:
        model=f"{STUDENT}/{{direction}}/model.pt",
        heldout=f"{STUDENT}/{{direction}}/heldout.json",
    wildcard_constraints:
        direction="forward|backward",
    log:
        f"{LOGS}/distill/{{student}}.{{direction}}.log",
    threads: STUDENT_JOB.threads
    resources:
        **STUDENT_JOB.resources,
    retries: 0 if workflow.remote_exec else RESOURCES["pretrain"]["retries"]
    params:
        elmoc=ELMOC,
        section=student_section_json,
        device=STUDENT_JOB.device,
        threads=STUDENT_JOB.threads,
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} distill --spec {input.spec} --teacher {input.teacher} --direction {wildcards.direction}"
        " --section-json {params.section:q}"
        f" --output-dir {student_dir(RESULTS, '{wildcards.student}')}/{{wildcards.direction}}"
        " --device {params.device} --threads {params.threads} --stale-checkpoint set-aside >> {log} 2>&1"


rule export_student:
    input:
        forward=f"{STUDENT}/forward/model.pt",
        backward=f"{STUDENT}/backward/model.pt",
        fasttext=lambda wildcards: fasttext_models_of(student_spec(wildcards.student)),
    output:
        directory(f"{STUDENT}/model"),
    log:
        f"{LOGS}/distill/{{student}}.export.log",
    resources:
        **DEFAULT_JOB,
    params:
        elmoc=ELMOC,
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} export --forward {input.forward} --backward {input.backward} --output-dir {output} > {log} 2>&1"
