"""Translate with a trained encoder-decoder: batching, the source structure, beam search, detokenised output.

    tr = structattn.Translator.from_pretrained("hybrid-gate-en-de")   # or a run's folder: "runs/nmt/.../final"
    tr("A dog runs on the beach.")                                    # -> "Ein Hund läuft am Strand."
    tr.translate(["A dog runs on the beach."], beam=5, length_penalty=1.0)   # -> ["Ein Hund läuft am Strand."]
    tr.evaluate(sources, references)                                   # -> {"bleu": ..., "signature": ..., ...}

A model folder holds ``config.json`` + ``model.safetensors`` (``save_pretrained``; the mechanism's settings in
``config.structattn``) and the tokenizer files. Input lines get the training preprocessing (NFC, the BPE);
output is detokenised text.

Documented edge cases:
* an empty (or whitespace-only) line is not run through the model: its translation is the empty line;
* a line longer than the model's position limit (``max_position_embeddings`` - 1 source pieces plus
  ``</s>``) is cut to that many pieces; the number of cut lines is returned in ``Translator.last_cut`` and
  printed by ``structattn translate``;
* the output of one line is at most ``1.5 * n + 10`` pieces, n the longest source (in pieces) of its batch,
  and below the position limit.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

from ..errors import UserError
from .data import normalise
from ..verbosity import quiet_loading


@dataclass
class Translator:
    """A model and its tokenizer. ``needs_structure``: the encoder mechanism reads a parsed-source mask."""

    model: torch.nn.Module
    tokenizer: object
    parser_name: str | None = None
    last_cut: int = 0

    @classmethod
    def from_pretrained(cls, name_or_folder: str | Path, parser_name: str | None = None) -> "Translator":
        """Load a shipped translator by name (``structattn models``) or a model folder; as
        [`load`][structattn.translation.translator.Translator.load]."""
        return cls.load(name_or_folder, parser_name)

    def __call__(self, text: str | Sequence[str], **options) -> str | list[str]:
        """Translate one line (-> a string) or a list of lines (-> a list); ``options`` as
        [`translate`][structattn.translation.translator.Translator.translate]."""
        if isinstance(text, str):
            return self.translate([text], **options)[0]
        return self.translate(list(text), **options)

    def evaluate(self, sources: Sequence[str], references: Sequence[str], **options) -> dict:
        """Translate ``sources`` (``options`` as [`translate`][structattn.translation.translator.Translator.translate])
        and score them against ``references``, one per source, with the project's BLEU (`structattn.tasks.bleu`:
        detokenised, case-sensitive sacreBLEU 13a, as ``structattn score bleu``).

        Returns:
            ``{"bleu", "signature", "details", "lines", "cut", "hypotheses"}``; ``cut``: source lines cut to the
            model's position limit.
        """
        from ..tasks.bleu import corpus_bleu

        if len(sources) != len(references):
            raise UserError(f"{len(sources)} source lines for {len(references)} references: give one reference per "
                            "source line")
        hypotheses = self.translate(list(sources), **options)
        return {**corpus_bleu(hypotheses, references), "lines": len(hypotheses), "cut": self.last_cut,
                "hypotheses": hypotheses}

    @classmethod
    @quiet_loading()
    def load(cls, folder: str | Path, parser_name: str | None = None) -> "Translator":
        """Load a translator: the ``final/`` or ``best/`` folder of a ``structattn train-translation`` run, or a
        shipped translator's name (``hybrid-gate-en-de``; ``structattn models``). ``parser_name`` replaces the spaCy
        pipeline the model was trained with (for mechanisms that read a parse). Raises ``UserError`` for a folder
        that is missing or holds no translation model."""
        from transformers import AutoTokenizer

        from ..models.encoder import load_as_saved
        from ..models.trained import resolve
        from .model import apply_residual_scale

        folder = resolve(folder, "translator")  # a folder, or a shipped model's name (structattn.models.trained)
        if not folder.exists():
            raise UserError(f"{folder}: no such model folder; give the final/ or best/ folder of a "
                            "`structattn train-translation` run")
        if not (folder / "config.json").is_file():
            raise UserError(f"{folder}: not a translation model folder (no config.json); give the final/ folder "
                            "of a `structattn train-translation` run")
        _read_config(folder)  # an encoder-decoder, or one line saying what the folder holds
        model = load_as_saved(str(folder), task="translation")
        apply_residual_scale(model)
        return cls(model.eval(), AutoTokenizer.from_pretrained(str(folder)), parser_name)

    @property
    def needs_structure(self) -> bool:
        """Whether the encoder's mechanism reads a word structure (a parse or word windows) of each source."""
        from ..models.encoder import mechanism_of

        mech = mechanism_of(self.model)
        return mech is not None and mech.reads_structure

    @property
    def max_source_pieces(self) -> int:
        """The longest source, in sub-word pieces, the model's position table holds (longer ones are cut, counted
        in ``last_cut``)."""
        return int(self.model.config.max_position_embeddings) - 1

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """BPE ids with ``</s>``; lines over the position limit are cut (counted in `last_cut`)."""
        from .data import encode_texts

        ids = encode_texts(self.tokenizer, texts)
        limit = self.max_source_pieces
        eos = self.tokenizer.eos_token_id
        self.last_cut = sum(len(x) > limit + 1 for x in ids)
        return [x if len(x) <= limit + 1 else x[:limit] + [eos] for x in ids]

    @torch.no_grad()
    def translate(self, texts: Sequence[str], beam: int = 5, length_penalty: float = 1.0, max_tokens: int = 4096,
                  progress=None) -> list[str]:
        """Detokenised translations, one per input line, in input order."""
        from .data import TranslationCollator, build_source_structure, token_batches

        if beam < 1:
            raise UserError(f"beam size must be at least 1, got {beam}")
        texts = [normalise(t) for t in texts]
        outputs = [""] * len(texts)
        live = [i for i, t in enumerate(texts) if t.strip()]
        if not live:
            return outputs
        ids = self.encode([texts[i] for i in live])
        structure = None
        if self.needs_structure:
            from ..models.encoder import mechanism_of

            mech = mechanism_of(self.model)
            structure = build_source_structure(self.tokenizer, [texts[i] for i in live], mech.relation,
                                               self.parser_name, **mech.relation_options())
            for j, x in enumerate(ids):  # cut lines: keep the mask's rows for the kept pieces
                structure.token_word[j] = _cut_token_word(structure.token_word[j], len(x))
        collate = TranslationCollator(self.tokenizer.pad_token_id)
        lengths = [len(x) for x in ids]
        device = next(self.model.parameters()).device
        limit = int(self.model.config.max_position_embeddings)
        for batch_idx in token_batches(lengths, lengths, max(max_tokens // max(beam, 1), 1), seed=None):
            batch = collate([ids[j] for j in batch_idx], None, structure, batch_idx if structure else None)
            batch = {k: v.to(device) for k, v in batch.items()}
            encoder_kwargs = {k: batch[k] for k in ("input_ids", "attention_mask", "structure_mask") if k in batch}
            encoded = self.model.get_encoder()(**encoder_kwargs)
            longest = batch["input_ids"].shape[1]
            generated = self.model.generate(
                encoder_outputs=encoded, attention_mask=batch["attention_mask"], num_beams=beam,
                length_penalty=length_penalty, max_new_tokens=min(int(1.5 * longest) + 10, limit - 1),
                **({"early_stopping": True} if beam > 1 else {}))
            decoded = self.tokenizer.batch_decode(generated, skip_special_tokens=True)
            for j, text in zip(batch_idx, decoded):
                outputs[live[j]] = text.strip()
            if progress is not None:
                progress(len(batch_idx))
        return outputs


def _cut_token_word(token_word, length: int):
    """token_word of a cut line: the first ``length - 1`` pieces, then ``</s>`` (special)."""
    import numpy as np

    if len(token_word) <= length:
        return token_word
    return np.concatenate([token_word[:length - 1], np.asarray([-1], dtype=token_word.dtype)])


def _read_config(folder: Path) -> dict:
    from ..config_io import read_json

    data = read_json(folder / "config.json", "model config")
    if not data.get("is_encoder_decoder"):
        kind = data.get("structattn_base_model_type") or data.get("model_type", "unknown")
        raise UserError(f"{folder}: holds a {kind!r} model, not an encoder-decoder "
                        "translation model")
    return data
