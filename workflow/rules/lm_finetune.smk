# ULMFiT's intermediate step (issue 37): a trained variant's LM fine-tuned on a task's own text
# with the LM's own objective, as a model directory the task runner reads with `--lm`.
#
#   results/<run>/tasks/{task}/text/{train,dev,test}.txt  elmoc task-sentences --split-dir: each split's
#                                                  distinct sentences (the same as sentences.txt, by split)
#   results/<run>/lm_finetune/{variant}/{task}/model/    elmoc lm-finetune: every run of the variant
#                                                  (forward + backward, joint, masked) continued
#                                                  from its model.pt on the task's train and dev text
#                                                  (test's too with lm_finetune.text transductive; its
#                                                  last 10 % heldout), exported as `elmoc export` does
#
# No default job: the fine_tune block asks for it (config `fine_tune.lm_finetune`: true, or a
# mapping {epochs, schedule, lr, decay, cut_frac, ratio, batch_size, min_steps, text} passed as
# --section-json); by hand: snakemake results/<run>/lm_finetune/elmo-c/sst5/model
# The work folder results/<run>/lm_finetune/{variant}/{task}/ (text/, one training run per run with its
# checkpoint.pt, model.pt, heldout.json) is never an output: a killed job's rerun resumes it, and
# a changed text, spec or source model.pt sets its checkpoint aside and starts afresh.


rule task_split_text:
    input:
        unpack(lambda w: {"data": task_data_inputs(w)}),
    output:
        expand(f"{RESULTS}/tasks/{{{{task}}}}/text/{{split}}.txt", split=("train", "dev", "test")),
    params:
        elmoc=ELMOC,
        section=lambda w: section_json(task_section(w.task)),
    resources:
        **DEFAULT_JOB,
    log:
        f"{LOGS}/task_split_text/{{task}}.log",
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} task-sentences --task {wildcards.task} --section-json {params.section:q}"
        f" --split-dir {RESULTS}/tasks/{{wildcards.task}}/text > {{log}} 2>&1"


rule lm_finetune:
    input:
        unpack(lm_model_inputs),
        export_fasttext_model,
        spec=f"{RESULTS}/lm/{{variant}}/spec.yaml",
        artifacts=lm_artifacts,
        text=expand(f"{RESULTS}/tasks/{{{{task}}}}/text/{{split}}.txt", split=("train", "dev", "test")),
    output:
        directory(f"{RESULTS}/lm_finetune/{{variant}}/{{task}}/model"),
    log:
        f"{LOGS}/lm_finetune/{{variant}}.{{task}}.log",
    benchmark:
        f"{LOGS}/benchmarks/lm_finetune/{{variant}}.{{task}}.tsv"
    threads: VARIANT_LM_JOB.threads
    resources:
        **VARIANT_LM_JOB.resources,
        slurm_extra=lambda wildcards: f"'--signal=USR1@{pretrain_job(wildcards.variant)['signal_lead_s']}'",
    retries: 0 if workflow.remote_exec else RESOURCES["pretrain"]["retries"]
    params:
        elmoc=ELMOC,
        section=lm_finetune_section_json,
        with_gpus=VARIANT_LM_JOB.with_gpus,
        device=VARIANT_LM_JOB.device,
        threads=VARIANT_LM_JOB.threads,
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.with_gpus} {params.elmoc} lm-finetune" f" --lm-dir {RESULTS}/lm/{{wildcards.variant}}"
        f" --text {RESULTS}/tasks/{{wildcards.task}}/text" " --output-dir {output} --section-json {params.section:q}"
        " --device {params.device} --threads {params.threads} >> {log} 2>&1"
