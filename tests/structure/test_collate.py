import numpy as np
import pytest
import torch

from tokenizers_fixture import ALL
from structattn.dependency import Parse
from structattn.structure import (ExpansionRules, StructureCollator, build_word_structures, encode_words,
                                  example_word_mask, expand_to_tokens)


def _features(tok, sentences, labels):
    parses = [[Parse(words=w, heads=h, deprels=["dep"] * len(w), upos=["X"] * len(w))] for w, h in sentences]
    structs = build_word_structures(parses, None, "sla", m=1)
    feats = []
    for (words, _), st, lab in zip(sentences, structs, labels):
        (win,) = encode_words(tok, words)
        feats.append(dict(input_ids=win.input_ids, attention_mask=win.attention_mask,
                          token_type_ids=win.token_type_ids, token_word=win.token_word, structure=st, labels=lab))
    return feats


def test_collate_pads_and_builds_masks():
    tok = ALL["wordpiece"]()
    sents = [(["a", "very", "unbelievably", "good", "film"], [5, 3, 4, 5, 0]), (["ok"], [0])]
    feats = _features(tok, sents, [1, 0])
    batch = StructureCollator(tok.pad_token_id)(feats)
    B, T = batch["input_ids"].shape
    assert batch["structure_mask"].shape == (B, T, T) and batch["structure_mask"].dtype == torch.bool
    assert batch["labels"].tolist() == [1, 0]
    assert batch["structure_mask"].any(-1).all()
    # the short example: its real block equals the unpadded expansion, padding rows see the real tokens only
    n = len(feats[1]["input_ids"])
    direct = expand_to_tokens(example_word_mask(feats[1]["structure"], ExpansionRules()), feats[1]["token_word"],
                              ExpansionRules())
    assert np.array_equal(batch["structure_mask"][1, :n, :n].numpy(), direct)
    assert not batch["structure_mask"][1, :n, n:].any()
    assert batch["structure_mask"][1, n:, :n].all()
    assert (batch["attention_mask"][1, n:] == 0).all()


def test_token_labels_padded_with_ignore_index():
    tok = ALL["wordpiece"]()
    feats = _features(tok, [(["a", "b"], [0, 1]), (["c"], [0])], [[-100, 1, 2, -100], [-100, 3, -100]])
    batch = StructureCollator(tok.pad_token_id)(feats)
    assert batch["labels"].tolist()[1][-1] == -100 and batch["labels"].shape == batch["input_ids"].shape


def test_without_structure():
    tok = ALL["wordpiece"]()
    feats = _features(tok, [(["a"], [0])], [0.5])
    batch = StructureCollator(tok.pad_token_id, with_structure=False)(feats)
    assert "structure_mask" not in batch and batch["labels"].dtype == torch.float32


def test_five_thousand_word_document_is_windowed_and_batched():
    """A 5,000-word passage of many sentences: every word lands in a window, masks stay well formed."""
    tok = ALL["wordpiece"]()
    rng = np.random.default_rng(1)
    words, sentences = [], []
    while len(words) < 5000:
        n = int(rng.integers(5, 40))
        sent = [f"w{len(words) + i}" for i in range(n)]
        heads = [0] + [int(rng.integers(1, i + 1)) for i in range(1, n)]
        sentences.append(Parse(words=sent, heads=heads, deprels=["dep"] * n, upos=["X"] * n))
        words += sent
    (structure,) = build_word_structures([sentences], None, "sla", m=3)
    windows = encode_words(tok, words, max_length=128, stride=32, long_inputs="windows")
    covered = set()
    feats = []
    for w in windows:
        covered |= set(int(x) for x in w.token_word if x >= 0)
        feats.append(dict(input_ids=w.input_ids, attention_mask=w.attention_mask, token_type_ids=w.token_type_ids,
                          token_word=w.token_word, structure=structure))
    assert covered == set(range(len(words)))
    batch = StructureCollator(tok.pad_token_id)(feats[:16])
    assert batch["structure_mask"].any(-1).all()
    # words of different sentences never see each other (cross_sentence="none" by default)
    tw = np.asarray(feats[0]["token_word"])
    sent_of = np.repeat(np.arange(len(sentences)), [len(s) for s in sentences])
    m = batch["structure_mask"][0].numpy()
    for t in range(len(tw)):
        for u in range(len(tw)):
            if tw[t] >= 0 and tw[u] >= 0 and sent_of[tw[t]] != sent_of[tw[u]]:
                assert not m[t, u]


def _band(T, k):
    """|t - u| <= k over T positions, written out pair by pair (independent of the code under test)."""
    out = np.zeros((T, T), dtype=bool)
    for t in range(T):
        for u in range(T):
            out[t, u] = -k <= t - u <= k
    return out


@pytest.mark.parametrize("k", [0, 1, 3])
def test_token_window_is_the_band_over_token_positions(k):
    """window_unit="token": special tokens are positions like any other, words do not matter, padding rows
    get the band too (the model's padding mask hides padded keys)."""
    tok = ALL["wordpiece"]()
    feats = _features(tok, [(["a", "very", "unbelievably", "good", "film"], [5, 3, 4, 5, 0]), (["ok"], [0])], [1, 0])
    rules = ExpansionRules.for_relation("window", token_window=k)
    batch = StructureCollator(tok.pad_token_id, rules)(feats)
    B, T = batch["input_ids"].shape
    assert T > len(feats[1]["input_ids"])  # the second example is padded
    for b in range(B):
        assert np.array_equal(batch["structure_mask"][b].numpy(), _band(T, k))
    # the features' word structures play no part
    for f in feats:
        f["structure"] = None
    assert torch.equal(StructureCollator(tok.pad_token_id, rules)(feats)["structure_mask"], batch["structure_mask"])


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_bad_token_window(bad):
    with pytest.raises(ValueError, match="token_window"):
        ExpansionRules(token_window=bad)
