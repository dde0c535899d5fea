"""The reader a user loads: a trained span-QA model that answers a question about a passage.

    from structattn import Reader
    reader = Reader.from_pretrained("runs/squad2/best")        # a run's folder, a packed one, or a shipped name
    reading = reader(question="Who built the city?", context="The city was built by the Romans in 43 AD.")
    reading.answer            # Answer(text='the Romans', start=22, end=32, score=..., probability=...) or None
    reading.answers           # the top_k best spans, best first, whatever the no-answer decision
    reader.evaluate("dev-v2.0.json")   # exact / f1 / ... of the official SQuAD 2.0 script, from the same object

It is the pipeline of ``structattn predict`` on questions given in memory, through the same code (the span-QA
family's features and prediction loop, `SpanQATrainer`, without its training part): the model and
tokenizer saved by ``structattn train --task squad2`` (or ``squad11``; `SGNetModel.from_pretrained`, which
also reads the packed form of `structattn.models.packing`), the run's windows (``max_length`` tokens sharing
at most ``stride`` sub-words: a passage longer than a window is read in several, never cut), its parser for the
SG-Net layer's mask (`build_qa_features`), and BERT's span decoding
([`predict_answers`][structattn.sgnet.span_qa.predict_answers]). ``start`` / ``end`` are character offsets into the
context exactly as given (``context[start:end] == text``). The answer is "no answer" when the null score exceeds the
best span's by more than the threshold saved with the run (``span_qa.json``, tuned on its dev split; a run on
SQuAD 1.1 saved none and always answers); ``na_threshold`` overrides it.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Sequence

from ..errors import UserError
from ..textcheck import CONTROL, describe


@dataclass(frozen=True)
class Answer:
    """One answer span: ``context[start:end] == text``; ``score`` = start logit + end logit; ``probability`` =
    softmax of the scores over the n-best list."""

    text: str
    start: int
    end: int
    score: float
    probability: float


@dataclass(frozen=True)
class Reading:
    """The reader's answer to one question.

    Attributes:
        qid: the question's id (``q0``, ``q1``, ... unless given).
        answers: the ``top_k`` best spans, best first (given even when the decision is "no answer").
        na_score: null score − best span score (what the official scorer's no-answer probability is made of).
        threshold: the no-answer threshold used (``inf``: always answers).
        windows: how many windows the passage was read in.
    """

    qid: str
    answers: tuple[Answer, ...]
    na_score: float
    threshold: float
    windows: int

    @property
    def has_answer(self) -> bool:
        """False when ``na_score`` (null minus best span score) exceeds ``threshold``: "no answer"."""
        return not self.na_score > self.threshold

    @property
    def answer(self) -> Answer | None:
        """The best span, or None when the reader says the passage holds no answer."""
        return self.answers[0] if self.has_answer else None

    def to_dict(self) -> dict:
        """JSON-ready: ``id``, ``answer`` (text, "" for no answer), ``start`` / ``end`` (null for no answer),
        ``score``, ``no_answer``, ``na_score`` (null score minus the best span's score: the margin compared with
        ``threshold``, not the null score itself), ``threshold`` (null for inf), ``windows``, ``answers`` (top_k)."""
        best = self.answer
        return {"id": self.qid, "answer": best.text if best else "", "start": best.start if best else None,
                "end": best.end if best else None, "score": best.score if best else None,
                "no_answer": best is None, "na_score": self.na_score,
                "threshold": self.threshold if math.isfinite(self.threshold) else None, "windows": self.windows,
                "answers": [asdict(a) for a in self.answers]}


def _text(value, what: str, qid: str) -> str:
    if not isinstance(value, str):
        raise UserError(f"question {qid!r}: the {what} must be a string, not {type(value).__name__}")
    if not value.strip():
        raise UserError(f"question {qid!r}: the {what} is empty; give it text")
    found = CONTROL.search(value)
    if found:  # the parser would make a word of it that the tokenizer drops: refused, as every reader of text does
        raise UserError(f"question {qid!r}: the {what} holds the control character {describe(found.group())} at "
                        f"character {found.start()}; text may hold tab and line ends but no other control "
                        "characters: remove it")
    return value


def make_questions(items: Iterable[tuple[str, str, str]]):
    """``(qid, question, context)`` triples -> ``SquadQuestion`` records without gold answers, questions on the
    same context sharing one paragraph (parsed and tokenised once)."""
    from ..tasks.squad import SquadQuestion

    paragraphs: dict[str, int] = {}
    out = []
    for qid, question, context in items:
        question, context = _text(question, "question", qid), _text(context, "context (passage)", qid)
        out.append(SquadQuestion(qid=qid, title="", question=question, context=context, answers=[],
                                 is_impossible=False, paragraph=paragraphs.setdefault(context, len(paragraphs))))
    if not out:
        raise UserError("no questions to answer")
    return out


class Reader:
    """A span-QA model with what it needs to read: tokenizer, structure specs, windows, threshold (module
    docstring). Build it with [`from_pretrained`][structattn.sgnet.reader.Reader.from_pretrained]."""

    def __init__(self, model, tokenizer, cfg, threshold: float, *, device: str = "cpu", source: str = ""):
        from .reading import SpanQATrainer

        self.model, self.tokenizer, self.cfg = model.eval(), tokenizer, cfg
        self.threshold, self.device, self.source = float(threshold), device, source
        # features and logits as the span-QA family computes them, for this model
        self.family = SpanQATrainer(cfg, show_progress=False, device=device, loaded=(self.model, tokenizer))
        self._parser = None  # the run's spaCy parser, made on first use and kept: its pipeline loads once

    @property
    def parser(self):
        """The run's dependency parser (``cfg.parser``), one per Reader: spaCy loads the pipeline (most of a short
        call's time) once, on the first passage the parse cache does not hold."""
        if self._parser is None:
            from ..dependency.spacy_backend import SpacyParser

            self._parser = SpacyParser(model=self.cfg.parser)
        return self._parser

    @classmethod
    def from_pretrained(cls, name_or_dir: str | Path, *, device: str = "cpu",
                        na_threshold: float | None = None) -> "Reader":
        """Load a reader: the ``best/`` folder of a span-QA run of ``structattn train``, a folder written by
        ``structattn pack-reader``, or a shipped reader's name (``structattn models``). ``na_threshold`` replaces
        the saved no-answer threshold (``math.inf``: always answer)."""
        from .model import SGNetForSpanQA, SGNetModel
        from ..models.trained import resolve
        from ..models.tokenizer import load_tokenizer
        from .config import SGNetTrainConfig
        from .reading import saved_threshold

        folder = resolve(name_or_dir, "reader")
        if not folder.is_dir():
            raise UserError(f"{folder} is not a folder; give the best/ folder of a span-QA run (structattn train "
                            "--task squad2), a packed reader or a shipped reader's name")
        if not (folder / "train_config.json").is_file():
            raise UserError(f"{folder} has no train_config.json; give the best/ folder of a span-QA run of "
                            "`structattn train --task squad2` (or squad11), or a folder written by "
                            "`structattn pack-reader`")
        model = SGNetModel.from_pretrained(folder, device=device)
        if not isinstance(model, SGNetForSpanQA):
            raise UserError(f"{folder} holds a {model.config.head} model, not a span-QA reader; give a run of "
                            "`structattn train --task squad2` (or squad11)")
        cfg = SGNetTrainConfig.load(folder / "train_config.json")
        threshold = saved_threshold(folder) if na_threshold is None else float(na_threshold)
        tokenizer = load_tokenizer(str(folder), model.base_model.config.model_type)
        return cls(model, tokenizer, cfg, threshold, device=device, source=str(folder))

    @property
    def max_length(self) -> int:
        """Tokens in one window (longer inputs are read in several)."""
        return self.cfg.max_length

    def __call__(self, question: str, context: str, top_k: int = 1) -> Reading:
        """The answer to one ``question`` about ``context`` (its ``top_k`` best spans)."""
        return self.read_questions(make_questions([("q0", question, context)]), top_k)[0]

    def answer_all(self, pairs: Sequence[tuple[str, str]], top_k: int = 1) -> list[Reading]:
        """The answers to ``(question, context)`` pairs, in order (ids ``q0``, ``q1``, ...)."""
        return self.read_questions(make_questions((f"q{i}", q, c) for i, (q, c) in enumerate(pairs)), top_k)

    def evaluate(self, squad) -> dict:
        """Answer every question of a SQuAD-format file (path) or JSON object at this reader's threshold and score
        the answers with the project's SQuAD scorer ([`structattn.tasks.squad_eval.evaluate`][structattn.tasks.squad_eval.evaluate],
        equal to evaluate-v2.0; with the no-answer probabilities when the file has unanswerable questions):
        ``exact``, ``f1``, ``total`` and the rest of what the official script prints."""
        from ..tasks.squad import load_squad, read_squad
        from ..tasks.squad_eval import evaluate as squad_evaluate
        from .reading import has_unanswerable
        from .span_qa import na_probabilities

        dataset = squad if isinstance(squad, dict) else load_squad(squad)
        readings = self.read_questions(read_squad(dataset), source=str(squad) if not isinstance(squad, dict)
                                       else "the SQuAD object")
        answers = {r.qid: (r.answer.text if r.answer else "") for r in readings}
        na_probs = na_probabilities({r.qid: r.na_score for r in readings}) if has_unanswerable(dataset) else None
        return squad_evaluate(dataset, answers, na_probs)

    def read_questions(self, questions: Sequence, top_k: int = 1, source: str = "questions") -> list[Reading]:
        """The answers to ``SquadQuestion`` records ([`make_questions`][structattn.sgnet.reader.make_questions], or
        ``read_squad`` of a SQuAD file; gold answers are ignored), in order."""
        from .span_qa import predict_answers

        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise UserError(f"top_k={top_k!r} must be a positive integer (answers kept per question)")
        seen: set[str] = set()
        twice = [q.qid for q in questions if q.qid in seen or seen.add(q.qid)]
        if twice:
            raise UserError(f"{source}: {len(twice)} question id(s) given twice, e.g. {twice[:3]}; ids must be unique")
        built = self.family.qa_features(questions, source=source, parser=lambda: self.parser)
        if built.counts.lost_tokens:  # the longer segment slides over windows; the other is repeated, maybe cut
            warnings.warn(f"{built.counts.lost_tokens} sub-word token(s) of {source} are in no window of "
                          f"{self.cfg.max_length} tokens: where a question is longer than its passage, the question "
                          "slides over the windows and the passage, repeated in each, is cut where it does not fit "
                          "beside it; shorten the question", UserWarning, stacklevel=2)
        feats = built.features
        starts, ends = self.family.span_logits(feats)
        _, na_scores, nbest = predict_answers(built.contexts, feats, starts, ends, threshold=math.inf,
                                              n_best=max(top_k, self.cfg.n_best),
                                              max_answer_length=self.cfg.max_answer_length, with_offsets=True)
        windows = [0] * len(questions)
        for f in feats:
            windows[f["example_index"]] += 1
        return [Reading(qid=q.qid, answers=tuple(Answer(text=e["text"], start=e["start"], end=e["end"],
                                                        score=e["start_logit"] + e["end_logit"],
                                                        probability=e["probability"])
                                                 for e in nbest[q.qid][:top_k]),
                        na_score=na_scores[q.qid], threshold=self.threshold, windows=windows[i])
                for i, q in enumerate(questions)]
