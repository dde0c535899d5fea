"""The one masked attention of the package (BNA's layers, SG-Net's layer): SDPA against its plain twin, and the
plain twin against a loop over query rows."""
import pytest
import torch

from structattn.attention.multihead import masked_attention, reference_masked_attention


def _inputs(seed: int, n: int = 5, m: int = 6):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 3, rows, 4, generator=gen, dtype=torch.float64) for rows in (n, m, m))
    mask = torch.rand(2, 1, n, m, generator=gen) < 0.5
    mask[..., 0] = True  # every row attends something
    return q, k, v, mask


def test_the_plain_twin_is_a_softmax_over_the_allowed_keys_of_each_row():
    q, k, v, mask = _inputs(0)
    out = reference_masked_attention(q, k, v, mask)
    for b in range(2):
        for h in range(3):
            for i in range(q.shape[2]):
                keys = mask[b, 0, i].nonzero().flatten()
                weights = torch.softmax(k[b, h, keys] @ q[b, h, i] / 2.0, dim=0)  # sqrt(e) = 2
                torch.testing.assert_close(out[b, h, i], weights @ v[b, h, keys])


@pytest.mark.parametrize("seed", [1, 2])
def test_sdpa_matches_the_plain_twin_with_gradients(seed):
    q, k, v, mask = _inputs(seed)
    inputs = [t.clone().requires_grad_() for t in (q, k, v)]
    twins = [t.clone().requires_grad_() for t in (q, k, v)]
    fast, plain = masked_attention(*inputs, mask), reference_masked_attention(*twins, mask)
    torch.testing.assert_close(fast, plain)
    fast.sum().backward()
    plain.sum().backward()
    for a, b in zip(inputs, twins):
        torch.testing.assert_close(a.grad, b.grad)


def test_dropout_zero_is_deterministic_and_a_positive_rate_drops():
    q, k, v, mask = _inputs(3)
    torch.testing.assert_close(masked_attention(q, k, v, mask, 0.0), masked_attention(q, k, v, mask, 0.0))
    torch.manual_seed(0)
    assert not torch.allclose(masked_attention(q, k, v, mask, 0.9), masked_attention(q, k, v, mask, 0.0))
