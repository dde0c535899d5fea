"""Fine-tuning for span QA with no-answer (SQuAD 2.0, SQuAD 1.1): the core's encoder family
([`EncoderFamily`][structattn.train.encoder_family.EncoderFamily]) with QA data,
start/end logits, answer decoding and a tuned no-answer threshold.

Everything that makes a run resumable, the evaluation schedule and early stopping are the base family's.
What differs:

- data: questions of a `QATask` split become windows of ``max_length`` tokens
  sharing at most ``stride`` sub-words (`build_qa_features`); ``--max-train-examples`` /
  ``--max-eval-examples`` count questions (the first N in file order), and the scorer sees exactly those;
- the model: [`SGNetModel`][structattn.sgnet.model.SGNetModel] with the ``span_qa`` head (``--sgnet none`` is the
  baseline, the head directly on the encoder output: BERT's question-answering model);
- evaluation: answers decoded from every window ([`predict_answers`][structattn.sgnet.span_qa.predict_answers]); on a
  split with unanswerable questions the no-answer threshold is tuned on that split the way the official scorer's
  best-F1 sweep does, and ``f1`` / ``exact`` are the scores at that threshold (so on the dev split ``f1`` is the
  official ``best_f1``); the threshold of the best checkpoint is saved with it (``best/span_qa.json``) and used
  unchanged on any other data (``structattn predict``, the reader).

The features and the prediction loop are also the reader's ([`Reader`][structattn.sgnet.reader.Reader] holds a
`SpanQATrainer` of its model): one implementation of questions -> windows -> logits.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..errors import UserError
from ..io import atomic_write_json
from ..train.encoder_family import EncoderFamily, inference_device, prediction_batches
from .config import SGNetTrainConfig

SPAN_QA_FILE = "span_qa.json"  # beside the saved model: the no-answer threshold and decoding settings


@dataclass
class QAEvalSet:
    """What decoding and scoring need for the questions of one split.

    Attributes:
        questions: the split's ``SquadQuestion`` records (after any limit).
        dataset: the SQuAD JSON object holding exactly those questions (what the scorer reads).
        contexts: per question the passage, its words and character spans (`QAContext`).
        source: where the questions came from (a task split name or a file).
    """

    questions: list
    dataset: dict
    contexts: list
    source: str


def restrict_dataset(dataset: dict, qids: set[str]) -> dict:
    """The SQuAD JSON object with only the questions in ``qids`` (paragraphs and articles left empty dropped)."""
    articles = []
    for article in dataset["data"]:
        paragraphs = []
        for para in article["paragraphs"]:
            qas = [qa for qa in para["qas"] if qa["id"] in qids]
            if qas:
                paragraphs.append({**para, "qas": qas})
        if paragraphs:
            articles.append({**article, "paragraphs": paragraphs})
    return {**{k: v for k, v in dataset.items() if k != "data"}, "data": articles}


def has_unanswerable(dataset: dict) -> bool:
    return any(qa.get("is_impossible", False) for article in dataset["data"] for para in article["paragraphs"]
               for qa in para["qas"])


class SpanQATrainer(EncoderFamily):
    """Trains and evaluates the span-QA model of one [`SGNetTrainConfig`][structattn.sgnet.config.SGNetTrainConfig]."""

    config_class = SGNetTrainConfig

    threshold: float = 0.0  # the no-answer threshold of the last evaluation (answer "" when na_score > it)
    fixed_threshold: float | None = None  # set: evaluations use it instead of tuning (a saved model's threshold)

    def _get_task(self, name: str):
        from ..tasks.squad import get_qa_task

        return get_qa_task(name)

    @property
    def main_metric(self) -> str:
        return "f1"

    def _load_model(self):
        from .loading import load_sgnet_and_tokenizer

        return load_sgnet_and_tokenizer(self.cfg, head="span_qa", num_labels=2)

    # ------------------------------------------------------------------ data
    def _sg_spec(self):
        return span_qa_sg_spec(self.cfg.sgnet)

    def features(self, split: str, limit: int = 0, training: bool = False):
        """``(QAEvalSet, features)`` of a task split; ``limit`` keeps the first N questions."""
        qa = self.task.read(split)
        return self.features_of(qa.questions, qa.dataset, limit, training, source=f"{self.task.name}/{split}")

    def features_of(self, questions: list, dataset: dict, limit: int = 0, training: bool = False,
                    source: str = "questions"):
        """``(QAEvalSet, features)`` of questions read from any SQuAD-format data."""
        if limit:
            questions = questions[:limit]
            dataset = restrict_dataset(dataset, {q.qid for q in questions})
        if not questions:
            raise UserError(f"{source}: no questions to read")
        built = self.qa_features(questions, training, source)
        return QAEvalSet(questions, dataset, built.contexts, source), built.features

    def qa_features(self, questions: list, training: bool = False, source: str = "questions", parser=None):
        """The `QAFeatures` (windows, contexts, counts) of ``questions`` for this model: the mechanism's structure
        and the SG layer's. ``parser``: a function giving the ``SpacyParser`` the caller keeps (its pipeline loads
        once; asked only when a structure needs a parse), used in this process; without it the questions are parsed
        and built in ``--preprocess-workers`` processes."""
        from .reading_features import build_qa_features, build_qa_features_parallel, parse_questions

        structure = self.structure if self.structure.relation is not None else None
        sg_spec = self._sg_spec()
        build = dict(sg_structure=sg_spec, max_length=self.cfg.max_length, stride=self.cfg.stride,
                     parser_name=self.cfg.parser, training=training, split=source,
                     show_progress=self.show_progress and self.is_main)
        if parser is None:
            return build_qa_features_parallel(questions, self.tokenizer, structure,
                                              workers=self._preprocess_workers(), **build)
        needs_parse = any(s is not None and s.needs_parse for s in (structure, sg_spec))
        parses = parse_questions(questions, parser=parser(), show_progress=False) if needs_parse else None
        return build_qa_features(questions, self.tokenizer, structure, parses=parses, **build)

    def collator(self):
        return span_qa_collator(self.tokenizer, self.structure, self._sg_spec())

    # ------------------------------------------------------------------ evaluation
    def predict(self, inputs) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Start and end logits per window (`span_logits`)."""
        return self.span_logits(inputs)

    def span_logits(self, feats) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Start and end logits per window (``[T_f]`` each, float32 numpy)."""
        return span_logits(self.model, feats, self.collator(), self.cfg.eval_batch_size, self.device)

    def answers(self, data: QAEvalSet, feats, threshold: float | None = None):
        """Decoded answers: ``(predictions, na_scores, nbest, threshold)``.

        ``threshold`` None: tuned on ``data`` (best F1, the official sweep) when it has unanswerable questions,
        else +inf (never answer ""). A number: used as given (a saved model's threshold).
        """
        from .span_qa import predict_answers, tune_threshold

        starts, ends = self.span_logits(feats)
        decode = dict(n_best=self.cfg.n_best, max_answer_length=self.cfg.max_answer_length)
        if threshold is None:
            raw, na_scores, _ = predict_answers(data.contexts, feats, starts, ends, threshold=math.inf, **decode)
            threshold = tune_threshold(data.dataset, raw, na_scores) if has_unanswerable(data.dataset) else math.inf
        preds, na_scores, nbest = predict_answers(data.contexts, feats, starts, ends, threshold=threshold, **decode)
        return preds, na_scores, nbest, threshold

    def evaluate(self, examples: QAEvalSet, feats, with_gates: bool = False) -> dict:
        """The official scores on ``examples`` at the threshold tuned on them (module docstring), or at
        `fixed_threshold` when set, with the threshold-free ``best_*`` figures of the official script."""
        return self.scored_answers(examples, feats)[0]

    def scored_answers(self, examples: QAEvalSet, feats) -> tuple[dict, dict[str, str]]:
        """`evaluate`'s scores and the answers they score (question id -> text, "" = no answer)."""
        from .span_qa import na_probabilities
        from ..tasks.squad_eval import evaluate as squad_evaluate

        preds, na_scores, _, threshold = self.answers(examples, feats, threshold=self.fixed_threshold)
        self.threshold = threshold
        na_probs = na_probabilities(na_scores) if has_unanswerable(examples.dataset) else None
        scores = squad_evaluate(examples.dataset, preds, na_probs)
        return {**scores, "na_threshold": threshold if math.isfinite(threshold) else None}, preds

    def save_model(self, folder: Path, metrics: dict) -> None:
        super().save_model(folder, metrics)
        atomic_write_json(Path(folder) / SPAN_QA_FILE, self.decoding_settings())

    def decoding_settings(self) -> dict:
        return {"na_threshold": self.threshold if math.isfinite(self.threshold) else None,
                "tuned_on": self.cfg.eval_split, "max_answer_length": self.cfg.max_answer_length,
                "n_best": self.cfg.n_best}


def span_qa_sg_spec(sgnet: str):
    """The structure the SG layer of a span-QA model with aggregation ``sgnet`` reads (relation ``sdoi``), or
    None when it has no masked SG layer (``none``, ``vanilla``)."""
    from .loading import sg_layer_masked, sg_structure_spec

    return sg_structure_spec("span_qa") if sg_layer_masked(sgnet) else None


def span_qa_collator(tokenizer, structure, sg_spec):
    """The span-QA batches of a model whose encoder mechanism reads ``structure`` and whose SG layer reads
    ``sg_spec`` (`span_qa_sg_spec`)."""
    from .reading_features import SpanQACollator

    rules = structure.rules if structure.relation is not None else None
    return SpanQACollator(tokenizer.pad_token_id, rules, sg_spec.rules if sg_spec is not None else None)


@torch.no_grad()
def span_logits(model, feats, collate, batch_size: int, device) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Start and end logits of ``model`` (an SG-Net span-QA model) per window: ``[T_f]`` float32 numpy arrays,
    one per feature, in the features' order; ``batch_size`` windows at a time through ``collate``."""
    starts, ends = [], []
    for chunk, batch, _ in prediction_batches(model, feats, collate, batch_size, device,
                                              ("start_positions", "end_positions")):
        out = model(**batch)
        s, e = out.start_logits.float().cpu().numpy(), out.end_logits.float().cpu().numpy()
        for b, f in enumerate(chunk):
            n = len(f["input_ids"])
            starts.append(s[b, :n])
            ends.append(e[b, :n])
    return starts, ends


def saved_threshold(model_dir: str | Path) -> float:
    """The no-answer threshold saved beside a model (``span_qa.json``); +inf when it was trained without one."""
    path = Path(model_dir) / SPAN_QA_FILE
    if not path.is_file():
        raise UserError(f"{model_dir} has no {SPAN_QA_FILE}; give the best/ folder of a span-QA run of "
                        "`structattn train --task squad2` (or squad11)")
    value = json.loads(path.read_text(encoding="utf-8")).get("na_threshold")
    return math.inf if value is None else float(value)


def answering_threshold(model_dir: str | Path, task) -> float:
    """The no-answer threshold a saved model answers ``task``'s questions with: the one saved with it
    (`saved_threshold`), or +inf (never "no answer") on a task whose questions are all answerable (squad11),
    whatever the model was tuned on."""
    threshold = saved_threshold(model_dir)
    return threshold if task.no_answer else math.inf


def load_span_qa(model_dir: str | Path, task: str | None = None) -> SpanQATrainer:
    """The inference part of a saved span-QA model (no engine: `structattn.train.encoder_family`), on
    `inference_device`, answering at its saved threshold (`answering_threshold`)."""
    from ..train.config import saved_run_config

    family = SpanQATrainer(saved_run_config(model_dir, SGNetTrainConfig, task), device=inference_device())
    family.fixed_threshold = answering_threshold(model_dir, family.task)
    return family
