# Tables and figures: our numbers beside the paper's (the pretraining heldout table is in
# pretrain.smk).  Tables 2-5 (and, with Transformer or masked-LM variants, the table
# beyond the paper) in Markdown, CSV, LaTeX and HTML, the figures in PNG and
# PDF, the majority-class baselines and the effective config; everything flagged
# report() goes into `snakemake --report results/<run>/report.html` with the caption in
# workflow/report/.  Partial results give tables with gaps (the inputs are what the
# enabled stages make).  Each rule calls the one command of its kind (`elmoc paper-tables`,
# `beyond-table`, `figures`, `downstream-table`, `majority-baseline`, `config-dump`).

PAPER_TABLES = ["table2", "table3", "table4_speed", "table5_speed"]  # table4.csv/table5.csv: the bench's raw rows
FIGURES = ["heldout_curves", "speed_table4", "speed_table5", "memory_s2"]


report: "../report/workflow.rst"


rule downstream_table:
    input:
        task_results(),
    output:
        **table_files("downstream", "md", "csv"),
        runs=f"{RESULTS}/tables/downstream_runs.csv",
    log:
        f"{LOGS}/tables/downstream.log",
    localrule: True
    params:
        elmoc=ELMOC,
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} downstream-table --inputs {input} --output {output.md} --csv {output.csv}"
        " --runs-csv {output.runs} > {log} 2>&1"


rule majority_baseline:
    input:
        unpack(lambda w: {"data": task_data_inputs(w)}),
    output:
        f"{RESULTS}/baselines/{{task}}/majority.json",
    params:
        elmoc=ELMOC,
        section=lambda w: section_json(task_section(w.task)),
        scale=config.get("scale", "demo"),
    log:
        f"{LOGS}/tables/majority.{{task}}.log",
    localrule: True
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} majority-baseline --task {wildcards.task} --section-json {params.section:q}"
        " --scale {params.scale} --output {output} > {log} 2>&1"


rule paper_tables:
    input:
        **paper_results(),
        bench=bench_json(),
    output:
        md=expand(f"{RESULTS}/tables/{{table}}.md", table=PAPER_TABLES),
        csv=expand(f"{RESULTS}/tables/{{table}}.csv", table=PAPER_TABLES),
        tex=expand(f"{RESULTS}/tables/{{table}}.tex", table=PAPER_TABLES),
        html=[
            report(
                f"{RESULTS}/tables/{table}.html",
                caption=f"../report/{table}.rst",
                category="Tables",
                labels={"table": table},
            )
            for table in PAPER_TABLES
        ],
    params:
        elmoc=ELMOC,
        bench=bench_option,
    log:
        f"{LOGS}/tables/paper.log",
    localrule: True
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} paper-tables --heldout {input.heldout} --tasks {input.tasks} --majority {input.majority}"
        " {params.bench}" f" --output-dir {RESULTS}/tables" " > {log} 2>&1"


# The table beyond the paper (docs/beyond-paper.md): built by default only when the config
# has a Transformer or masked-LM variant (beyond_variants); the ELMo LSTM rows of the run
# come along for reference.
rule beyond_table:
    input:
        heldout=all_heldout(),
        specs=expand(f"{RESULTS}/lm/{{variant}}/spec.yaml", variant=variants()),
        tasks=task_results(),
        bench=bench_json(),
    output:
        **table_files("beyond", "md", "csv", "tex"),
        html=report(
            f"{RESULTS}/tables/beyond.html",
            caption="../report/beyond.rst",
            category="Tables",
            labels={"table": "beyond"},
        ),
    params:
        elmoc=ELMOC,
        names=section_json({v: preset_name(v) for v in variants()}),
        bench=bench_option,
    log:
        f"{LOGS}/tables/beyond.log",
    localrule: True
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} beyond-table --heldout {input.heldout} --tasks {input.tasks} {params.bench}"
        " --presets-json {params.names:q}" f" --output-dir {RESULTS}/tables" " > {log} 2>&1"


