"""Multiple-choice features: the second segment, cutting the passage's end, joined structures, the collator."""
from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from structattn.errors import UserError
from structattn.dependency import Parse
from structattn.settings import DEFAULT_SPACY_MODEL, data_dir_candidate, default_encoder
from structattn.structure import ExpansionRules, build_word_structures, encode_words, token_mask
from structattn.structure.expand import PAD
from structattn.tasks.multiple_choice import MCQuestion, get_mc_task
from structattn.tasks.text_words import words_of
from structattn.structure.spec import StructureSpec
from structattn.sgnet.multiple_choice_features import (MultipleChoiceCollator, build_mc_features, encode_option, encode_pairs,
                                      join_structures, question_option_words, repair_words, token_counts,
                                      truncation_summary)

SDOI = StructureSpec("sdoi", {}, ExpansionRules.for_relation("sdoi"))
DATA = data_dir_candidate()


def _pipeline_installed() -> bool:
    try:
        from structattn.dependency.spacy_backend import SpacyParser

        SpacyParser(DEFAULT_SPACY_MODEL)
        return True
    except (UserError, ImportError):
        return False


needs_pipeline = pytest.mark.skipif(not _pipeline_installed(),
                                    reason=f"spaCy pipeline {DEFAULT_SPACY_MODEL} not installed")


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(default_encoder())


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "cache"))


LONG = ("The unbelievably tall lighthouse keeper walked along the shore every morning. He counted the boats, "
        "wrote their names in a notebook and waved at the fishermen. In winter the sea froze near the rocks, "
        "and nobody sailed for weeks. ") * 2
SHORT = "Tom has a red kite. He flies it in the park."


def mcq(qid, passage, question, options, label=0, group="middle"):
    return MCQuestion(qid=qid, passage=passage, question=question, options=options, label=label, group=group)


QUESTIONS = [mcq("long:0", LONG, "What did the keeper count?", ["boats", "fish", "stars", "rocks"], 0),
             mcq("long:1", LONG, "In winter the sea _ near the rocks.", ["froze", "boiled", "rose", "sang"], 0),
             mcq("short:0", SHORT, "What colour is the kite?", ["red", "blue", "green", "black"], 0)]


# ---------------------------------------------------------------------------------- second segment
def test_question_option_words():
    assert question_option_words("What is the best title?", "A Day Out") == \
        ["What", "is", "the", "best", "title", "?", "A", "Day", "Out"]
    # the option takes the first blank's place; text around a blank is split on its own
    assert question_option_words("He left because_.", "it rained") == ["He", "left", "because", "it", "rained", "."]
    assert question_option_words("___ is the capital.", "Paris") == ["Paris", "is", "the", "capital", "."]
    assert question_option_words("David is   _   and Joy is   _", "tall; short") == \
        ["David", "is", "tall", ";", "short", "and", "Joy", "is", "_"]


# ------------------------------------------------------------------------------------ structures
def _parse(words, heads, upos=None):
    return Parse(words=words, heads=heads, deprels=["dep"] * len(words), upos=upos or ["X"] * len(words))


def test_join_structures_equals_pair_build():
    passage = [_parse(["a", "b", "c"], [2, 0, 2], ["X", "X", "PUNCT"]), _parse(["d", "e"], [0, 1])]
    second = [_parse(["f", "g", "h", "i"], [0, 1, 4, 1]), _parse(["j"], [0], ["PUNCT"])]
    (pair,) = build_word_structures([passage], [second], "sdoi")
    (pa,) = build_word_structures([passage], None, "sdoi")
    (pb,) = build_word_structures([second], None, "sdoi")
    joined = join_structures(pa, pb)
    assert joined.segments == pair.segments == [0, 0, 1, 1]
    assert len(joined.blocks) == 4 and all(np.array_equal(x, y) for x, y in zip(joined.blocks, pair.blocks))
    assert np.array_equal(joined.punct, pair.punct) and np.array_equal(joined.parents, pair.parents)
    assert joined.parents.tolist() == [1, -1, 1, -1, 3, -1, 5, 8, 5, -1]
    assert joined.blocks[0] is pa.blocks[0]  # the passage's blocks are shared, not copied


