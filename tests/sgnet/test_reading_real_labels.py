"""The labels of real SQuAD 1.1 and 2.0 training windows: a labelled start/end decodes, through the words' character
offsets, to the gold answer; a window that does not hold the whole answer, and every window of an unanswerable
question, points at the null position 0; and the labels, read back as logits, decode to the gold answers through
the span head's decoding (null score and best span over windows). Runs on the first few hundred questions of the
train files with the default encoder's tokenizer; prints how many answerable questions have no window holding
their answer."""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from fixtures import label_logits
from structattn.sgnet.span_qa import predict_answers
from structattn.settings import data_dir_candidate
from structattn.tasks.squad import SQUAD2_FILE, SQUAD11_TRAIN_FILE, answer_word_span, get_qa_task, read_squad
from structattn.tasks.squad_eval import evaluate
from structattn.sgnet.reading_features import build_qa_features
from structattn.sgnet.reading import restrict_dataset

N_QUESTIONS = 300
DATA = data_dir_candidate()


@lru_cache(maxsize=1)
def tokenizer():
    from transformers import AutoTokenizer

    from structattn.settings import default_encoder

    return AutoTokenizer.from_pretrained(default_encoder())


@lru_cache(maxsize=2)
def first_train_questions(task: str) -> tuple[list, dict]:
    """The first N_QUESTIONS questions of ``task``'s train split and the SQuAD JSON holding exactly them. SQuAD 1.1
    train (87,599 questions) is cut to its first articles before it is checked, which is most of the time here."""
    if task == "squad11":
        import json

        full = json.loads((DATA / SQUAD11_TRAIN_FILE).read_text(encoding="utf-8"))
        dataset = {"version": full["version"], "data": []}
        for article in full["data"]:
            if sum(len(p["qas"]) for a in dataset["data"] for p in a["paragraphs"]) >= N_QUESTIONS:
                break
            dataset["data"].append(article)
        questions = read_squad(dataset)[:N_QUESTIONS]
    else:
        split = get_qa_task(task).read("train")
        questions, dataset = split.questions[:N_QUESTIONS], split.dataset
    return questions, restrict_dataset(dataset, {q.qid for q in questions})


@pytest.mark.parametrize("task, file, max_length, stride", [
    ("squad11", SQUAD11_TRAIN_FILE, 384, 128),  # the span-QA defaults
    ("squad2", SQUAD2_FILE, 384, 128),
    ("squad11", SQUAD11_TRAIN_FILE, 128, 32),  # short windows: many hold no answer, some answers straddle two
    ("squad2", SQUAD2_FILE, 128, 32),
])
def test_training_labels_decode_to_the_gold_answers(task, file, max_length, stride):
    if not (DATA / file).exists():
        pytest.skip(f"data not found: {DATA / file} (set STRUCTATTN_DATA to the shared data folder)")
    questions, dataset = first_train_questions(task)
    built = build_qa_features(questions, tokenizer(), max_length=max_length, stride=stride, training=True,
                              show_progress=False)
    assert built.counts.unlabelled == 0  # every answerable question of these has an alignable gold answer
    exact = containing = 0
    holding: set[int] = set()
    for f in built.features:
        i = f["example_index"]
        q, ctx, span = questions[i], built.contexts[i], built.answers[i]
        tw, s, e = np.asarray(f["token_word"]), f["start_positions"], f["end_positions"]
        if q.is_impossible:
            assert (s, e) == (0, 0)
            continue
        first, last = span[0] + ctx.offset, span[1] + ctx.offset
        whole = first in tw and last in tw  # a window holds whole words, so both ends mean the whole answer
        if not whole:
            assert (s, e) == (0, 0)  # out of the window: the null position
            continue
        holding.add(i)
        assert 0 < s <= e < len(tw) and tw[s] == first and tw[e] == last
        assert tw[s - 1] != first and (e + 1 == len(tw) or tw[e + 1] != last)  # first / last sub-word of the words
        text = q.context[ctx.spans[tw[s] - ctx.offset][0]:ctx.spans[tw[e] - ctx.offset][1]]
        gold = [t for t, start in q.answers if answer_word_span(ctx.spans, start, t, context=q.context) == span]
        assert gold, f"{q.qid}: no gold answer gives the labelled words"
        if text == gold[0]:
            exact += 1
        else:  # an answer that starts or ends inside a word ("1854" of "1854–1855") takes the whole word
            assert gold[0] in text, (q.qid, text, gold[0])
            containing += 1
    answerable = [i for i, q in enumerate(questions) if not q.is_impossible]
    missing = [questions[i].qid for i in answerable if i not in holding]
    print(f"\n{task} train, first {len(questions)} questions, windows of {max_length} sharing {stride}: "
          f"{len(built.features)} windows, {len(answerable)} answerable questions; labelled windows decode to the "
          f"gold text exactly {exact}, to a text holding it {containing}; {built.counts.answer_outside} windows of "
          f"answerable questions labelled null; {len(missing)} answerable question(s) without a window holding "
          f"the answer {missing[:5]}")
    assert exact + containing > 0 and containing <= 0.05 * (exact + containing)
    assert built.counts.answer_outside == sum(
        1 for f in built.features if not questions[f["example_index"]].is_impossible and f["start_positions"] == 0)

    # The labels as logits (10 at the labelled start and end, 0 elsewhere) decode to the gold answers: the null
    # score of a question is its lowest over windows, so a question with an answer window is answered.
    starts, ends = label_logits(built.features)
    preds, _, _ = predict_answers(built.contexts, built.features, starts, ends, threshold=0.0)
    scores = evaluate(dataset, preds)
    assert all(preds[q.qid] == "" for q in questions if q.is_impossible)
    assert sum(preds[questions[i].qid] != "" for i in answerable) == len(answerable) - len(missing)
    print(f"labels read back as logits: F1 {scores['f1']:.2f}, EM {scores['exact']:.2f} over {scores['total']} "
          "questions")
    assert scores["f1"] >= 100.0 * (1 - (len(missing) + containing) / len(questions))