rule figures:
    input:
        heldout=all_heldout(),
        bench=bench_json(),
    output:
        png=[
            report(f"{RESULTS}/figures/{fig}.png", caption=f"../report/{fig}.rst", category="Figures", labels={"figure": fig})
            for fig in FIGURES
        ],
        pdf=expand(f"{RESULTS}/figures/{{fig}}.pdf", fig=FIGURES),
    params:
        elmoc=ELMOC,
        bench=bench_option,
    log:
        f"{LOGS}/tables/figures.log",
    localrule: True
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} figures --heldout {input.heldout} {params.bench}" f" --output-dir {RESULTS}/figures" " > {log} 2>&1"


rule summary:
    input:
        **paper_results(),
    output:
        f"{RESULTS}/summary.txt",
    log:
        f"{LOGS}/tables/summary.log",
    localrule: True
    params:
        elmoc=ELMOC,
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} summary --heldout {input.heldout} --tasks {input.tasks} --majority {input.majority}"
        " --output {output} > {log} 2>&1"


rule config_dump:
    output:
        f"{RESULTS}/report/config.yaml",
    params:
        elmoc=ELMOC,
        config=json.dumps(CONFIG_AS_GIVEN, sort_keys=False, default=str),
    log:
        f"{LOGS}/tables/config.log",
    localrule: True
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} config-dump --section-json {params.config:q} --output {output} > {log} 2>&1"


# The page the run opens on (issue 52.3): the summary, every table, the figures with their captions
# under them and the config shown as text, as results/<run>/index.html and as the fragment that
# workflow/report/workflow.rst embeds as the landing page of `snakemake --report`; the config
# also as a page the report shows (it offers a YAML file only as a download).
rule results_page:
    input:
        summary=f"{RESULTS}/summary.txt",
        heldout=all_heldout(),
        tasks=task_results(),
        tables=lambda w: expand(f"{RESULTS}/tables/{{table}}.html", table=PAPER_TABLES + (["beyond"] if beyond_variants() else [])),
        figures=expand(f"{RESULTS}/figures/{{fig}}.png", fig=FIGURES) + [f"{RESULTS}/tables/pretrain_curves.png"],
        config=f"{RESULTS}/report/config.yaml",
    output:
        page=f"{RESULTS}/index.html",
        fragment=f"{RESULTS}/report/landing.html",
        config=report(f"{RESULTS}/report/config.html", caption="../report/config.rst", category="Configuration"),
    params:
        elmoc=ELMOC,
        captions=str(Path(workflow.basedir) / "workflow" / "report"),
        # the other runs beside this one, compared on the page (read when it is written, no inputs of
        # this rule: another run never makes this one's page out of date)
        run=RUN,
        runs_under=lambda w, output: Path(output.page).parent.parent,
    log:
        f"{LOGS}/tables/results_page.log",
    localrule: True
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} results-page --summary {input.summary} --heldout {input.heldout} --tasks {input.tasks}"
        " --tables {input.tables} --figures {input.figures} --captions {params.captions:q} --config {input.config}"
        " --output {output.page} --fragment {output.fragment} --config-html {output.config}"
        " --run {params.run} --runs-under {params.runs_under} > {log} 2>&1"


# The compression table (issue 36.4, docs/benchmarks.md "Compression"): not built by default; ask for
# results/<run>/tables/compression/{variant}.md. The original is the variant's exported model directory; every
# model directory under results/<run>/compressed/{variant}/ is a row named by its folder (float16, int8:
# rule compress_copy; student-*, pruned-*, ticket, ticket-control: elmoc distill / prune written there);
# each is scored on the config's tasks.run (with data) at tasks.seeds. Task features and runs stay in
# results/<run>/compression-work/{variant}/ (not an output: a rerun reuses and resumes them).
rule compress_copy:
    input:
        model=f"{RESULTS}/models/{{variant}}",
        sentences=f"{RESULTS}/corpus/heldout.txt",
    output:
        directory(compressed_dir(RESULTS, "{variant}", "{fmt}")),
    wildcard_constraints:
        fmt="|".join(COMPRESSED_FORMATS),
    params:
        elmoc=ELMOC,
    log:
        f"{LOGS}/compress/{{variant}}.{{fmt}}.log",
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} compress {input.model} --output-dir {output} --format {wildcards.fmt}"
        " --measure {input.sentences} > {log} 2>&1"


