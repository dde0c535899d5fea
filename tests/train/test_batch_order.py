"""The batch order of the encoder families (`seeded_order`): a permutation per (seed, epoch); the length-grouped one
pads less."""
import numpy as np
import pytest

from structattn.train.engine import epoch_seed, seeded_order


def _padding(order, lengths, batch_size):
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    return sum(max(lengths[j] for j in b) * len(b) - sum(lengths[j] for j in b) for b in batches)


def _grouped(lengths, batch_size, seed, epoch=0, group_batches=50):
    return seeded_order(len(lengths), epoch_seed(seed, epoch), lengths, batch_size, group_batches)


@pytest.mark.parametrize("n,batch_size", [(1000, 32), (37, 8), (5, 8), (64, 8), (1, 1)])
def test_length_grouped_is_a_permutation_with_the_short_batch_last(n, batch_size):
    rng = np.random.default_rng(n)
    lengths = rng.integers(1, 200, size=n).tolist()
    order = _grouped(lengths, batch_size, seed=7, group_batches=4)
    assert sorted(order) == list(range(n))
    # every batch (consecutive runs of batch_size) is a slice of one sorted group, which holds only if the short
    # remainder batch comes last
    for start in range(0, n, batch_size):
        batch = [lengths[j] for j in order[start:start + batch_size]]
        assert batch == sorted(batch, reverse=True)


def test_length_grouped_depends_only_on_seed_and_epoch():
    lengths = list(np.random.default_rng(0).integers(1, 100, size=500))
    assert _grouped(lengths, 16, seed=3) == _grouped(lengths, 16, seed=3)
    assert _grouped(lengths, 16, seed=3, epoch=1) != _grouped(lengths, 16, seed=3)
    assert _grouped(lengths, 16, seed=3, epoch=1) == _grouped(lengths, 16, seed=3, epoch=1)
    assert _grouped(lengths, 16, seed=4) != _grouped(lengths, 16, seed=3)


def test_length_grouped_pads_much_less_than_a_plain_shuffle():
    lengths = list(np.random.default_rng(1).lognormal(3, 0.7, size=4000).astype(int) + 1)
    plain = seeded_order(len(lengths), epoch_seed(0, 0))
    grouped = _grouped(lengths, 32, seed=0)
    assert _padding(grouped, lengths, 32) < 0.2 * _padding(plain, lengths, 32)


def test_length_grouped_batches_are_not_sorted_across_the_epoch():
    # batches are shuffled: the epoch must not run from long to short examples
    lengths = list(range(1, 3201))
    order = _grouped(lengths, 32, seed=0, group_batches=100)
    firsts = [lengths[order[i]] for i in range(0, len(order), 32)]
    assert firsts != sorted(firsts, reverse=True)
    assert firsts != sorted(firsts)
