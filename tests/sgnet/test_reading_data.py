"""Span-QA features: windows, answer labels, counts, ancestor links cut by windows, batching, and decoding the
labels back to the answers (with the real WordPiece tokenizer of the default encoder; parses are hand-made random
trees except in the spaCy test)."""
from __future__ import annotations

import random
from functools import lru_cache

import numpy as np
import pytest
import torch

from fixtures import label_logits
from structattn.sgnet.span_qa import predict_answers
from structattn.dependency import Parse
from structattn.settings import DEFAULT_SPACY_MODEL, data_dir_candidate
from structattn.structure import ExpansionRules, build_word_structures, token_mask
from structattn.tasks.squad import SQUAD2_FILE, SquadQuestion
from structattn.tasks.text_words import words_with_offsets
from structattn.structure.spec import StructureSpec
from structattn.sgnet.reading_features import (QAParses, SpanQACollator, build_qa_features, cut_ancestor_links,
                                      parse_questions)

SDOI = StructureSpec(relation="sdoi", options={}, rules=ExpansionRules.for_relation("sdoi"))
VOCAB = ["the", "Normans", "gave", "their", "name", "to", "Normandy", "unbelievably", "tokenization", "region",
         "in", "France", "during", "century", "Rollo", "Viking", "leader"]


@lru_cache(maxsize=1)
def tokenizer():
    from transformers import AutoTokenizer

    from structattn.settings import default_encoder

    return AutoTokenizer.from_pretrained(default_encoder())


def passage(rng: random.Random, sentences: int) -> str:
    return " ".join(" ".join(rng.choice(VOCAB) for _ in range(rng.randint(4, 12))) + " ." for _ in range(sentences))


def question(qid, context, answer=None, paragraph=0, text="Who gave their name to Normandy ?", answers=None):
    """A SquadQuestion; ``answer`` = (first word, last word) of the context's words, or None = unanswerable."""
    if answers is None and answer is not None:
        _, spans = words_with_offsets(context)
        start, end = spans[answer[0]][0], spans[answer[1]][1]
        answers = [(context[start:end], start)]
    answers = answers or []
    return SquadQuestion(qid=qid, title="T", question=text, context=context, answers=answers,
                         is_impossible=not answers, paragraph=paragraph)


def random_tree(rng: random.Random, n: int) -> list[int]:
    """1-based heads of a random tree over n words (0 = root)."""
    order = list(range(n))
    rng.shuffle(order)
    heads = [0] * n
    for k in range(1, n):
        heads[order[k]] = order[rng.randrange(k)] + 1
    return heads


def random_parse(rng: random.Random, words: list[str]) -> list[Parse]:
    """Random sentence split and random trees over ``words``."""
    out, start = [], 0
    while start < len(words):
        end = min(len(words), start + rng.randint(1, 9))
        w = words[start:end]
        out.append(Parse(words=tuple(w), heads=tuple(random_tree(rng, len(w))), deprels=("dep",) * len(w),
                         upos=("X",) * len(w)))
        start = end
    return out


def random_parses(rng, questions) -> QAParses:
    paragraphs = {}
    for q in questions:
        paragraphs.setdefault(q.paragraph, random_parse(rng, words_with_offsets(q.context)[0]))
    return QAParses([random_parse(rng, words_with_offsets(q.question)[0]) for q in questions], paragraphs)


