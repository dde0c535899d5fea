"""bna/fenceposts.py against brute force: explicit indexing of V_ij and enumeration of n-gram spans."""
import pytest
import torch

from structattn.bna.fenceposts import all_span_vectors, fencepost_halves, ngram_spans, span_vectors


def brute_span(h_s, i, j):
    """V_ij = [a_j - a_i ; c_{i+1} - c_{j+1}] with a_k = first half at position k, c_k = second half at k."""
    half = h_s.shape[-1] // 2
    a = lambda k: h_s[k, :half]  # noqa: E731
    c = lambda k: h_s[k, half:]  # noqa: E731
    return torch.cat([a(j) - a(i), c(i + 1) - c(j + 1)])


def brute_ngrams(L, n):
    return {(i, i + g) for g in range(1, n + 1) for i in range(0, L - g + 1)}


def test_halves_shapes_and_odd_size():
    h = torch.randn(2, 6, 8)
    a, c = fencepost_halves(h)
    assert a.shape == c.shape == (2, 5, 4)
    torch.testing.assert_close(a[:, 2], h[:, 2, :4])  # fence 2 = (a_2, c_3)
    torch.testing.assert_close(c[:, 2], h[:, 3, 4:])
    with pytest.raises(ValueError, match="even"):
        fencepost_halves(torch.randn(1, 4, 5))


def test_span_vectors_brute_force():
    torch.manual_seed(0)
    h = torch.randn(3, 7, 6)  # L = 5
    pairs = [(i, j) for i in range(6) for j in range(i + 1, 6)]
    starts = torch.tensor([p[0] for p in pairs])
    ends = torch.tensor([p[1] for p in pairs])
    got = span_vectors(h, starts, ends)
    assert got.shape == (3, len(pairs), 6)
    for s in range(3):
        for k, (i, j) in enumerate(pairs):
            torch.testing.assert_close(got[s, k], brute_span(h[s], i, j))


def test_all_span_vectors_brute_force():
    torch.manual_seed(1)
    h = torch.randn(2, 6, 4)  # L = 4
    got = all_span_vectors(h)
    assert got.shape == (2, 5, 5, 4)
    for s in range(2):
        for i in range(5):
            for j in range(i + 1, 5):
                torch.testing.assert_close(got[s, i, j], brute_span(h[s], i, j))


def test_span_vector_covers_exactly_words_i_plus_1_to_j():
    """With a_k = count of words 1..k and c_k = count of words k..L (one-hot per word), V_ij = [1{i<w<=j}; same]."""
    L = 5
    T = L + 2
    words = torch.zeros(T, L)  # position p holds word p (1..L); START (0) and STOP (L+1) hold nothing
    for p in range(1, L + 1):
        words[p, p - 1] = 1.0
    left = words.cumsum(0)  # a_k: words at positions <= k
    right = words.flip(0).cumsum(0).flip(0)  # c_k: words at positions >= k
    h = torch.cat([left, right], dim=-1).unsqueeze(0)
    V = all_span_vectors(h)[0]
    for i in range(L + 1):
        for j in range(i + 1, L + 1):
            covered = torch.tensor([1.0 if i < w <= j else 0.0 for w in range(1, L + 1)])
            torch.testing.assert_close(V[i, j], torch.cat([covered, covered]))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7])
def test_ngram_spans_enumerates_exactly_the_short_spans(n):
    lengths = torch.tensor([5, 1, 3, 2])
    L = 5
    starts, ends, valid = ngram_spans(lengths, n, L)
    pairs = list(zip(starts.tolist(), ends.tolist()))
    assert len(pairs) == len(set(pairs)) == len(brute_ngrams(L, n))
    assert set(pairs) == brute_ngrams(L, n)
    assert len(pairs) <= n * L
    assert pairs == sorted(pairs, key=lambda p: (p[1] - p[0], p[0]))  # by length, then start (Eq. 16)
    assert valid.shape == (4, len(pairs))
    for s, Ls in enumerate(lengths.tolist()):
        inside = {p for p, ok in zip(pairs, valid[s].tolist()) if ok}
        assert inside == brute_ngrams(Ls, n)


def test_ngram_spans_edge_cases():
    with pytest.raises(ValueError, match=">= 1"):
        ngram_spans(torch.tensor([3]), 0, 3)
    starts, ends, valid = ngram_spans(torch.tensor([0, 0]), 3, 0)
    assert starts.numel() == ends.numel() == 0 and valid.shape == (2, 0)
    starts, ends, valid = ngram_spans(torch.tensor([1]), 4, 1)
    assert starts.tolist() == [0] and ends.tolist() == [1] and valid.tolist() == [[True]]