# ------------------------------------------------------------------------------------ encoding
def _encode(tok, passage_words, second_words, max_length):
    return encode_option(tok, passage_words, second_words, max_length=max_length, where="t")


def test_passage_loses_whole_words_from_its_end(tok):
    passage = LONG.split()
    second = question_option_words("In winter the sea _ near the rocks.", "froze")
    feat, dropped = _encode(tok, passage, second, 40)
    # brute force: the most whole passage words that fit beside the whole second segment
    def ids(k):
        return tok(passage[:k], second, is_split_into_words=True)["input_ids"]
    keep = max(k for k in range(1, len(passage) + 1) if len(ids(k)) <= 40)
    assert dropped == len(passage) - keep > 0
    assert feat["input_ids"].tolist() == ids(keep) and len(feat["input_ids"]) <= 40
    tw = feat["token_word"]
    n_second = len(second)
    # segment 1 is whole and numbered after the *whole* passage; the passage part is words 0..keep-1
    assert sorted(set(tw[tw >= len(passage)].tolist())) == list(range(len(passage), len(passage) + n_second))
    assert set(tw[(tw >= 0) & (tw < len(passage))].tolist()) == set(range(keep))
    assert feat["token_type_ids"].tolist().count(1) == len(tok(second, is_split_into_words=True,
                                                               add_special_tokens=False)["input_ids"]) + 1


def test_input_that_fits_is_not_cut(tok):
    passage, second = SHORT.split(), ["What", "colour", "?", "red"]
    feat, dropped = _encode(tok, passage, second, 128)
    assert dropped == 0
    assert feat["input_ids"].tolist() == tok(passage, second, is_split_into_words=True)["input_ids"]


def test_batched_encoding_equals_encode_words(tok):
    # the reference: the library's encode_words on inputs that fit (no cut), segment 1 renumbered by the offset
    pairs = [(SHORT.split(), ["What", "colour", "?", "red"]), (LONG.split()[:30], ["Who", "?", "keeper"]),
             (["One", "\u200b", "word"], ["a", "\u200b", "b"])]  # a word with no sub-word becomes [UNK]
    with pytest.warns(UserWarning, match="map to no sub-word token"):
        fixed = [(repair_words(tok, a, token_counts(tok, [a])[0], "t")[0],
                  repair_words(tok, b, token_counts(tok, [b])[0], "t")[0]) for a, b in pairs]
    assert fixed[2] == (["One", "[UNK]", "word"], ["a", "[UNK]", "b"])
    offsets = [len(a) + 5 for a, _ in pairs]
    got = encode_pairs(tok, [a for a, _ in fixed], [b for _, b in fixed], offsets)
    for (a, b), offset, feat in zip(pairs, offsets, got):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (win,) = encode_words(tok, a, b, max_length=512)
        want_tw = np.where(win.token_word >= len(a), win.token_word + offset - len(a), win.token_word)
        assert feat["input_ids"].tolist() == win.input_ids
        assert feat["attention_mask"].tolist() == win.attention_mask
        assert feat["token_type_ids"].tolist() == win.token_type_ids
        assert feat["token_word"].tolist() == want_tw.tolist()
    with pytest.warns(UserWarning):
        feat, dropped = encode_option(tok, pairs[2][0], pairs[2][1], max_length=64)
    assert feat["input_ids"].tolist() == got[2]["input_ids"].tolist() and dropped == 0


def test_too_long_question_or_first_word_raises(tok):
    with pytest.raises(UserError, match=r"t: the question with this option alone needs \d+ sub-word tokens"):
        _encode(tok, ["Hi", "."], ["word"] * 40, 32)
    with pytest.raises(UserError, match=r"long:0 option 0: the question with this option alone needs"):
        build_mc_features(QUESTIONS, tok, SDOI, max_length=8, show_progress=False)  # fails before parsing
    long_word = "antidisestablishmentarianism" * 3
    with pytest.raises(UserError, match="the passage's first word needs"):
        _encode(tok, [long_word, "."], ["word"] * 20, 32)


