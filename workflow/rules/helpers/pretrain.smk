# The functions of pretrain.smk and variants.smk.
from elmoc.process_tree import torchrun_options

def lm_spec_json(wildcards):
    return section_json(lm_spec(wildcards.variant))


def pretrain_launcher(wildcards):
    """`elmoc train` in one process, or torchrun with one process per GPU (or, without GPUs,
    `processes` gloo processes on CPU: the same DDP code path, as in the rehearsal)."""
    job = pretrain_job(wildcards.variant)
    if job["processes"] > 1:
        # the agent passes stop signals (SLURM's SIGUSR1 too) to its workers and waits
        # signal_lead_s for rank 0's checkpoint before it kills them (torch's default: 30 s)
        options = " ".join(torchrun_options(job["processes"], job["signal_lead_s"]))
        return f"{PYTHON} -m torch.distributed.run {options} -m elmoc.cli"
    return ELMOC


def all_heldout():
    return [f"{RESULTS}/lm/{v}/{d}/heldout.json" for v in variants() for d in lm_directions(v)]


def cnn_source_model():
    """The model.pt whose char-CNN makes results/<run>/vectors/cnn.npy (shared in a joint ELMo)."""
    source = config["variants"]["cnn_source"]
    if source not in variants():
        return f"{RESULTS}/lm/{source}/forward/model.pt"  # not pretrained here: a file given by hand
    return lm_models(source)["forward"]
