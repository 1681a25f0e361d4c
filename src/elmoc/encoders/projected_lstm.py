"""Fast time loop of one projected LSTM layer (spec 1.1 math) with a hand-written backward.

Per step, for gates ``z = x_t W_in^T + b + h_{t-1} W_s^T`` in the order i, f, g, o::

    c_t = clip(i*g + f*c_{t-1}, cell_clip)        h~ = o * tanh(c_t)
    p_t = clip(h~ W_P^T, proj_clip)               q_t = LayerNorm(p_t)   (optional)
    r_t = q_t * dropout_mask                      (training only)
    h_t, c_t = r_t, c_t where mask_t else h_{t-1}, c_{t-1};   out_t = r_t * mask_t

Why a custom :class:`torch.autograd.Function` instead of autograd over a Python loop:

* the input product ``x W_in^T + b`` for all time steps is one matrix multiply done
  by the caller (this function receives it as ``input_gates``);
* the forward loop runs without building an autograd graph and writes into
  preallocated buffers; tanh is computed as ``2*sigmoid(2z) - 1`` (one sigmoid for all
  four gates), because this CPU build's tanh kernel is ~4x slower than its sigmoid;
* everything in the backward that does not depend on the recurrence (LayerNorm
  statistics, clip masks, gate derivatives) is computed for all steps at once
  before the reverse loop, and the weight gradients ``dW_s``, ``dW_P``, LayerNorm's
  ``gamma``/``beta`` and the input-gate gradient are single big products over all
  time steps after it, instead of one small product per step.

The reverse loop itself only carries ``dh``/``dc`` through two small matrix products
per step.  Outputs and gradients match a plain per-step autograd loop to 1e-5
(tests/encoders/test_elmo_lstm.py) and pass ``torch.autograd.gradcheck`` in float64.

Under bf16 autocast (issue 44) every product runs in bfloat16: the input product for all
time steps is one bf16 product, and the recurrent and projection products of each step
take bf16 operands (weights cast once per call, never per time step; ``h`` and ``h~`` are
written in bf16 by the element-wise operation that produces them).  The gates, the memory
cell (which accumulates over time), the projection's clip and LayerNorm stay float32.
``ELMOC_LSTM_BF16_RECURRENCE=0`` restores the float32 recurrence of before (the old path,
kept to measure the gain).  Other autocast dtypes keep the float32 recurrence.

With ``fused=True`` (the encoder option ``fused_cell: true``) both time loops run compiled by
``torch.compile`` (:mod:`elmoc.encoders.fused_lstm`: the same math with plain tanh, each step's
pointwise work fused into generated kernels; on CUDA replayed as CUDA graphs), in any precision.
With ``fused="layer"`` (``fused_cell: layer``) this autograd function is not used at all: the whole
layer, input product included, is one compiled differentiable function whose backward autograd
derives (``fused_lstm.compiled_layer``), with the same casts as the autocast branch below.
"""
from __future__ import annotations

import contextlib
import os
from typing import Any

import torch
import torch.nn.functional as F

from elmoc.encoders import fused_lstm, native

__all__ = ["projected_lstm_layer", "bf16_recurrence_enabled"]


def bf16_recurrence_enabled() -> bool:
    """Whether bf16 autocast runs the recurrent products in bf16 (default) or, with
    ``ELMOC_LSTM_BF16_RECURRENCE=0``, the whole recurrence in float32 (the path before issue 44)."""
    return os.environ.get("ELMOC_LSTM_BF16_RECURRENCE", "1").strip().lower() not in ("0", "false", "no", "off")


def _ln_eps() -> float:
    return 1e-5  # torch.nn.LayerNorm default, used by spec 1.1