# ------------------------------------------------------------------------------------------ labels and windows
def test_windows_repeat_the_question_and_labels_mark_the_answer():
    rng = random.Random(0)
    context = passage(rng, 8)
    words, spans = words_with_offsets(context)
    qs = [question("a", context, answer=(40, 42)), question("n", context)]
    out = build_qa_features(qs, tokenizer(), max_length=48, stride=16, show_progress=False)
    tok = tokenizer()
    q_words = words_with_offsets(qs[0].question)[0]
    n_q = len(q_words)
    assert [c.offset for c in out.contexts] == [n_q, n_q] and out.contexts[0].words == words
    assert out.answers == [(40, 42), None]
    holding = 0
    for f in out.features:
        tw = f["token_word"]
        assert len(f["input_ids"]) <= 48 and tw[0] == -1
        assert sorted(set(tw[(tw >= 0) & (tw < n_q)].tolist())) == list(range(n_q))  # the whole question
        s, e = f["start_positions"], f["end_positions"]
        present = set(tw[tw >= n_q].tolist())
        if f["example_index"] == 1:
            assert (s, e) == (0, 0)
        elif {40 + n_q, 42 + n_q} <= present:
            holding += 1
            assert tw[s] == 40 + n_q and tw[s - 1] != tw[s]  # first sub-word of the first word
            assert tw[e] == 42 + n_q and tw[e + 1] != tw[e]  # last sub-word of the last word
            assert tok.decode(f["input_ids"][s:e + 1]) == tok.decode(tok(qs[0].answers[0][0],
                                                                          add_special_tokens=False)["input_ids"])
        else:
            assert (s, e) == (0, 0)
    n_windows = sum(f["example_index"] == 0 for f in out.features)
    c = out.counts
    assert n_windows > 2 and holding >= 1
    assert (c.questions, c.answerable, c.windows, c.long) == (2, 1, 2 * n_windows, 2)
    assert c.answer_outside == n_windows - holding
    assert c.cut_links is None and "not counted" in c.summary()


def test_unaligned_answers_are_counted_relabelled_or_left_out():
    context = "Rollo led the Vikings to Normandy in 911 ."
    words, spans = words_with_offsets(context)
    good = ("Normandy", context.index("Normandy"))
    wrong = ("Normandy", 0)  # the text is not at answer_start: cannot be aligned
    qs = [question("first-bad", context, answers=[wrong, good]),
          question("all-bad", context, answers=[wrong]),
          question("fine", context, answers=[good, wrong]),
          question("none", context)]
    for training in (False, True):
        out = build_qa_features(qs, tokenizer(), training=training, show_progress=False)
        c = out.counts
        assert (c.answerable, c.unaligned, c.relabelled, c.unlabelled) == (3, 2, 1, 1)
        assert out.answers == [(5, 5), None, (5, 5), None]
        by_q = {out.contexts[f["example_index"]].qid: f for f in out.features}
        assert by_q["first-bad"]["token_word"][by_q["first-bad"]["start_positions"]] == 5 + out.contexts[0].offset
        if training:
            assert "all-bad" not in by_q and c.left_out_windows == 1 and "training windows left out" in c.summary()
        else:
            assert (by_q["all-bad"]["start_positions"], by_q["all-bad"]["end_positions"]) == (0, 0)
            assert c.left_out_windows == 0


def test_gold_logits_decode_to_the_answers():
    rng = random.Random(1)
    ctx1, ctx2 = passage(rng, 8), passage(rng, 2)
    qs = [question("a", ctx1, answer=(3, 5)), question("b", ctx1, answer=(35, 35)), question("n", ctx1),
          question("c", ctx2, answer=(0, 1), paragraph=1)]
    out = build_qa_features(qs, tokenizer(), max_length=40, stride=12, show_progress=False)
    starts, ends = label_logits(out.features)  # logits that put all mass on the labels
    preds, na, _ = predict_answers(out.contexts, out.features, starts, ends)
    assert preds == {"a": qs[0].answers[0][0], "b": qs[1].answers[0][0], "n": "", "c": qs[3].answers[0][0]}
    assert na["n"] == 20.0 and na["a"] == -20.0


# ------------------------------------------------------------------------------------------ parses and structure
def brute_cut_links(features, questions, parses):
    """Walk every word of every window up its tree and count the ancestors missing from the window."""
    total = 0
    for f in features:
        q = questions[f["example_index"]]
        sentences = parses.questions[f["example_index"]] + parses.paragraphs[q.paragraph]
        parent, offset = {}, 0
        for p in sentences:
            for i, h in enumerate(p.heads):
                parent[offset + i] = offset + h - 1 if h else None
            offset += len(p)
        present = set(f["token_word"][f["token_word"] >= 0].tolist())
        for i in present:
            j = parent[i]
            while j is not None:
                total += j not in present
                j = parent[j]
    return total


