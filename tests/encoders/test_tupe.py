"""TUPE (``positions: tupe | tupe_r`` of the Transformer encoder): the logits against a reference
written out by hand, the position term computed once and shared by the blocks, the untying of
``<s>``, causality, T5's buckets, and the default left as it was."""
from __future__ import annotations

import math

import pytest
import torch

from elmoc.encoders.transformer import TransformerEncoder, sinusoidal_positions
from elmoc.encoders.tupe import UntiedPositions, relative_buckets
from elmoc.errors import ConfigError
from elmoc.lm import sentence_starts
from elmoc.registry import build

D, HEADS, BLOCKS, IN = 8, 2, 2, 6


def encoder(positions="tupe", causal=True, seed=0) -> TransformerEncoder:
    torch.manual_seed(seed)
    enc = build("encoder", {"type": "transformer", "d_model": D, "heads": HEADS, "d_ff": 16, "num_layers": BLOCKS,
                            "dropout": 0.0, "causal": causal, "positions": positions}, input_dim=IN)
    return enc.eval()


def randomize(enc: TransformerEncoder) -> None:
    """Non-zero theta and relative bias, so the reference sees every part of the term."""
    with torch.no_grad():
        if enc.untied.theta is not None:
            enc.untied.theta.copy_(torch.tensor([[0.7, -0.4], [-1.1, 0.3]]))
        if enc.untied.relative_bias is not None:
            enc.untied.relative_bias.weight.normal_()


def reference_term(enc: TransformerEncoder, steps: int, starts: torch.Tensor | None, row: int) -> torch.Tensor:
    """The paper's position term for batch row ``row``, entry by entry.  Shape: (heads, T, T)."""
    head = D // HEADS
    table = sinusoidal_positions(steps, D)
    q = table @ enc.untied.query.weight.T
    k = table @ enc.untied.key.weight.T
    term = torch.zeros(HEADS, steps, steps)
    bucket = relative_buckets(steps, not enc.causal)
    for h in range(HEADS):
        part = slice(h * head, (h + 1) * head)
        for i in range(steps):
            for j in range(steps):
                value = float(q[i, part] @ k[j, part]) / math.sqrt(2 * head)
                if enc.untied.relative_bias is not None:
                    value += float(enc.untied.relative_bias.weight[bucket[i, j], h])
                if starts is not None and not enc.causal:
                    if starts[row, i]:
                        value = float(enc.untied.theta[0, h])
                    elif starts[row, j]:
                        value = float(enc.untied.theta[1, h])
                term[h, i, j] = value
    return term


def reference_layers(enc: TransformerEncoder, inputs, mask, starts=None) -> list[torch.Tensor]:
    """Pre-LN blocks written out: word logits (x W^Q + b^Q)(x W^K + b^K)^T / sqrt(2d) from the stored
    (unscaled) in-projection, plus the one position term in every block."""
    batch, steps, _ = inputs.shape
    head = D // HEADS
    x = enc.input_projection(inputs)  # no positions added
    layers = [x * mask[..., None]]
    for index, block in enumerate(enc.blocks):
        attn = block.self_attn
        weight = attn.parametrizations.in_proj_weight.original
        bias = attn.parametrizations.in_proj_bias.original
        q, k, v = (block.norm1(x) @ weight.T + bias).split(D, dim=-1)
        outs = []
        for b in range(batch):
            term = reference_term(enc, steps, starts, b)
            heads = []
            for h in range(HEADS):
                part = slice(h * head, (h + 1) * head)
                logits = q[b, :, part] @ k[b, :, part].T / math.sqrt(2 * head) + term[h]
                for i in range(steps):
                    for j in range(steps):
                        if (enc.causal and j > i) or (not mask[b, j] and i != j):
                            logits[i, j] = float("-inf")
                heads.append(torch.softmax(logits, -1) @ v[b, :, part])
            outs.append(torch.cat(heads, -1))
        x = x + attn.out_proj(torch.stack(outs))
        x = x + block.linear2(torch.relu(block.linear1(block.norm2(x))))
        out = enc.final_norm(x) if index == BLOCKS - 1 else x
        layers.append(out * mask[..., None])
    return layers