def _as(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t`` in ``dtype``; no ``aten::to`` at all when it already is (the float32 path issues none)."""
    return t if t.dtype == dtype else t.to(dtype)


def _native_eligible(t: torch.Tensor) -> bool:
    """The C++ loop serves CPU float32/float64 tensors; everything else runs the Python loop."""
    return t.device.type == "cpu" and t.dtype in (torch.float32, torch.float64)


def _python_forward_loop(input_gates, mask, h0, c0, ws_t, wp_t, ln_weight, ln_bias, dropout, cell_clip, proj_clip,
                         all_valid=None):
    """The forward time loop in Python; same arguments and results as the C++ ``lstm_forward``,
    plus ``all_valid`` (``mask.all()``, read from the mask when None).

    ``input_gates`` (T, B, 4C, g block pre-scaled by 2) is overwritten with the activated
    gates.  Returns acts, c_all (T+1, B, C), h_all (T+1, B, P), tanh_c, h_tilde (T, B, C),
    p_all (T, B, P).

    Mixed precision: when the weights ``ws_t``/``wp_t`` are in a lower dtype than the gates
    (bfloat16 against float32), the two products of each step run in that dtype and so are
    ``h_all`` and ``h_tilde``, their left operands: each is written by the step's last
    element-wise operation (``out=`` a lower-dtype buffer), so no step issues a cast of its
    own; gates, cell state, projection and LayerNorm stay float32.
    """
    steps, batch, four_cell = input_gates.shape
    cell = four_cell // 4
    proj = wp_t.shape[1]
    low = ws_t.dtype  # the products' dtype: the gates' own in fp32/fp64, bfloat16 in the mixed path
    mixed = low != input_gates.dtype
    if all_valid is None:
        all_valid = bool(mask.all())  # a device read: callers on the GPU path pass it
    acts = input_gates  # (T, B, 4C): input gates in, activated gates i, f, g, o out
    c_all, h_all, tanh_c, h_tilde, p_all = _forward_outputs(input_gates, h0, c0, proj, low)
    # When every step is valid, step t's c is the carried c_all[t+1]; otherwise it goes to
    # step_c (masked rows differ, but they receive no gradient through the step anyway).
    step_c = input_gates.new_empty(batch, cell) if not all_valid else None
    rec, p_low, r_low, low_bound = _mixed_buffers(input_gates, proj, low, all_valid, proj_clip) if mixed else \
        (None, None, None, None)
    for t in range(steps):
        a = acts[t]
        if mixed:
            torch.mm(h_all[t], ws_t, out=rec)
            a.add_(rec)
        else:
            a.addmm_(h_all[t], ws_t)
        a.sigmoid_()  # i, f, o; sigmoid(2 z_g) for g
        a[:, 2 * cell : 3 * cell].mul_(2.0).sub_(1.0)  # g = tanh(z_g)
        c = c_all[t + 1] if all_valid else step_c
        torch.mul(a[:, cell : 2 * cell], c_all[t], out=c)
        c.addcmul_(a[:, :cell], a[:, 2 * cell : 3 * cell])
        if cell_clip is not None:
            c.clamp_(-cell_clip, cell_clip)
        tc = tanh_c[t]
        torch.mul(c, 2.0, out=tc)
        tc.sigmoid_().mul_(2.0).sub_(1.0)  # tanh(c)
        torch.mul(a[:, 3 * cell :], tanh_c[t], out=h_tilde[t])
        p = _project(h_tilde[t], wp_t, p_all[t], p_low, low_bound, proj_clip)
        r = F.layer_norm(p, (proj,), ln_weight, ln_bias, _ln_eps()) if ln_weight is not None else p
        if all_valid:
            if dropout is not None:
                torch.mul(r, dropout, out=h_all[t + 1])
            else:
                h_all[t + 1] = r
        else:
            _carry_masked(t, mask, r, c, c_all, h_all, dropout, r_low)
    return acts, c_all, h_all, tanh_c, h_tilde, p_all


def _project(h_tilde_t, wp_t, p, p_low, low_bound, proj_clip):
    """One step's clipped projection ``p`` (float32) of ``h_tilde_t``; ``p_low`` (the mixed path's
    lower-dtype product buffer, None otherwise) and ``low_bound`` (-proj_clip as a float32 scalar)."""
    if p_low is not None:
        torch.mm(h_tilde_t, wp_t, out=p_low)
        if proj_clip is not None:  # the clip's first half writes float32 (clamp has no mixed out=)
            torch.maximum(p_low, low_bound, out=p).clamp_max_(proj_clip)
        else:
            p.copy_(p_low)  # no clip to write float32 with: the one cast per step of this case
    else:
        torch.mm(h_tilde_t, wp_t, out=p)
        if proj_clip is not None:
            p.clamp_(-proj_clip, proj_clip)
    return p


def _carry_masked(t, mask, r, c, c_all, h_all, dropout, r_low):
    """A step with padded rows: the new c and h where the mask is set, the carried ones elsewhere
    (``r_low``: the mixed path's lower-dtype buffer of the new h, None otherwise)."""
    if r_low is not None:
        r = torch.mul(r, dropout, out=r_low) if dropout is not None else r_low.copy_(r)
    elif dropout is not None:
        r = r * dropout
    m = mask[t].unsqueeze(-1)
    torch.where(m, c, c_all[t], out=c_all[t + 1])
    torch.where(m, r, h_all[t], out=h_all[t + 1])


def _forward_outputs(input_gates, h0, c0, proj, low):
    """The forward loop's saved tensors: c_all (T+1, B, C), h_all (T+1, B, P, in ``low``), tanh_c,
    h_tilde (T, B, C; h_tilde in ``low``), p_all (T, B, P), the initial states in place."""
    steps, batch, four_cell = input_gates.shape
    cell = four_cell // 4
    c_all = input_gates.new_empty(steps + 1, batch, cell)  # carried cell states
    h_all = input_gates.new_empty(steps + 1, batch, proj, dtype=low)  # carried hidden states
    tanh_c = input_gates.new_empty(steps, batch, cell)
    h_tilde = input_gates.new_empty(steps, batch, cell, dtype=low)
    p_all = input_gates.new_empty(steps, batch, proj)  # clipped projections
    c_all[0] = c0
    h_all[0] = h0
    return c_all, h_all, tanh_c, h_tilde, p_all


def _mixed_buffers(input_gates, proj, low, all_valid, proj_clip):
    """The mixed path's per-step buffers: the recurrent product's result (before the add to the
    float32 input gates), the projection's (before its clip into float32), the masked step's new
    h (None when every step is valid) and -proj_clip as a float32 scalar (None without a clip)."""
    batch, four_cell = input_gates.shape[1:]
    rec = input_gates.new_empty(batch, four_cell, dtype=low)
    p_low = input_gates.new_empty(batch, proj, dtype=low)
    r_low = input_gates.new_empty(batch, proj, dtype=low) if not all_valid else None
    low_bound = input_gates.new_full((), -proj_clip) if proj_clip is not None else None
    return rec, p_low, r_low, low_bound


class _ProjectedLstmFunction(torch.autograd.Function):
    """Autograd function over one window of one layer (time-major tensors).

    Inputs (time-major): input_gates (time, batch, 4*cell) already containing the bias;
    mask (time, batch) bool; h0 (batch, proj); c0 (batch, cell); state_weight (4*cell, proj);
    proj_weight (proj, cell); ln_weight/ln_bias (proj,) or None; dropout (batch, proj) or None.
    all_valid: ``mask.all()`` as a Python bool, decided by the caller on the host (None: read
    from ``mask``, a host sync on a GPU).
    mm_dtype: the dtype of the recurrent and projection products (None: the states' dtype).
    bfloat16 with float32 states is the mixed path of bf16 autocast: input_gates may then be
    bfloat16, the weights are cast once per call (never per time step), the gates, cell
    state, projection and LayerNorm stay float32, and ``out`` is bfloat16.
    Outputs: out (time, batch, proj), h_T (batch, proj), c_T (batch, cell); h_T and c_T in
    the states' dtype.
    """

    @staticmethod
    def forward(ctx: Any, input_gates, mask, h0, c0, state_weight, proj_weight, ln_weight, ln_bias,
                dropout, cell_clip, proj_clip, all_valid=None, mm_dtype=None, fused=False):
        steps, _, four_cell = input_gates.shape
        cell = four_cell // 4
        low = c0.dtype if mm_dtype is None else mm_dtype
        if all_valid is None:
            all_valid = bool(mask.all())  # without the caller's answer: a device read (host sync on a GPU)
        clips = (None if cell_clip is None else float(cell_clip), None if proj_clip is None else float(proj_clip))
        ctx.fused = bool(fused)
        ctx.native = None
        if ctx.fused:  # the compiled loop (fused_lstm.py): plain tanh, no pre-scaled rows
            loop = fused_lstm.compiled(fused_lstm.forward_loop, input_gates.device.type)
            acts, c_all, h_all, tanh_c, h_tilde, p_all = loop(
                input_gates, mask, h0, c0, _as(state_weight, low).t(), _as(proj_weight, low).t(), ln_weight, ln_bias,
                dropout, *clips, all_valid)
            return _ProjectedLstmFunction._finish(ctx, mask, acts, c_all, h_all, tanh_c, h_tilde, p_all, h0, c0,
                                                  state_weight, proj_weight, ln_weight, dropout, clips, all_valid)
        # tanh(z) = 2*sigmoid(2z) - 1: this CPU build's tanh is ~4x slower than its
        # sigmoid, so the candidate-gate rows are doubled and one sigmoid serves all gates.
        scale = c0.new_ones(four_cell, 1)
        scale[2 * cell : 3 * cell] = 2.0
        ws_t = _as(state_weight * scale, low).t()  # (proj, 4*cell), in the products' dtype: one cast per call
        # a fresh float tensor (both loops overwrite it); from bfloat16 input gates one conversion for all steps
        input_gates = (input_gates * scale[:, 0]).contiguous()
        wp_t = _as(proj_weight, low).t()  # (cell, proj)
        ops = native.native_ops() if _native_eligible(input_gates) and low == input_gates.dtype else None
        ctx.native = ops  # the backward uses the same loop as the forward, whatever the environment says later
        if ops is None:
            acts, c_all, h_all, tanh_c, h_tilde, p_all = _python_forward_loop(
                input_gates, mask, h0, c0, ws_t, wp_t, ln_weight, ln_bias, dropout, *clips, all_valid)
        else:  # the C++ loop (csrc/projected_lstm.cpp), CPU tensors only
            acts, c_all, h_all, tanh_c, h_tilde, p_all = ops.lstm_forward(
                input_gates, mask, h0, c0, ws_t, wp_t, ln_weight, ln_bias, dropout, *clips)
        return _ProjectedLstmFunction._finish(ctx, mask, acts, c_all, h_all, tanh_c, h_tilde, p_all, h0, c0,
                                              state_weight, proj_weight, ln_weight, dropout, clips, all_valid)

    @staticmethod
    def _finish(ctx, mask, acts, c_all, h_all, tanh_c, h_tilde, p_all, h0, c0, state_weight, proj_weight, ln_weight,
                dropout, clips, all_valid):
        """Save for the backward; the outputs (in the products' dtype) and the last state (in the states')."""
        steps = acts.shape[0]
        low = h_all.dtype
        out = h_all[1:].clone() if all_valid else h_all[1:] * mask.to(low).unsqueeze(-1)
        ctx.save_for_backward(mask, acts, c_all, h_all, tanh_c, h_tilde, p_all, state_weight, proj_weight,
                              ln_weight, dropout)
        ctx.config = (clips[0], clips[1], all_valid)
        h_last = h_all[steps].clone() if low == c0.dtype else h_all[steps].to(c0.dtype)
        return out, h_last, c_all[steps].clone()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad_out, grad_h, grad_c):
        (mask, acts, c_all, h_all, tanh_c, h_tilde, p_all, state_weight, proj_weight, ln_weight,
         dropout) = ctx.saved_tensors
        cell_clip, proj_clip, all_valid = ctx.config
        steps, batch, four_cell = acts.shape
        cell = four_cell // 4
        proj = proj_weight.shape[0]
        dtype = acts.dtype
        low = h_all.dtype  # the products' dtype (bfloat16 in the mixed path)
        mixed = low != dtype
        if grad_out is None:
            grad_out = acts.new_zeros(steps, batch, proj, dtype=low)
        dh = acts.new_zeros(batch, proj) if grad_h is None else grad_h
        dc = acts.new_zeros(batch, cell) if grad_c is None else grad_c
        if ctx.native is not None:
            dz, dh, dc, d_ws, d_wp, d_lnw, d_lnb = ctx.native.lstm_backward(
                grad_out, dh, dc, mask, acts, c_all, h_all, tanh_c, h_tilde, p_all, state_weight, proj_weight,
                ln_weight, dropout, cell_clip, proj_clip)
            if ln_weight is None:
                d_lnw = d_lnb = None
            return (dz, None, dh, dc, d_ws, d_wp, d_lnw, d_lnb, None, None, None, None, None, None)
        if mixed:  # the products' weights in their dtype, once per call
            state_weight, proj_weight = state_weight.to(low), proj_weight.to(low)
        maskf = mask.to(dtype).unsqueeze(-1)  # (T, B, 1)

        # ---- everything that does not depend on the reverse recurrence, for all steps ----
        i, f, g, o = acts[..., :cell], acts[..., cell : 2 * cell], acts[..., 2 * cell : 3 * cell], acts[..., 3 * cell :]
        # Cell clip masks.  The carried c equals the step's c where the mask is True; on a
        # masked row it equals the last valid step's c, whose clip mask is the right one
        # to apply again (0/1 factors are idempotent).  Before a row's first valid step
        # the carried c is c0, which no clip touched: factor 1 (gradient passes to c0).
        cmask = None
        if cell_clip is not None:
            cmask = (c_all[1:].abs() < cell_clip).to(dtype)
            if not all_valid:
                seen_valid = mask.to(torch.int8).cummax(0).values.bool().unsqueeze(-1)  # (T, B, 1)
                cmask = torch.where(seen_valid, cmask, torch.ones_like(cmask))
        # dZ = [dc_raw * (g i(1-i)), dc_raw * (c_prev f(1-f)), dc_raw * (i (1-g^2)), dh~ * (tanh_c o(1-o))]
        k_cell = torch.cat([g * i * (1 - i), c_all[:-1] * f * (1 - f), i * (1 - g * g)], dim=-1)
        k_cell = k_cell.view(steps, batch, 3, cell)
        k_out = tanh_c * o * (1 - o)  # (T, B, C)
        # dc_raw[t] = (dc_carried + dh~ * o (1 - tanh^2)) * cmask[t]; the carried dc of
        # step t-1 is dc_raw[t] * f[t] * cmask[t-1], so fold cmask into both factors.
        a_cell = o * (1 - tanh_c * tanh_c)
        f_next = f.clone()
        if cmask is not None:
            a_cell = a_cell * cmask
            f_next[1:] *= cmask[:-1]
            dc = dc * cmask[-1]
        pmask = (p_all.abs() < proj_clip).to(dtype) if proj_clip is not None else None
        gain = dropout  # (B, P) or None: the dropout mask multiplies the LayerNorm output
        if ln_weight is not None:
            gain = ln_weight if gain is None else ln_weight * gain
            mean = p_all.mean(-1, keepdim=True)
            centered = p_all - mean
            rstd = torch.rsqrt(centered.pow(2).mean(-1, keepdim=True) + _ln_eps())
            xhat = centered * rstd  # (T, B, P)
            scale = rstd.expand_as(p_all) if pmask is None else rstd * pmask  # (T, B, P)
            # dp = scale * (u - mean(u) - xhat * mean(u * xhat)) with u = dr * gain:
            # the two means are one batched product of dr with [gain, gain*xhat] / P.
            sums_rhs = torch.stack([gain.expand_as(p_all), gain * xhat], dim=-1) / proj  # (T, B, P, 2)
            scale_gain = scale * gain
            scale_xhat = scale * xhat
        else:
            scale_gain = gain if pmask is None else (pmask if gain is None else pmask * gain)
        if ctx.fused:  # the compiled reverse loop (fused_lstm.py), same factors
            loop = fused_lstm.compiled(fused_lstm.reverse_loop, acts.device.type)
            ln = ln_weight is not None
            dz, dp_all, dr_all, dh, dc = loop(
                grad_out, dh, dc, maskf, k_cell, k_out, a_cell, f_next, scale_gain, scale if ln else None,
                scale_xhat if ln else None, sums_rhs if ln else None, state_weight, proj_weight, all_valid)
        else:
            dz = acts.new_empty(steps, batch, four_cell, dtype=low)
            dp_all = acts.new_empty(steps, batch, proj, dtype=low)  # grads of the raw projection
            dp_work = acts.new_empty(batch, proj) if mixed else None  # LayerNorm's dp before its last term
            dr_all = acts.new_empty(steps, batch, proj)
            dz_cell = dz[..., : 3 * cell].view(steps, batch, 3, cell)
            dz_out = dz[..., 3 * cell :]

            for t in range(steps - 1, -1, -1):
                dr = dr_all[t]
                torch.add(grad_out[t], dh, out=dr)
                if not all_valid:
                    m = maskf[t]
                    dh_pass = dh * (1 - m)
                    dc_pass = dc * (1 - m)
                    dr.mul_(m)
                    dc = dc * m
                dp = dp_all[t]
                if ln_weight is not None:
                    sums = torch.bmm(dr.unsqueeze(1), sums_rhs[t]).squeeze(1)  # (B, 2)
                    work = dp_work if mixed else dp
                    torch.mul(dr, scale_gain[t], out=work)
                    work.addcmul_(scale[t], sums[:, :1], value=-1.0)
                    if mixed:  # the last term writes the products' dtype
                        torch.addcmul(work, scale_xhat[t], sums[:, 1:], value=-1.0, out=dp)
                    else:
                        dp.addcmul_(scale_xhat[t], sums[:, 1:], value=-1.0)
                elif scale_gain is not None:
                    torch.mul(dr, scale_gain if scale_gain.dim() == 2 else scale_gain[t], out=dp)
                else:
                    dp.copy_(dr)
                dht = torch.mm(dp, proj_weight)  # (B, C)
                dc = torch.addcmul(dc, dht, a_cell[t])  # dc_raw (clip mask folded in)
                torch.mul(dc.unsqueeze(1), k_cell[t], out=dz_cell[t])
                torch.mul(dht, k_out[t], out=dz_out[t])
                dc = dc * f_next[t]
                dh = torch.mm(dz[t], state_weight)
                if not all_valid:
                    dh = dh + dh_pass
                    dc = dc + dc_pass

        # ---- weight gradients: one product over all time steps ----
        flat_dz = dz.view(-1, four_cell)
        d_state_weight = _as(flat_dz.t() @ h_all[:-1].reshape(-1, proj), dtype)
        d_proj_weight = _as(dp_all.view(-1, proj).t() @ h_tilde.view(-1, cell), dtype)
        d_ln_weight = d_ln_bias = None
        if ln_weight is not None:
            dq_all = dr_all if dropout is None else dr_all * dropout
            d_ln_weight = (dq_all * xhat).sum((0, 1))
            d_ln_bias = dq_all.sum((0, 1))
        return (dz, None, _as(dh, dtype), dc, d_state_weight, d_proj_weight, d_ln_weight, d_ln_bias,
                None, None, None, None, None, None)


