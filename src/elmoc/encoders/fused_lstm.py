"""The projected LSTM's time loops as pure functions for ``torch.compile`` (issue 44.2: a fused cell).

Same math and the same saved tensors as the Python loops of :mod:`elmoc.encoders.projected_lstm`
(whose autograd function calls these when the encoder's ``fused_cell`` option is on), written
without ``out=`` buffers or in-place writes, so that TorchDynamo traces a whole window (the loop
is unrolled: one graph per (batch, bptt, sizes) shape) and Inductor fuses the pointwise part of
each time step (gates, cell update, clips, tanh, LayerNorm, dropout, masking; forward and the
reverse loop's gradients) into one generated kernel after each of the step's two matrix products,
which stay library calls (cuBLAS / the CPU's BLAS): 2 kernels per step forward and 2 backward
(read in Inductor's output code on the CPU, ``TORCH_LOGS=output_code``, 2026-11-26: forward
``cpp_fused_add_clamp_mul_sigmoid_slice_stack_tanh`` and ``cpp_fused_clamp_mul_native_layer_norm``,
backward ``cpp_fused_add_bmm_mul_..._sub_unsqueeze`` and ``cpp_fused_add_cat_mul_..._view``).

Why ``torch.compile`` and not a hand-written CUDA kernel built at first use (as ``csrc`` builds
the CPU loop): the pointwise part changes with the options (LayerNorm or not, clips, dropout,
padding, bf16 products), and Inductor generates and tunes each variant (Triton on CUDA, C++ on
the CPU, so the CPU tests run the very code path); a CUDA kernel would need one hand-written
variant per combination and could not be tested without a GPU.

On CUDA the compiled loops use ``mode="reduce-overhead"``: CUDA graphs replay the whole window's
launches at once, so the step's few hundred small kernels do not gap.  On the CPU the default
mode (no graphs).  The fused cell is off by default (compiling takes tens of seconds per shape,
and where no compiler is available it cannot run).

Two ways to compile (the encoder option ``fused_cell``, :data:`FUSED_CELL`):

* ``true``: the two time loops above (:func:`compiled`), called inside the hand-written autograd
  function of :mod:`elmoc.encoders.projected_lstm`.  They are inference graphs, so on CUDA every call
  is a new graph generation whose outputs are cloned out of the graph pool, and every input that is
  not a parameter (the input gates, the reverse loop's factors) is copied into the graph's buffers at
  each replay: some 11 GB per paper-size step (docs/benchmarks.md, derived).
* ``layer``: the whole differentiable layer, the input product for all steps and the unrolled
  forward loop (:func:`layer_forward`, :func:`compiled_layer`), called outside any custom autograd
  function: AOTAutograd derives the backward and compiles it as a second graph.  On CUDA the graph
  trees keep the saved activations in their pool until that backward runs, the next layer's input
  (this layer's output) is a pool tensor they do not copy, and the parameters are static inputs;
  only the first layer's input, the masks, the dropout mask and the carried state are copied in.
"""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

__all__ = ["forward_loop", "reverse_loop", "compiled", "layer_forward", "compiled_layer", "FUSED_CELL"]

# The encoder option ``fused_cell``: its values (YAML's booleans as written) -> what runs
# (None: the Python or C++ loop; "loops": :func:`compiled` loops in the autograd function;
# "layer": :func:`compiled_layer`, the whole layer with its autograd-derived backward).
FUSED_CELL = {"false": None, "true": "loops", "layer": "layer"}
# device types whose compiled layer replays CUDA graphs (``mode="reduce-overhead"``); a test adds "cpu"
# to run the graph wrapper of :func:`compiled_layer` over a fake compile
GRAPHED_DEVICES = ("cuda",)

LN_EPS = 1e-5  # torch.nn.LayerNorm's default, as spec 1.1 uses
RECOMPILE_LIMIT = 64  # graphs per compiled loop (see compiled)


