# Pruning a trained LM and its lottery ticket (issue 36; docs/beyond-paper.md, "Pruning and
# the lottery ticket").  Not a default target: ask for a plan of config `prune.plans` by name,
#   snakemake results/<run>/prune/elmo-c/<plan>/forward/prune.json results/<run>/prune/elmo-c/<plan>/backward/prune.json
# Each job is one `elmoc prune`; its folder holds a training run per round (round1/, ...,
# ticket/, control/: each round's model.pt is what `elmoc export` reads) and resumes where it
# stopped when rerun; prune.json, written last, is the job's one output.


rule prune:
    input:
        model=f"{RESULTS}/lm/{{variant}}/{{direction}}/model.pt",
    output:
        summary=f"{prune_dir(RESULTS, '{variant}', '{plan}', '{direction}')}/prune.json",
    wildcard_constraints:
        plan="|".join(config.get("prune", {}).get("plans", {})) or "NO_PRUNE_PLANS",
    log:
        f"{LOGS}/prune/{{variant}}.{{plan}}.{{direction}}.log",
    threads: VARIANT_LM_JOB.threads
    resources:
        **VARIANT_LM_JOB.resources,
    params:
        elmoc=ELMOC,
        section=lambda wildcards: section_json(config["prune"]["plans"][wildcards.plan]),
        with_gpus=VARIANT_LM_JOB.with_gpus,
        device=VARIANT_LM_JOB.device,
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.with_gpus} {params.elmoc} prune --model {input.model} --direction {wildcards.direction}"
        f" --output-dir {prune_dir(RESULTS, '{wildcards.variant}', '{wildcards.plan}', '{wildcards.direction}')}"
        " --section-json {params.section:q} --device {params.device} --threads {threads} > {log} 2>&1"