def test_features_without_structure_and_summary(tok, caplog):
    with caplog.at_level(logging.INFO, logger="structattn.sgnet.multiple_choice_features"):
        feats = build_mc_features(QUESTIONS, tok, None, max_length=64, split="dev", show_progress=False)
    assert [f["qid"] for f in feats] == ["long:0", "long:1", "short:0"]
    assert [f["example_index"] for f in feats] == [0, 1, 2] and [f["label"] for f in feats] == [0, 0, 0]
    assert all(len(f["options"]) == 4 and all(o["structure"] is None for o in f["options"]) for f in feats)
    assert all(len(o["input_ids"]) <= 64 for f in feats for o in f["options"])
    cut = [f["passage_words_dropped"] for f in feats]
    assert all(d > 0 for d in cut[0] + cut[1]) and cut[2] == [0, 0, 0, 0]
    assert f"dev: 2 of 3 questions (8 of 12 question-option inputs) longer than 64 tokens: passage cut from its " \
           f"end, {sum(cut[0] + cut[1])} passage words dropped" in caplog.text


# ------------------------------------------------------------------------------------ collator
def test_collator_pads_options_to_one_length(tok):
    feats = build_mc_features(QUESTIONS, tok, None, max_length=64, show_progress=False)
    batch = MultipleChoiceCollator(tok.pad_token_id)(feats)
    T = max(len(o["input_ids"]) for f in feats for o in f["options"])
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids", "labels"}
    assert batch["input_ids"].shape == batch["token_type_ids"].shape == (3, 4, T)
    assert batch["labels"].tolist() == [0, 0, 0]
    for b, f in enumerate(feats):
        for c, o in enumerate(f["options"]):
            n = len(o["input_ids"])
            assert batch["input_ids"][b, c, :n].tolist() == o["input_ids"].tolist()
            assert (batch["input_ids"][b, c, n:] == tok.pad_token_id).all()
            assert batch["attention_mask"][b, c].tolist() == [1] * n + [0] * (T - n)
    padded = MultipleChoiceCollator(tok.pad_token_id, pad_to_multiple_of=16)(feats[2:])
    assert padded["input_ids"].shape[-1] % 16 == 0


def test_collator_refuses_inconsistent_batches(tok):
    feats = build_mc_features(QUESTIONS[1:], tok, None, max_length=64, show_progress=False)
    short = dict(feats[1], options=feats[1]["options"][:3])
    with pytest.raises(UserError, match="have 3 and 4 options"):
        MultipleChoiceCollator(tok.pad_token_id)([feats[0], short])
    with pytest.raises(UserError, match="some questions of the batch are labelled"):
        MultipleChoiceCollator(tok.pad_token_id)([feats[0], dict(feats[1], label=None)])
    assert "labels" not in MultipleChoiceCollator(tok.pad_token_id)([dict(f, label=None) for f in feats])
    with pytest.raises(UserError, match="carry no word structures"):
        MultipleChoiceCollator(tok.pad_token_id, SDOI.rules)(feats)


def test_batch_fits_a_stock_multiple_choice_model(tok):
    from transformers import BertConfig, BertForMultipleChoice

    torch.manual_seed(0)
    model = BertForMultipleChoice(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1,
                                             num_attention_heads=4, intermediate_size=64, max_position_embeddings=64))
    batch = MultipleChoiceCollator(tok.pad_token_id)(build_mc_features(QUESTIONS, tok, max_length=64,
                                                                       show_progress=False))
    out = model(**batch)
    assert out.logits.shape == (3, 4) and torch.isfinite(out.loss)