def projected_lstm_layer(
    inputs: torch.Tensor,
    mask: torch.Tensor,
    h0: torch.Tensor,
    c0: torch.Tensor,
    input_weight: torch.Tensor,
    state_weight: torch.Tensor,
    state_bias: torch.Tensor,
    proj_weight: torch.Tensor,
    ln_weight: torch.Tensor | None,
    ln_bias: torch.Tensor | None,
    dropout_mask: torch.Tensor | None,
    cell_clip: float | None,
    proj_clip: float | None,
    all_valid: bool | None = None,
    fused: bool | str = False,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Run one projected LSTM layer over a window (spec 1.1 math).

    Args:
        inputs: (batch, time, input) layer input.
        mask: (batch, time) bool; False steps leave the state unchanged and output 0.
        h0, c0: (batch, proj), (batch, cell) initial state.
        input_weight: (4*cell, input); state_weight: (4*cell, proj); state_bias: (4*cell,);
            proj_weight: (proj, cell); ln_weight, ln_bias: (proj,) or None (no LayerNorm).
        dropout_mask: (batch, proj) scaled keep mask or None.  cell_clip, proj_clip: clamp values or None.
        all_valid: whether ``mask`` is all True, decided once per window by the caller (from the mask's
            CPU original); None reads it from ``mask`` (on a GPU the host then waits for the device).
        fused: False: the Python or C++ loop; True or ``"loops"``: the time loops compiled
            (:mod:`~elmoc.encoders.fused_lstm`) in the autograd function; ``"layer"``: the layer compiled whole.

    Returns:
        outputs (batch, time, proj) and the final ``(h (batch, proj), c (batch, cell))``.
    """
    if fused == "layer":
        return _compiled_layer(inputs, mask, h0, c0, input_weight, state_weight, state_bias, proj_weight, ln_weight,
                               ln_bias, dropout_mask, cell_clip, proj_clip, all_valid)
    fused = bool(fused)  # True or "loops": the compiled time loops
    # (T, B, 4C): the input product for all time steps in one matrix multiply.
    input_gates = torch.addmm(state_bias, inputs.transpose(0, 1).reshape(-1, inputs.shape[-1]), input_weight.t())
    input_gates = input_gates.view(inputs.shape[1], inputs.shape[0], -1)
    device_type = inputs.device.type
    if torch.amp.is_autocast_available(device_type) and torch.is_autocast_enabled(device_type):  # meta has none
        mm_dtype = torch.get_autocast_dtype(device_type)
        if mm_dtype != torch.bfloat16 or not bf16_recurrence_enabled():
            mm_dtype = None  # the whole recurrence (and its carried memory cell) in float32
            input_gates = input_gates.float()
        # the memory cell, the gates and LayerNorm stay float32; mm_dtype bf16 runs the products in bf16
        with torch.autocast(device_type, enabled=False):
            args = [None if x is None else x.float() for x in
                    (h0, c0, state_weight, proj_weight, ln_weight, ln_bias, dropout_mask)]
            out, h_t, c_t = _ProjectedLstmFunction.apply(
                input_gates, mask.t().contiguous(), *args, cell_clip, proj_clip, all_valid, mm_dtype, fused
            )
        return out.transpose(0, 1), (h_t, c_t)
    out, h_t, c_t = _ProjectedLstmFunction.apply(
        input_gates, mask.t().contiguous(), h0, c0, state_weight, proj_weight, ln_weight, ln_bias,
        dropout_mask, cell_clip, proj_clip, all_valid, None, fused,
    )
    return out.transpose(0, 1), (h_t, c_t)


def _compiled_layer(inputs, mask, h0, c0, input_weight, state_weight, state_bias, proj_weight, ln_weight, ln_bias,
                    dropout_mask, cell_clip, proj_clip, all_valid):
    """``projected_lstm_layer`` with ``fused="layer"``: the dtypes of the autocast branch above (the input
    product in autocast's dtype; the recurrent and projection products in bf16 under bf16 autocast unless
    ``ELMOC_LSTM_BF16_RECURRENCE=0``; the cell, gates and LayerNorm in float32) decided here and applied
    inside the compiled function, which runs with autocast off."""
    device_type = inputs.device.type
    in_dtype = mm_dtype = None
    if torch.amp.is_autocast_available(device_type) and torch.is_autocast_enabled(device_type):
        in_dtype = torch.get_autocast_dtype(device_type)
        mm_dtype = in_dtype if in_dtype == torch.bfloat16 and bf16_recurrence_enabled() else None
    if all_valid is None:
        all_valid = bool(mask.all())  # without the caller's answer: a device read (host sync on a GPU)
    clips = (None if cell_clip is None else float(cell_clip), None if proj_clip is None else float(proj_clip))
    layer = fused_lstm.compiled_layer(device_type)
    with torch.autocast(device_type, enabled=False) if in_dtype is not None else contextlib.nullcontext():
        out, h_t, c_t = layer(inputs, mask, h0, c0, input_weight, state_weight, state_bias, proj_weight, ln_weight,
                              ln_bias, dropout_mask, *clips, bool(all_valid), in_dtype, mm_dtype)
    return out, (h_t, c_t)
