import torch

from elmoc.nn.masking import lengths_to_mask, masked_mean, reverse_padded


def test_reverse_padded_reverses_each_row_and_keeps_padding():
    x = torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0]])
    lengths = torch.tensor([3, 2])
    assert reverse_padded(x, lengths).tolist() == [[3, 2, 1, 0], [5, 4, 0, 0]]
    feats = torch.arange(16.0).view(2, 4, 2)
    twice = reverse_padded(reverse_padded(feats, lengths), lengths)
    assert torch.equal(twice, feats)


def test_masked_mean_ignores_masked_and_handles_empty():
    values = torch.tensor([[1.0, 3.0, 100.0], [5.0, 7.0, 9.0]])
    mask = torch.tensor([[True, True, False], [False, False, False]])
    assert masked_mean(values, mask).item() == 2.0
    per_row = masked_mean(values, mask, dim=1)
    assert per_row.tolist() == [2.0, 0.0]


def test_lengths_to_mask():
    assert lengths_to_mask(torch.tensor([1, 3]), 4).tolist() == [
        [True, False, False, False], [True, True, True, False]]