def forward_loop(input_gates, mask, h0, c0, ws_t, wp_t, ln_weight, ln_bias, dropout, cell_clip, proj_clip,
                 all_valid: bool):
    """One window forward, time-major.  ``input_gates`` (T, B, 4C) unscaled, bias included; ``ws_t``
    (P, 4C) and ``wp_t`` (C, P) in the products' dtype.  Returns acts (activated gates i, f, g, o),
    c_all (T+1, B, C) carried cells, h_all (T+1, B, P) carried states (products' dtype), tanh_c,
    h_tilde (T, B, C; h_tilde in the products' dtype), p_all (T, B, P) clipped projections: the
    tensors the Python loop saves."""
    steps = input_gates.shape[0]
    cell = c0.shape[1]
    proj = wp_t.shape[1]
    dtype, low = c0.dtype, ws_t.dtype
    h, c = h0.to(low), c0
    acts, cs, hs, tanhs, tildes, ps = [], [c0], [h], [], [], []
    for t in range(steps):
        z = input_gates[t].to(dtype) + torch.mm(h, ws_t).to(dtype)
        i = torch.sigmoid(z[:, :cell])
        f = torch.sigmoid(z[:, cell : 2 * cell])
        g = torch.tanh(z[:, 2 * cell : 3 * cell])
        o = torch.sigmoid(z[:, 3 * cell :])
        c_step = f * c + i * g
        if cell_clip is not None:
            c_step = c_step.clamp(-cell_clip, cell_clip)
        tc = torch.tanh(c_step)
        h_tilde = (o * tc).to(low)
        p = torch.mm(h_tilde, wp_t).to(dtype)
        if proj_clip is not None:
            p = p.clamp(-proj_clip, proj_clip)
        r = F.layer_norm(p, (proj,), ln_weight, ln_bias, LN_EPS) if ln_weight is not None else p
        if dropout is not None:
            r = r * dropout
        if all_valid:
            c, h = c_step, r.to(low)
        else:
            m = mask[t].unsqueeze(-1)
            c, h = torch.where(m, c_step, c), torch.where(m, r.to(low), h)
        acts.append(torch.cat([i, f, g, o], dim=1))
        cs.append(c)
        hs.append(h)
        tanhs.append(tc)
        tildes.append(h_tilde)
        ps.append(p)
    return (torch.stack(acts), torch.stack(cs), torch.stack(hs), torch.stack(tanhs), torch.stack(tildes),
            torch.stack(ps))


def reverse_loop(grad_out, dh, dc, maskf, k_cell, k_out, a_cell, f_next, scale_gain, scale, scale_xhat, sums_rhs,
                 state_weight, proj_weight, all_valid: bool):
    """The backward's reverse loop (the rest of the backward is all-steps work, see
    ``_ProjectedLstmFunction.backward``): the same factors in, returns dz (T, B, 4C) and dp_all (T, B, P)
    in the products' dtype (``state_weight``'s), dr_all (T, B, P) and the gradients of h0 and c0."""
    steps = grad_out.shape[0]
    batch = dh.shape[0]
    dtype, low = dc.dtype, state_weight.dtype
    dzs, dps, drs = [], [], []
    for t in range(steps - 1, -1, -1):
        dr = grad_out[t].to(dtype) + dh
        if not all_valid:
            m = maskf[t]
            dh_pass, dc_pass = dh * (1 - m), dc * (1 - m)
            dr = dr * m
            dc = dc * m
        if sums_rhs is not None:  # LayerNorm
            sums = torch.bmm(dr.unsqueeze(1), sums_rhs[t]).squeeze(1)
            dp = dr * scale_gain[t] - scale[t] * sums[:, :1] - scale_xhat[t] * sums[:, 1:]
        elif scale_gain is not None:
            dp = dr * (scale_gain if scale_gain.dim() == 2 else scale_gain[t])
        else:
            dp = dr
        dp = dp.to(low)
        dht = torch.mm(dp, proj_weight).to(dtype)
        dc = dc + dht * a_cell[t]
        dz = torch.cat([(dc.unsqueeze(1) * k_cell[t]).reshape(batch, -1), dht * k_out[t]], dim=1).to(low)
        dc = dc * f_next[t]
        dh = torch.mm(dz, state_weight).to(dtype)
        if not all_valid:
            dh = dh + dh_pass
            dc = dc + dc_pass
        dzs.append(dz)
        dps.append(dp)
        drs.append(dr)
    return torch.stack(dzs[::-1]), torch.stack(dps[::-1]), torch.stack(drs[::-1]), dh, dc


def layer_forward(inputs, mask, h0, c0, input_weight, state_weight, state_bias, proj_weight, ln_weight, ln_bias,
                  dropout, cell_clip, proj_clip, all_valid: bool, in_dtype, mm_dtype):
    """One layer over one window, differentiable (autograd derives its backward): the input product for
    all steps and :func:`forward_loop`.  Batch-major like ``projected_lstm_layer``: ``inputs`` (B, T, I),
    ``mask`` (B, T) bool; returns out (B, T, P), h_T (B, P), c_T (B, C).

    ``in_dtype``: autocast's dtype when the caller runs under autocast (None: the inputs' own), the
    dtype of the input product; ``mm_dtype``: bfloat16 for the mixed path (the recurrent and projection
    products in bf16, the cell, gates and LayerNorm in float32, out in bf16, h_T and c_T float32), None
    for the products in the states' dtype.  The same casts as ``projected_lstm_layer``'s autocast branch,
    done here, inside the graph, so that the parameters reach the compiled function as themselves
    (static inputs of CUDA graphs, never copied) and the casts are fused into the generated code."""
    batch, steps, _ = inputs.shape
    x = inputs.transpose(0, 1).reshape(steps * batch, -1)
    if in_dtype is not None:  # under autocast: the input product in its dtype, the recurrence's states float32
        gates = torch.addmm(state_bias.to(in_dtype), x.to(in_dtype), input_weight.to(in_dtype).t())
        if mm_dtype is None:
            gates = gates.float()  # the whole recurrence in float32
        h0, c0 = h0.float(), c0.float()
        state_weight, proj_weight = state_weight.float(), proj_weight.float()
        ln_weight = None if ln_weight is None else ln_weight.float()
        ln_bias = None if ln_bias is None else ln_bias.float()
        dropout = None if dropout is None else dropout.float()
    else:
        gates = torch.addmm(state_bias, x, input_weight.t())
    low = c0.dtype if mm_dtype is None else mm_dtype
    mask_t = mask.t()
    _, c_all, h_all, _, _, _ = forward_loop(gates.view(steps, batch, -1), mask_t, h0, c0, state_weight.to(low).t(),
                                            proj_weight.to(low).t(), ln_weight, ln_bias, dropout, cell_clip,
                                            proj_clip, all_valid)
    out = h_all[1:] if all_valid else h_all[1:] * mask_t.to(low).unsqueeze(-1)
    # batch-major and contiguous, as the first layer's input is: the next layer's call then matches the same
    # compiled graph (a transposed view's strides would compile a second one per shape and precision)
    return out.transpose(0, 1).contiguous(), h_all[steps].to(c0.dtype), c_all[steps]