# ------------------------------------------------------------------------- SDOI with real parses
@needs_pipeline
def test_sdoi_mask_is_cut_with_the_passage(tok, cache):
    full = build_mc_features(QUESTIONS, tok, SDOI, max_length=256, show_progress=False)
    cut = build_mc_features(QUESTIONS, tok, SDOI, max_length=64, show_progress=False)
    assert all(d == 0 for f in full for d in f["passage_words_dropped"])
    # one parse per passage: every option of both questions on LONG shares the passage's blocks
    first = full[0]["options"][0]["structure"].blocks[0]
    assert all(o["structure"].blocks[0] is first for f in full[:2] for o in f["options"])
    batch = MultipleChoiceCollator(tok.pad_token_id, SDOI.rules)(cut)
    T = batch["input_ids"].shape[-1]
    assert batch["structure_mask"].shape == (3, 4, T, T) and batch["structure_mask"].dtype == torch.bool
    assert batch["structure_mask"].any(-1).all()  # no row without a key
    for b in range(3):
        for c in range(4):
            f_full, f_cut = full[b]["options"][c], cut[b]["options"][c]
            st = f_cut["structure"]
            tw = np.full(T, PAD)
            tw[:len(f_cut["token_word"])] = f_cut["token_word"]
            mask = batch["structure_mask"][b, c].numpy()
            assert np.array_equal(mask, token_mask(st, tw, SDOI.rules))
            # the cut input's mask is the full input's mask on the tokens it kept
            seg1 = np.asarray(f_cut["token_type_ids"]) == 1
            first_seg1 = int(np.argmax(seg1))
            shift = len(f_full["input_ids"]) - len(f_cut["input_ids"])
            pos = np.arange(len(f_cut["input_ids"]))
            pos[first_seg1 - 1:] += shift  # the [SEP] after the passage and segment 1 move by the cut tokens
            assert np.array_equal(f_full["input_ids"][pos], f_cut["input_ids"])
            n = len(pos)
            full_mask = token_mask(f_full["structure"], f_full["token_word"], SDOI.rules)
            assert np.array_equal(full_mask[np.ix_(pos, pos)], mask[:n, :n])
            # SG-Net's rules: no link between passage and question; special tokens see only themselves
            passage_tok = (np.asarray(f_cut["token_word"]) >= 0) & ~seg1
            assert not mask[:n, :n][np.ix_(seg1 & (np.asarray(f_cut["token_word"]) >= 0), passage_tok)].any()
            assert mask[0, :n].tolist() == [True] + [False] * (n - 1)
            assert (cut[b]["passage_words_dropped"][c] > 0) == (b < 2)  # only LONG is cut


@needs_pipeline
def test_features_build_without_spacy_once_the_caches_hold_them(tok, cache, monkeypatch):
    """Words and parses both come from the on-disk caches: a machine without spaCy (a GPU box that was sent the
    cache) builds the very same features."""
    import importlib.metadata

    from structattn.dependency import spacy_backend

    with_spacy = build_mc_features(QUESTIONS, tok, SDOI, max_length=64, show_progress=False)

    def not_installed(model):
        raise UserError(f"spaCy pipeline {model!r} is not installed")

    real_version = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda name: (_ for _ in ()).throw(importlib.metadata.PackageNotFoundError(name))
                        if name == "spacy" else real_version(name))
    monkeypatch.setattr(spacy_backend, "_resolve_model", not_installed)
    monkeypatch.setattr("structattn.tasks.text_words._tokenize",
                        lambda text: pytest.fail(f"spaCy was asked to split {text!r}"))
    from structattn.sgnet import multiple_choice_features as multiple_choice_data

    multiple_choice_data._parser.cache_clear()  # the parser object made above knew spaCy
    without = build_mc_features(QUESTIONS, tok, SDOI, max_length=64, show_progress=False)
    multiple_choice_data._parser.cache_clear()
    for f, g in zip(with_spacy, without):
        assert f["passage_words_dropped"] == g["passage_words_dropped"]
        for o, p in zip(f["options"], g["options"]):
            assert np.array_equal(o["input_ids"], p["input_ids"]) and np.array_equal(o["token_word"], p["token_word"])
            assert np.array_equal(o["structure"].parents, p["structure"].parents)
            assert o["option_words"] == p["option_words"]


# ---------------------------------------------------------------------------------------- real data
@pytest.mark.skipif(not (DATA / "race" / "dev" / "middle").is_dir(), reason=f"data not found: {DATA / 'race'}")
@needs_pipeline
def test_race_dev_questions(tok, cache, capsys):
    qs = get_mc_task("race_m").read("dev", data_dir=DATA, limit=4)
    feats = build_mc_features(qs, tok, SDOI, max_length=128, split="dev", show_progress=True)
    assert "dev: 4 of 4 questions (16 of 16 question-option inputs) longer than 128 tokens" in capsys.readouterr().err
    for q, f in zip(qs, feats):
        for option, o in zip(q.options, f["options"]):
            assert len(o["input_ids"]) <= 128
            second = question_option_words(q.question, option)
            want = tok(second, is_split_into_words=True, add_special_tokens=False)["input_ids"]
            seg1 = o["input_ids"][o["token_type_ids"] == 1][:-1].tolist()  # without the last [SEP]
            assert seg1 == want  # question and option kept whole
            assert o["structure"].num_words == len(words_of(q.passage)) + len(second)
            assert o["structure"].segments[-1] == 1 and o["structure"].segments[0] == 0
    batch = MultipleChoiceCollator(tok.pad_token_id, SDOI.rules)(feats)
    assert batch["structure_mask"].shape[:2] == (4, 4) and batch["labels"].tolist() == [q.label for q in qs]