@pytest.mark.parametrize("seed", range(3))
def test_cut_ancestor_links_against_brute_force(seed):
    rng = random.Random(seed)
    ctx = [passage(rng, 5), passage(rng, 7)]
    qs = [question(f"q{i}", ctx[i % 2], paragraph=i % 2) for i in range(4)]
    parses = random_parses(rng, qs)
    out = build_qa_features(qs, tokenizer(), SDOI, max_length=32, stride=8, parses=parses, show_progress=False)
    expected = brute_cut_links(out.features, qs, parses)
    assert expected > 0 and out.counts.cut_links == expected
    assert f"{expected:,} (word, dependency ancestor) links cut" in out.counts.summary()
    # a window holding every word cuts nothing
    anc = np.tril(np.ones((3, 3), dtype=bool))  # word i sees 0..i: a chain rooted at word 0
    assert cut_ancestor_links(np.array([-1, 0, 1, 2, -1]), [(0, anc)]) == 0
    assert cut_ancestor_links(np.array([-1, 1, 2, -1]), [(0, anc)]) == 2  # words 1 and 2 lose word 0


def test_structures_and_collated_masks():
    rng = random.Random(3)
    ctx = passage(rng, 6)
    qs = [question("a", ctx, answer=(2, 3)), question("b", ctx, text="Where ?")]
    parses = random_parses(rng, qs)
    plain = StructureSpec(relation="sla", options={"m": 1}, rules=ExpansionRules.for_relation("sla"))
    out = build_qa_features(qs, tokenizer(), plain, sg_structure=SDOI, max_length=40, stride=10, parses=parses,
                            show_progress=False)
    expected = build_word_structures(parses.questions, [parses.paragraphs[0]] * 2, "sdoi")
    for f in out.features:
        st = f["sg_structure"]
        ref = expected[f["example_index"]]
        assert all(np.array_equal(a, b) for a, b in zip(st.blocks, ref.blocks)) and st.segments == ref.segments
        assert f["structure"] is not st
    collate = SpanQACollator(tokenizer().pad_token_id, plain.rules, SDOI.rules)
    feats = out.features[:3]
    batch = collate(feats)
    B, T = batch["input_ids"].shape
    assert batch["structure_mask"].shape == batch["sg_mask"].shape == (B, T, T)
    for b, f in enumerate(feats):
        n = len(f["token_word"])
        tw = np.full(T, -2)
        tw[:n] = f["token_word"]
        assert torch.equal(batch["sg_mask"][b], torch.from_numpy(token_mask(f["sg_structure"], tw, SDOI.rules)))
        assert torch.equal(batch["structure_mask"][b], torch.from_numpy(token_mask(f["structure"], tw, plain.rules)))
        assert batch["sg_tokens"][b].tolist() == (tw >= 0).tolist()
        # SG-Net's rules: [CLS] sees only itself
        assert batch["sg_mask"][b, 0].nonzero().flatten().tolist() == [0]
    assert batch["start_positions"].tolist() == [f["start_positions"] for f in feats]
    assert batch["end_positions"].tolist() == [f["end_positions"] for f in feats]
    bare = SpanQACollator(tokenizer().pad_token_id)(feats)
    assert set(bare) == {"input_ids", "attention_mask", "token_type_ids", "start_positions", "end_positions"}


def test_bad_inputs():
    rng = random.Random(4)
    ctx = passage(rng, 2)
    qs = [question("a", ctx), question("b", ctx + " more")]  # same paragraph index, other text
    with pytest.raises(ValueError, match="paragraph 0 has another context"):
        build_qa_features(qs, tokenizer(), show_progress=False)
    qs = [question("a", ctx)]
    parses = random_parses(rng, [question("a", ctx, text="Something else entirely ?")])
    with pytest.raises(ValueError, match="its parse holds other words"):
        build_qa_features(qs, tokenizer(), SDOI, parses=parses, show_progress=False)


# ------------------------------------------------------------------------------------------ real parser
def _pipeline_installed() -> bool:
    import spacy.util

    return spacy.util.is_package(DEFAULT_SPACY_MODEL)