@pytest.mark.parametrize("positions,causal", [("tupe", True), ("tupe_r", True), ("tupe", False), ("tupe_r", False)])
def test_layers_equal_the_papers_logits_written_out(positions, causal):
    enc = encoder(positions, causal)
    randomize(enc)
    inputs = torch.randn(2, 5, IN)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    starts = torch.tensor([[True, False, False, True, False], [False, True, False, False, False]])
    with torch.no_grad():
        got = enc(inputs, mask, starts=starts if enc.reads_sentence_starts else None).layers
        want = reference_layers(enc, inputs, mask, starts)
    assert len(got) == BLOCKS + 1
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_zero_position_projections_leave_word_attention_scaled_by_sqrt_2d():
    """U^Q = U^K = 0: the logits are the word term alone, (q k^T) / sqrt(2d); the same blocks with the
    usual 1/sqrt(d) (no scaling of the queries) give other layers."""
    enc = encoder("tupe")
    with torch.no_grad():
        enc.untied.query.weight.zero_()
        enc.untied.key.weight.zero_()
    inputs, mask = torch.randn(2, 4, IN), torch.ones(2, 4, dtype=torch.bool)
    with torch.no_grad():
        got = enc(inputs, mask).layers
        want = reference_layers(enc, inputs, mask)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
        # the stored weights read at 1/sqrt(d), as the baseline blocks would: not what TUPE computes
        plain = encoder("sinusoidal")
        plain.load_state_dict({k.replace("parametrizations.", "").replace(".original", ""): v
                               for k, v in enc.state_dict().items() if not k.startswith("untied.")})
        x = enc.input_projection(inputs)
        unscaled = plain.blocks[0](x, src_mask=torch.ones(4, 4, dtype=torch.bool).triu(1), is_causal=True)
    assert not torch.allclose(unscaled, got[1], atol=1e-4)


def test_the_position_term_is_computed_once_and_shared_by_every_block():
    enc = encoder("tupe_r")
    calls = []
    enc.untied.register_forward_hook(lambda module, args, out: calls.append(out))
    enc(torch.randn(2, 4, IN), torch.ones(2, 4, dtype=torch.bool))
    assert len(calls) == 1 and calls[0].shape == (HEADS, 4, 4)
    names = [n for n, _ in enc.named_parameters() if "untied" in n]
    assert sorted(names) == ["untied.key.weight", "untied.query.weight", "untied.relative_bias.weight"]
    assert not any("untied" in n for n, _ in enc.blocks.named_parameters())


def test_untying_a_leading_start_changes_only_row_and_column_0():
    torch.manual_seed(0)
    term = UntiedPositions(D, HEADS, bidirectional=True, relative=True)
    with torch.no_grad():
        term.theta.copy_(torch.tensor([[5.0, 6.0], [7.0, 8.0]]))
        term.relative_bias.weight.normal_()
    table = sinusoidal_positions(5, D)
    tied = term(table)  # (H, T, T)
    starts = torch.tensor([[True, False, False, False, False], [False] * 5])
    untied = term(table, starts)  # (B, H, T, T)
    assert untied.shape == (2, HEADS, 5, 5)
    torch.testing.assert_close(untied[1], tied)  # no <s>: nothing untied
    torch.testing.assert_close(untied[0, :, 1:, 1:], tied[:, 1:, 1:])
    assert (untied[0, :, 0, :] == torch.tensor([5.0, 6.0])[:, None]).all()  # theta_1: the row of <s>
    assert (untied[0, :, 1:, 0] == torch.tensor([7.0, 8.0])[:, None]).all()  # theta_2: its column
    assert not (tied[:, 0, :] == untied[0, :, 0, :]).any()


def test_only_a_bidirectional_tupe_encoder_reads_sentence_starts():
    assert encoder("tupe", causal=False).reads_sentence_starts
    assert encoder("tupe_r", causal=False).reads_sentence_starts
    for enc in (encoder("tupe"), encoder("tupe_r"), encoder("sinusoidal"), encoder("sinusoidal", causal=False)):
        assert not enc.reads_sentence_starts
    assert encoder("tupe").untied.theta is None  # a causal LM has no [CLS]: nothing to untie
    ids = torch.tensor([[1, 5, 6, 2, 1, 7]])
    assert sentence_starts(encoder("tupe"), ids) == {}
    assert sentence_starts(encoder("tupe", causal=False), ids)["starts"].tolist() == [[True, False, False, False,
                                                                                        True, False]]


