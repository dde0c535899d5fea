"""SG-Net on sentence and token tasks: the core's encoder family
([`EncoderFamily`][structattn.train.encoder_family.EncoderFamily]) with the SG-Net model, its SDOI structures and the
SG layer's mask (chosen by `structattn.trainers.trainer_for` when ``--sgnet`` is not ``none`` or ``--pool``
is not ``first``: transformers' task models pool [CLS] only)."""
from __future__ import annotations

from ..train.encoder_family import EncoderFamily
from .config import SGNetTrainConfig
from .loading import SGMaskCollator, load_sgnet_and_tokenizer, sg_layer_masked, sg_rules


def wants_sgnet(cfg) -> bool:
    """Whether a sentence-task configuration needs the SG-Net model rather than a transformers task model."""
    return cfg.sgnet != "none" or cfg.pool != "first"


class SGNetSentenceTrainer(EncoderFamily):
    """[`EncoderFamily`][structattn.train.encoder_family.EncoderFamily] with the SG-Net model: the SG layer sees each
    example's SDOI structure through its mask (unless ``--sgnet vanilla``, the layer without a mask)."""

    config_class = SGNetTrainConfig

    def _load_model(self):
        return load_sgnet_and_tokenizer(self.cfg, head=self.task.kind, num_labels=self.task.num_labels)

    def _sg_head(self) -> str | None:
        """The head whose SG-layer mask rules apply, or None when the model has no masked SG layer."""
        return self.task.kind if sg_layer_masked(self.cfg.sgnet) else None

    def features(self, split: str, limit: int = 0, training: bool = False):
        examples, feats = super().features(split, limit, training)
        if self._sg_head() is not None:
            self._add_sg_structures(examples, feats)
        return examples, feats

    def _add_sg_structures(self, examples, feats) -> None:
        """Give every feature the SDOI structure of its example (``sg_structure``) for the SG layer's mask."""
        from ..structure import build_word_structures
        from ..train.features import parse_examples

        pa, pb = parse_examples(examples, self.cfg.parser, show_progress=self.show_progress and self.is_main)
        structures = build_word_structures(pa, pb, "sdoi")
        for feat in feats:
            feat["sg_structure"] = structures[feat["example_index"]]

    def structure_collator(self):
        base = super().structure_collator()
        if self._sg_head() is None:
            return base
        return SGMaskCollator(base, sg_rules(self._sg_head(), self.cfg.pool))
