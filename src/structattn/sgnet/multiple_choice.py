"""Fine-tuning for multiple choice (RACE, MCTest): the core's encoder family
([`EncoderFamily`][structattn.train.encoder_family.EncoderFamily]) with one input per option, one score per option
and a softmax over the options.

- data: `build_mc_features` (passage, then the question with the option; the passage cut from
  its end where the input is too long); ``--max-train-examples`` / ``--max-eval-examples`` count questions;
- the model: [`SGNetModel`][structattn.sgnet.model.SGNetModel] with the ``multiple_choice`` head (``--sgnet none`` is
  the baseline: BERT's multiple-choice model);
- evaluation: accuracy overall and per group (RACE middle/high, MCTest mc160/mc500; MCTest one/multiple).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..train.encoder_family import EncoderFamily, inference_device
from .config import SGNetTrainConfig


@dataclass
class MCEvalSet:
    """The questions of one split (after any limit) and where they came from."""

    questions: list
    source: str


class MultipleChoiceTrainer(EncoderFamily):
    """Trains and evaluates the multiple-choice model of one
    [`SGNetTrainConfig`][structattn.sgnet.config.SGNetTrainConfig]."""

    config_class = SGNetTrainConfig

    def _get_task(self, name: str):
        from ..tasks.multiple_choice import get_mc_task

        return get_mc_task(name)

    @property
    def main_metric(self) -> str:
        return "accuracy"

    def _load_model(self):
        from .loading import load_sgnet_and_tokenizer

        return load_sgnet_and_tokenizer(self.cfg, head="multiple_choice", num_labels=1)

    # ------------------------------------------------------------------ data
    def _sg_spec(self):
        from .loading import sg_layer_masked, sg_structure_spec

        return sg_structure_spec("multiple_choice", self.cfg.pool) if sg_layer_masked(self.cfg.sgnet) else None

    def features(self, split: str, limit: int = 0, training: bool = False):
        """``(MCEvalSet, features)``: one feature per question holding its C option inputs."""
        questions = self.task.read(split, limit=limit)
        return self.features_of(questions, source=f"{self.task.name}/{split}")

    def features_of(self, questions: list, source: str = "questions"):
        from .multiple_choice_features import build_mc_features_parallel as build_mc

        show = self.show_progress and self.is_main
        build = dict(max_length=self.cfg.max_length, parser_name=self.cfg.parser, split=source, show_progress=show,
                     workers=self._preprocess_workers())
        structure = self.structure if self.structure.relation is not None else None
        # one build: the mechanism's structures and the SG layer's SDOI structures from the same inputs and parses
        feats = build_mc(questions, self.tokenizer, structure, sg_structure=self._sg_spec(), **build)
        return MCEvalSet(questions, source), feats

    def collator(self):
        from .loading import SGMaskCollator
        from .multiple_choice_features import MultipleChoiceCollator

        rules = self.structure.rules if self.structure.relation is not None else None
        base = MultipleChoiceCollator(self.tokenizer.pad_token_id, rules, option_mask=self.cfg.pool == "option")
        sg = self._sg_spec()
        if sg is None:
            return base
        return SGMaskCollator(base, sg.rules, options=True)

    # ------------------------------------------------------------------ evaluation
    def predict(self, inputs) -> np.ndarray:
        """The options' scores (`option_scores`)."""
        return self.option_scores(inputs)

    @torch.no_grad()
    def option_scores(self, feats) -> np.ndarray:
        """``[Q, C]`` float32: the score of every option of every question."""
        bs = max(1, self.cfg.eval_batch_size // max(1, len(feats[0]["options"])))  # inputs, not questions
        return np.concatenate([self.model(**batch).logits.float().cpu().numpy()
                               for _, batch, _ in self.prediction_batches(feats, bs)])

    def evaluate(self, examples: MCEvalSet, feats, with_gates: bool = False) -> dict:
        from ..tasks.multiple_choice import accuracy

        preds = self.option_scores(feats).argmax(axis=1).tolist()
        return accuracy(preds, examples.questions)


def load_multiple_choice(model_dir: str | Path, task: str | None = None) -> MultipleChoiceTrainer:
    """The inference part of a saved multiple-choice model (no engine: `structattn.train.encoder_family`), on
    `inference_device`."""
    from ..train.config import saved_run_config

    return MultipleChoiceTrainer(saved_run_config(model_dir, SGNetTrainConfig, task), device=inference_device())