# ---------------------------------------------------------------------------------- worker processes
def _same_features(one: list[dict], many: list[dict]) -> None:
    assert len(one) == len(many)
    for a, b in zip(one, many):
        assert {k: a[k] for k in a if k != "options"} == {k: b[k] for k in b if k != "options"}
        for x, y in zip(a["options"], b["options"], strict=True):
            assert x.keys() == y.keys()
            for key in x:
                if key == "structure" and x[key] is not None:
                    assert x[key].segments == y[key].segments
                    assert np.array_equal(x[key].parents, y[key].parents)
                    assert all(np.array_equal(p, q) for p, q in zip(x[key].blocks, y[key].blocks, strict=True))
                else:
                    assert np.array_equal(np.asarray(x[key]), np.asarray(y[key])), key


PASSAGES = [LONG, SHORT, "Anna bakes bread on Sundays. Her brother eats it warm.", LONG[:120] + " The end."]
MANY = [mcq(f"p{p}:{j}", text, f"Question {j} about passage {p}?", ["one", "two words", "three", "four"], j % 4)
        for p, text in enumerate(PASSAGES) for j in range(3)]


@pytest.mark.parametrize("spec", [None, pytest.param(SDOI, marks=needs_pipeline)])
def test_worker_processes_build_the_same_features_as_one(tok, cache, spec, caplog):
    from structattn.sgnet.multiple_choice_features import build_mc_features_parallel, passage_chunks

    bounds = passage_chunks(MANY, 8)
    assert bounds[0][0] == 0 and bounds[-1][1] == len(MANY) and len(bounds) == len(PASSAGES)
    assert all(MANY[start].passage != MANY[start - 1].passage for start, _ in bounds[1:])   # whole passages
    one = build_mc_features(MANY, tok, spec, max_length=64, show_progress=False)
    with caplog.at_level(logging.INFO, logger="structattn.sgnet.multiple_choice_features"):
        many = build_mc_features_parallel(MANY, tok, spec, workers=2, max_length=64, split="many",
                                          show_progress=False)
    _same_features(one, many)
    assert [f["example_index"] for f in many] == list(range(len(MANY)))
    assert any(d > 0 for f in many for d in f["passage_words_dropped"])   # the cut inputs are counted once, here
    assert [r.getMessage() for r in caplog.records if "longer than 64 tokens" in r.getMessage()] == \
        [truncation_summary(one, "many", 64)]



@needs_pipeline
def test_one_build_gives_the_structures_of_two(tok, cache):
    """SG-Net beside a mechanism: ``sg_structure`` in the same build equals the structure of a build of its own."""
    sla = StructureSpec("sla", {"m": 2}, ExpansionRules.for_relation("sla"))
    both = build_mc_features(QUESTIONS, tok, sla, sg_structure=SDOI, max_length=64, show_progress=False)
    alone = {spec.relation: build_mc_features(QUESTIONS, tok, spec, max_length=64, show_progress=False)
             for spec in (sla, SDOI)}
    for b, feature in enumerate(both):
        for c, option in enumerate(feature["options"]):
            assert np.array_equal(option["input_ids"], alone["sla"][b]["options"][c]["input_ids"])
            assert "sg_structure" not in alone["sla"][b]["options"][c]
            tw = np.asarray(option["token_word"])
            for key, spec in (("structure", sla), ("sg_structure", SDOI)):
                expected = alone[spec.relation][b]["options"][c]["structure"]
                assert np.array_equal(token_mask(option[key], tw, spec.rules), token_mask(expected, tw, spec.rules))