@pytest.mark.skipif(not _pipeline_installed(), reason=f"spaCy pipeline {DEFAULT_SPACY_MODEL} not installed")
def test_parse_each_paragraph_once_with_spacy(tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "cache"))
    ctx = "The Normans gave their name to Normandy. It is a region in France."
    qs = [question("a", ctx, answer=(6, 6)), question("b", ctx, text="What is Normandy?"),
          question("c", "Rollo was a Viking.", paragraph=1, text="Who was Rollo?")]
    parses = parse_questions(qs, show_progress=False)
    assert sorted(parses.paragraphs) == [0, 1] and len(parses.paragraphs[0]) == 2  # two sentences
    out = build_qa_features(qs, tokenizer(), sg_structure=SDOI, max_length=20, stride=4, show_progress=False)
    assert out.counts.windows > 3 and out.counts.cut_links is not None
    assert [[p.words for p in ps] for ps in out.parses.questions] == [[p.words for p in ps] for ps in parses.questions]


# ------------------------------------------------------------------------------------------ real data
SQUAD2 = data_dir_candidate() / SQUAD2_FILE


@pytest.mark.skipif(not SQUAD2.exists(), reason=f"data not found: {SQUAD2} (set STRUCTATTN_DATA to the shared "
                                                "data folder)")
def test_squad2_first_questions_decode_from_gold_labels():
    from structattn.tasks.squad import load_squad, read_squad
    from structattn.tasks.squad_eval import evaluate

    dataset = load_squad(SQUAD2)
    dataset = {"version": dataset["version"], "data": dataset["data"][:1]}
    dataset["data"][0]["paragraphs"] = dataset["data"][0]["paragraphs"][:8]
    qs = read_squad(dataset)
    out = build_qa_features(qs, tokenizer(), max_length=128, stride=32, training=True, show_progress=False)
    assert out.counts.unaligned == 0 and out.counts.long > 0
    starts, ends = label_logits(out.features)
    preds, _, _ = predict_answers(out.contexts, out.features, starts, ends)
    assert evaluate(dataset, preds)["exact"] == 100.0


# ------------------------------------------------------------------------------------------ worker processes
def test_worker_processes_build_the_same_features_as_one(tmp_path, monkeypatch):
    from structattn.sgnet.reading_features import _chunks, build_qa_features_parallel

    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path))
    rng = random.Random(3)
    qs = []
    for p in range(7):   # paragraphs of 1-3 questions, long enough for several windows, some unanswerable
        ctx = passage(rng, rng.randint(2, 6))
        for j in range(rng.randint(1, 3)):
            n = len(words_with_offsets(ctx)[0])
            first = rng.randrange(n - 1)
            qs.append(question(f"q{p}-{j}", ctx, answer=(first, first + 1) if j != 1 else None, paragraph=p))
    bounds = _chunks(qs, 4)
    assert bounds[0][0] == 0 and bounds[-1][1] == len(qs)
    assert all(qs[start].paragraph != qs[start - 1].paragraph for start, _ in bounds[1:])   # whole paragraphs
    window = StructureSpec(relation="window", options={"k": 2}, rules=ExpansionRules.for_relation("window"))
    for training in (False, True):
        one = build_qa_features(qs, tokenizer(), window, max_length=40, stride=12, training=training,
                                show_progress=False)
        many = build_qa_features_parallel(qs, tokenizer(), window, workers=2, max_length=40, stride=12,
                                          training=training, show_progress=False)
        assert one.counts == many.counts and one.counts.windows > len(qs)
        assert one.contexts == many.contexts and one.answers == many.answers
        assert len(one.features) == len(many.features)
        for a, b in zip(one.features, many.features):
            assert a.keys() == b.keys()
            for key in a:
                if key == "structure":
                    assert a[key].segments == b[key].segments
                    assert all(np.array_equal(x, y) for x, y in zip(a[key].blocks, b[key].blocks, strict=True))
                else:
                    assert np.array_equal(np.asarray(a[key]), np.asarray(b[key])), key