@pytest.mark.parametrize("positions", ["tupe", "tupe_r"])
def test_causal_output_at_t_ignores_every_later_input(positions):
    enc = encoder(positions)
    randomize(enc)
    inputs = torch.randn(2, 7, IN)
    mask = torch.tensor([[True] * 7, [True] * 5 + [False] * 2])
    changed = inputs.clone()
    changed[:, 4:] = torch.randn(2, 3, IN)
    with torch.no_grad():
        a, b = enc(inputs, mask).layers, enc(changed, mask).layers
    for la, lb in zip(a, b):
        torch.testing.assert_close(la[:, :4], lb[:, :4], atol=0, rtol=0)
        assert not torch.allclose(la[0, 4:], lb[0, 4:])


def test_t5_buckets_by_hand():
    two_sided = relative_buckets(200, bidirectional=True)
    # query 0 looking right: exact distances 0..7, then log-spaced up to 128 (16 buckets a side)
    assert two_sided[0, [0, 1, 7, 8, 16, 127, 128, 199]].tolist() == [16 * 0, 17, 23, 24, 26, 31, 31, 31]
    assert two_sided[199, [199, 198, 192, 191, 183, 72, 71, 0]].tolist() == [0, 1, 7, 8, 10, 15, 15, 15]
    one_sided = relative_buckets(200, bidirectional=False)
    # the past only: 32 buckets, exact 0..15, log-spaced after; later keys share bucket 0
    assert one_sided[199, [199, 198, 184, 183, 167, 71, 0]].tolist() == [0, 1, 15, 16, 21, 31, 31]
    assert one_sided[0, 1:].eq(0).all()


def test_the_default_is_the_sinusoidal_encoder_unchanged():
    torch.manual_seed(3)
    default = build("encoder", {"type": "transformer", "d_model": D, "heads": HEADS, "d_ff": 16,
                                "num_layers": BLOCKS}, input_dim=IN)
    torch.manual_seed(3)
    named = build("encoder", {"type": "transformer", "d_model": D, "heads": HEADS, "d_ff": 16,
                              "num_layers": BLOCKS, "positions": "sinusoidal"}, input_dim=IN)
    assert default.untied is None and default.variant_label() is None
    assert not any("parametrizations" in k or "untied" in k for k in default.state_dict())
    for (k, a), (_, b) in zip(default.state_dict().items(), named.state_dict().items()):
        assert torch.equal(a, b), k
    # TUPE's blocks start from the same draws as the baseline's (its own parameters come after)
    torch.manual_seed(3)
    tupe = build("encoder", {"type": "transformer", "d_model": D, "heads": HEADS, "d_ff": 16,
                             "num_layers": BLOCKS, "positions": "tupe"}, input_dim=IN)
    stored = {k.replace("parametrizations.", "").replace(".original", ""): v for k, v in tupe.state_dict().items()}
    for k, a in default.state_dict().items():
        assert torch.equal(a, stored[k]), k
    assert tupe.variant_label() == "TUPE"
    assert [TransformerEncoder.table_option_label(section) for section in
            ({}, {"positions": "sinusoidal"}, {"positions": "tupe"}, {"positions": "tupe_r", "causal": False})] == [
        None, None, "TUPE", "TUPE-R"]


def test_positions_must_be_a_known_encoding():
    with pytest.raises(ConfigError, match="positions must be one of sinusoidal, tupe, tupe_r, got 'tupe-r'"):
        build("encoder", {"type": "transformer", "d_model": D, "heads": HEADS, "positions": "tupe-r"}, input_dim=IN)


def test_gradients_reach_the_position_term():
    enc = encoder("tupe_r", causal=False)
    enc.train()
    out = enc(torch.randn(2, 5, IN), torch.ones(2, 5, dtype=torch.bool),
              starts=torch.tensor([[True, False, False, True, False]] * 2)).output
    out.pow(2).sum().backward()
    for name, p in enc.untied.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    # theta_1 fills the whole row of <s>, and a softmax ignores a constant added to its row: what
    # counts is that the row has no position term; theta_2 (the column) is what trains
    assert enc.untied.theta.grad[0].abs().max() < 1e-6 < enc.untied.theta.grad[1].abs().min()
