# ULMFiT's intermediate step (issue 37): a trained variant's LM fine-tuned on a task's own text
# with the LM's own objective, as a model directory the task runner reads with `--lm`.
#
#   results/<run>/lm_finetune/{variant}/{task}/model/    elmoc lm-finetune: every run of the variant
#                                                  (forward + backward, joint, masked) continued
#                                                  from its model.pt on results/<run>/tasks/{task}/sentences.txt
#                                                  (its last 10 % heldout), exported as `elmoc export` does
#
# No default job: the fine_tune block asks for it (config `fine_tune.lm_finetune`: true, or a
# mapping {epochs, lr} passed as --section-json); by hand: snakemake results/<run>/lm_finetune/elmo-c/sst5/model
# The work folder results/<run>/lm_finetune/{variant}/{task}/ (text/, one training run per run with its
# checkpoint.pt, model.pt, heldout.json) is never an output: a killed job's rerun resumes it, and
# a changed text, spec or source model.pt sets its checkpoint aside and starts afresh.


rule lm_finetune:
    input:
        unpack(lm_model_inputs),
        export_fasttext_model,
        spec=f"{RESULTS}/lm/{{variant}}/spec.yaml",
        artifacts=lm_artifacts,
        text=f"{RESULTS}/tasks/{{task}}/sentences.txt",
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
        " --text {input.text} --output-dir {output} --section-json {params.section:q}"
        " --device {params.device} --threads {params.threads} >> {log} 2>&1"
