"""Hypothesis strategies: random dependency trees (projective or not)."""
from hypothesis import strategies as st


@st.composite
def random_trees(draw, min_size=1, max_size=30):
    """Heads (1-based, 0 = root) of a uniformly shaped random tree over n words.

    Nodes are attached in a random order to an already attached node, so every
    tree shape, non-projective ones included, can occur.
    """
    n = draw(st.integers(min_size, max_size))
    order = draw(st.permutations(list(range(1, n + 1))))
    heads = [0] * n
    for pos, node in enumerate(order):
        if pos == 0:
            heads[node - 1] = 0
        else:
            heads[node - 1] = order[draw(st.integers(0, pos - 1))]
    return heads