@functools.lru_cache(maxsize=None)
def compiled_layer(device_type: str):
    """``torch.compile`` of :func:`layer_forward` for a device type (cached like :func:`compiled`): on the
    CPU the default mode; on CUDA ``mode="reduce-overhead"`` (CUDA graph trees, forward and backward graph)
    without a step mark per call, and only the outputs that must outlive the step cloned (see ``run``)."""
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    if device_type not in GRAPHED_DEVICES:
        return torch.compile(layer_forward, dynamic=False, fullgraph=True)
    graphed = torch.compile(layer_forward, dynamic=False, mode="reduce-overhead", fullgraph=True)

    @functools.wraps(layer_forward)
    def run(*args):
        # What outlives a graph generation (torch/_inductor/cudagraph_trees.py): every call of a compiled
        # function is a new torch.compile invocation (Dynamo's GenerationTracker.generation += 1), and the
        # tree manager starts a new generation at such a call unless forwards are still waiting for their
        # backward (can_start_new_generation: not running_forwards_with_pending_backwards).  A new
        # generation ends the current path (try_end_curr_execution / dealloc_current_path_weakrefs), and its
        # replays write into the same pool memory the previous generation's outputs live in.
        # * Training (``out`` requires grad): from the first layer's forward to the last backward graph the
        #   forwards are pending, so both layers, both directions and the backward run in one generation: the
        #   saved activations and the next layer's input (this output, a pool tensor the tree does not copy)
        #   stay valid, and no step mark is set (cudagraph_mark_step_begin would start a generation at every
        #   call and let the second layer's replay overwrite the first one's output that it saved).  The next
        #   step's first forward starts the next generation, so what the next window reads must not be pool
        #   memory: the carried state h_T, c_T (TBPTT: the trainer detaches it, a view of the same storage,
        #   and hands it back as h0, c0) is cloned here, out of the pool (~B x (P + C) floats per layer).
        # * Inference (no grad; ``elmoc embed``, heldout evaluation): a forward has no pending backward, so
        #   each call starts a generation and the next layer's replay overwrites this one's output (the
        #   encoder keeps every layer's output): everything is cloned, as the ``true`` loops do.
        out, h_last, c_last = graphed(*args)
        if out.requires_grad:
            return out, h_last.clone(), c_last.clone()
        return out.clone(), h_last.clone(), c_last.clone()

    return run


@functools.lru_cache(maxsize=None)
def compiled(fn, device_type: str):
    """``torch.compile`` of :func:`forward_loop` or :func:`reverse_loop` for a device type (cached: one
    compiled function, recompiled by TorchDynamo's guards per shape and option set)."""
    # one graph per (shape, dtype, option set): a run compiles a few (each layer's window, the last short
    # batch), a process that measures several precisions and window lengths many more; Dynamo's default
    # limit of 8 recompilations per function is a hard error under fullgraph=True (the GPU check's fused
    # step hit it at its 9th variant)
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    if device_type != "cuda":
        return torch.compile(fn, dynamic=False, fullgraph=True)
    graphed = torch.compile(fn, dynamic=False, mode="reduce-overhead", fullgraph=True)

    @functools.wraps(fn)
    def run(*args, **kwargs):
        # A CUDA graph writes its outputs into the same memory at every replay, and the same graph
        # replays for the next layer or window of the same shape while the autograd function still
        # holds this call's outputs for its backward (the first GPU check of the fused cell stopped
        # with "accessing tensor output of CUDAGraphs that has been overwritten"): each call is a new
        # graph step, and its outputs are copied out of the graph's memory.
        torch.compiler.cudagraph_mark_step_begin()
        return tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in graphed(*args, **kwargs))

    return run
