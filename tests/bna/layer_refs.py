"""Plain references for the attention layers: explicit Python loops over sentences, positions, heads and keys.

They read a module's weights but none of its code (nor fenceposts.py): projections are written as matmuls,
masks as ``if`` tests, softmax by hand, span vectors by indexing the formula V_ij = [a_j - a_i ; c_{i+1} - c_{j+1}].
Everything is built from torch scalar/vector ops so that autograd gives the reference's gradients too.
"""
from __future__ import annotations

import math

import torch


def softmax_sum(q, keys, values):
    """sum_j softmax_j(q . k_j / sqrt(e)) v_j for one query vector and explicit lists of key/value vectors."""
    scores = [torch.dot(q, k) / math.sqrt(q.shape[0]) for k in keys]
    top = max(float(s.detach()) for s in scores)
    weights = [torch.exp(s - top) for s in scores]
    total = sum(weights)
    return sum(w / total * v for w, v in zip(weights, values))


def multihead(q_vec, key_vecs, value_vecs, heads):
    """Concatenated head outputs for one query: q_vec [H*e], key_vecs/value_vecs lists of [H*e] / [H*e_v]."""
    e, ev = q_vec.shape[0] // heads, value_vecs[0].shape[0] // heads
    outs = []
    for hd in range(heads):
        outs.append(softmax_sum(q_vec[hd * e:(hd + 1) * e],
                                [k[hd * e:(hd + 1) * e] for k in key_vecs],
                                [v[hd * ev:(hd + 1) * ev] for v in value_vecs]))
    return torch.cat(outs)


def linear(x, layer):
    out = x @ layer.weight.T
    return out + layer.bias if layer.bias is not None else out


def ref_masked_self_attention(h, lengths, query, key, value, heads, allowed):
    """[b, T, H*e_v] concatenated heads; a real query i sees real keys j with allowed(i, j), a padded one itself."""
    b, T, _ = h.shape
    rows = []
    for s in range(b):
        real = int(lengths[s]) + 2
        q, k, v = linear(h[s], query), linear(h[s], key), linear(h[s], value)
        out = []
        for i in range(T):
            keys = [j for j in range(real) if allowed(i, j)] if i < real else [i]
            out.append(multihead(q[i], [k[j] for j in keys], [v[j] for j in keys], heads))
        rows.append(torch.stack(out))
    return torch.stack(rows)


def ref_self_attention(module, h, lengths):
    heads = ref_masked_self_attention(h, lengths, module.query, module.key, module.value, module.heads,
                                      lambda i, j: True)
    return linear(heads, module.out)


def ref_bimsa(module, h, lengths):
    args = (h, lengths, module.query, module.key, module.value, module.heads)
    left = ref_masked_self_attention(*args, lambda i, j: j <= i)
    right = ref_masked_self_attention(*args, lambda i, j: j >= i)
    return torch.cat([linear(left, module.out_left), linear(right, module.out_right)], dim=-1)


def ref_span_list(h_s, length, n):
    """All spans of 1..n words of one sentence (h_s [T, d]) as (i, j, vector), by explicit indexing."""
    half = h_s.shape[-1] // 2
    spans = []
    for g in range(1, n + 1):
        for i in range(0, length - g + 1):
            j = i + g
            vec = torch.cat([h_s[j, :half] - h_s[i, :half], h_s[i + 1, half:] - h_s[j + 1, half:]])
            spans.append((i, j, vec))
    return spans


def ref_nsa(module, h, lengths):
    b, T, _ = h.shape
    rows = []
    for s in range(b):
        spans = [vec for _, _, vec in ref_span_list(h[s], int(lengths[s]), module.n)]
        q = linear(h[s], module.query)
        keys = [linear(vec, module.key) for vec in spans]
        values = [linear(vec, module.value) for vec in spans]
        rows.append(torch.stack([multihead(q[i], keys, values, module.heads) for i in range(T)]))
    return linear(torch.stack(rows), module.out)


def compare_with_grads(module, reference, h, lengths, atol=1e-5):
    """Outputs and gradients (input and every parameter) of module(h) and reference(module, h) agree."""
    torch.manual_seed(123)
    x1 = h.clone().requires_grad_(True)
    x2 = h.clone().requires_grad_(True)
    out = module(x1, lengths)
    ref = reference(module, x2, lengths)
    torch.testing.assert_close(out, ref, atol=atol, rtol=1e-4)
    weights = torch.randn_like(out)
    params = [p for p in module.parameters()]
    g1 = torch.autograd.grad((out * weights).sum(), [x1, *params])
    g2 = torch.autograd.grad((ref * weights).sum(), [x2, *params])
    for a, r in zip(g1, g2):
        torch.testing.assert_close(a, r, atol=atol, rtol=1e-4)


def pad_batch(sentences, T, d):
    """Stack [L_s + 2, d] sentences into [b, T, d]; padding gets large random junk so that leaks would show."""
    g = torch.Generator().manual_seed(99)
    out = torch.randn(len(sentences), T, d, generator=g, dtype=sentences[0].dtype) * 5.0
    for s, x in enumerate(sentences):
        out[s, :x.shape[0]] = x
    return out