# The smaller models a config asks for, as rows of the compression table: a student of this teacher
# (distill.students; its exported model directory, hard-linked) and each round of each prune plan and its
# ticket (prune.plans; the two directions' round exported as one model directory).
rule compressed_student:
    input:
        f"{STUDENT}/model",
    output:
        directory(compressed_dir(RESULTS, "{variant}", student_role("{student}"))),
    wildcard_constraints:
        student="|".join(distill_students()) or "NO_STUDENTS",
    log:
        f"{LOGS}/compress/{{variant}}.student-{{student}}.log",
    conda:
        "../envs/elmoc.yaml"
    shell:
        "cp -rl {input} {output} > {log} 2>&1"


rule compressed_pruned:
    input:
        done=lambda w: sorted({str(Path(m).parent.parent / "prune.json") for m in pruned_models(w.variant, w.role).values()}),
        fasttext=export_fasttext_model,
    output:
        directory(compressed_dir(RESULTS, "{variant}", "{role}")),
    wildcard_constraints:
        role=r"pruned-[\w.-]+|ticket|ticket-control",
    log:
        f"{LOGS}/compress/{{variant}}.{{role}}.log",
    params:
        elmoc=ELMOC,
        models=lambda w: " ".join(f"--{d} {m}" for d, m in pruned_models(w.variant, w.role).items()),
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} export {params.models} --output-dir {output} > {log} 2>&1"


rule compression_table:
    input:
        original=f"{RESULTS}/models/{{variant}}",
        models=lambda w: compressed_dirs(w.variant),
        sentences=f"{RESULTS}/corpus/heldout.txt",
        heldout=lambda w: [f"{RESULTS}/lm/{w.variant}/{d}/heldout.json" for d in lm_directions(w.variant)],
        data=lambda w: compression_task_data(),
        vectors=lambda w: [config["tasks"].get("vectors", f"{RESULTS}/fasttext/cc.bin")]
        if any(task_vectors_needed(t, w.variant) for t in compression_tasks())
        else [],
    output:
        **table_files("compression/{variant}", "md", "csv", "json", "png", "pdf"),
    # the task runs' thread count (resources.task_run), for the timing too: one number for the whole table
    threads: lambda w: max([task_run_job(t)["threads"] for t in compression_tasks()] or [1])
    params:
        elmoc=ELMOC,
        heldout=lambda w, input: " ".join([f"--heldout original={h}" for h in input.heldout]
        + [f"--heldout {role}={h}" for role, h in compressed_heldout(w.variant)]),
        tasks=lambda w: " ".join(compression_tasks()),
        sections=lambda w: section_json({t: task_section(t) for t in compression_tasks()}),
        seeds=" ".join(str(s) for s in config["tasks"].get("seeds", [1])),
        vectors=lambda w, input: f"--fasttext {input.vectors}" if input.vectors else "",
        scale=config.get("scale", "demo"),
    log:
        f"{LOGS}/tables/compression.{{variant}}.log",
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} compression-table --original {input.original}"
        f" --models-under {compressed_dir(RESULTS, '{wildcards.variant}')}"
        " --sentences {input.sentences} {params.heldout} --tasks {params.tasks} --sections-json {params.sections:q}"
        " --seeds {params.seeds} {params.vectors} --scale {params.scale} --threads {threads}"
        f" --work-dir {RESULTS}/compression-work/{{wildcards.variant}}" f" --output-dir {RESULTS}/tables/compression"
        " --name {wildcards.variant} > {log} 2>&1"


FINAL_OUTPUT_HOOKS.append(lambda: [f"{RESULTS}/tables/downstream.md"] if task_results() else [])
FINAL_OUTPUT_HOOKS.append(lambda: [f"{RESULTS}/tables/beyond.md"] if beyond_variants() else [])
FINAL_OUTPUT_HOOKS.append(
    lambda: [f"{RESULTS}/tables/{t}.md" for t in PAPER_TABLES]
    + [f"{RESULTS}/figures/{f}.png" for f in FIGURES]
    + [f"{RESULTS}/report/config.yaml", f"{RESULTS}/summary.txt"]
    + [f"{RESULTS}/index.html", f"{RESULTS}/report/landing.html", f"{RESULTS}/report/config.html"]
)
