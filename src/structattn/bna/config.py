"""What decides a BNA chart parser and its training run: `ParserConfig`, its presets and the names of its
choices (layer stacks, POS modes, sub-word poolings). Kept apart from the model (and torch) so that the command
line builds its flags without importing either."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..config_io import JsonConfig
from ..errors import UserError

#: How a word's vector is taken from its sub-words.
POOLINGS = ("first", "last", "mean")


@dataclass
class ParserConfig(JsonConfig):
    """Everything that decides a parser (architecture) and a parser training run (the fields after ``max_words``).

    Saved as ``config.json`` beside the weights; unknown keys are errors.
    """

    # --- architecture ---
    encoder: str = ""  # "" = the offline all-MiniLM-L6-v2; "none" = word embeddings + char BiLSTM; else HF name/folder
    pooling: str = "first"  # which sub-word gives a word's vector: first | last | mean
    fine_tune_encoder: bool = True  # False = the pretrained encoder stays frozen (no_grad, eval mode)
    variant: str = "bna"  # the layer stack, a key of VARIANTS: sa | bimsa | sa_nsa | bna
    layers: list[str] | None = None  # explicit stack bottom-up, e.g. ["bimsa", "nsa"]; overrides variant/num_layers
    num_layers: int = 0  # layers in the stack; 0 = 2 with a pretrained encoder, 4 without (the paper: 2 and 8)
    nsa_layers: int = 1  # how many of the top layers are NSA (variants with NSA)
    ngram: int = 4  # NSA n-gram order n: spans of 1..n words are the keys
    d_model: int = 256  # hidden size of the layer stack (even: fencepost halves)
    heads: int = 8  # attention heads per layer
    d_head: int = 32  # size of one head's queries/keys
    d_ff: int = 512  # inner size of the feed-forward block
    residual_dropout: float = 0.2  # dropout on each sub-layer's output before the residual sum
    ff_dropout: float = 0.2  # dropout inside the feed-forward block
    attn_dropout: float = 0.2  # dropout on the attention weights
    char_dropout: float = 0.1  # encoder "none": dropout on char-BiLSTM word vectors (and word embeddings)
    char_dim: int = 64  # encoder "none": character embedding size
    char_hidden: int = 0  # encoder "none": the char BiLSTM's output size, both directions (even); 0 = d_model
    word_dim: int = 100  # encoder "none": word embedding size
    pos: str = "none"  # POS-tag embeddings added to the word vectors: none | spacy (spaCy's tag_) | gold (given tags)
    label_hidden: int = 250  # hidden size of the span label MLP (scorer "biaffine": of its label boundary MLPs)
    scorer: str = "mlp"  # span scores: mlp (an MLP over fencepost differences) | biaffine (SuPar's boundary biaffines)
    span_hidden: int = 500  # scorer "biaffine": size of its span boundary MLPs
    max_words: int = 300  # longest sentence (words) the parser accepts
    # --- training (bna/trainer.py) ---
    output_dir: str = "runs/parser"  # where checkpoint/, best/, test.trees and summary.json go
    seed: int = 42  # seeds torch, numpy and random
    epochs: int = 30  # passes over the training trees
    batch_size: int = 32  # sentences per optimizer step
    # most chart cells (sentences x (longest + 1)^2) in one forward pass; a larger batch runs in passes whose
    # gradients add up to the same update (0 = always one pass)
    max_chart_cells: int = 100_000
    group_by_length: bool = True  # batches of similar length (same trees per epoch; the chart costs L^2 per batch)
    learning_rate: float = 1e-3  # peak learning rate of the new layers (everything but the pretrained encoder)
    encoder_learning_rate: float = 5e-5  # peak learning rate of the pretrained encoder (when fine-tuned)
    warmup_steps: int = 200  # linear warm-up steps to the peak learning rates
    patience: int = 5  # evaluations without dev-F1 improvement after the warm-up before stopping; 0 = never stop early
    max_train_trees: int = 0  # use only the first N training trees; 0 = all
    max_eval_trees: int = 0  # evaluate on only the first N dev and test trees; 0 = all
    eval_every: int = 0  # optimizer steps between dev evaluations; 0 = once per epoch
    clip_grad: float = 5.0  # gradient norm clipping; 0 = none
    adam_beta2: float = 0.999  # Adam's second-moment decay (SuPar: 0.9)
    adam_eps: float = 1e-8  # Adam's epsilon (SuPar: 1e-12)
    lr_decay: float = 1.0  # after warm-up the learning rates fall by this factor every lr_decay_steps; 1 = constant
    lr_decay_steps: int = 5000  # optimizer steps over which the learning rates fall by lr_decay (SuPar: .75 per 5,000)
    loss: str = "margin"  # margin (BNA Eq. 9: hinge against the Hamming-augmented best tree) | crf (tree CRF, SuPar's)
    precision: str = "fp32"  # fp32 | bf16 (autocast; CPUs with avx512_bf16/AMX, GPUs) | fp16 (CUDA only, loss scaling)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: ``structattn train-parsing --preset NAME``; the command line's default is "laptop": the CPU configuration of
#: experiments/recipes/parsing.toml with spaCy POS tags, the settings of the shipped ``bna-minilm`` (frozen
#: MiniLM, d 128, 12 epochs at most; about 4 minutes on 2 threads). "full" is this class's own defaults, the larger
#: and longer setting closer to the paper (fine-tuned encoder, d 256, 8 heads, 30 epochs; an hour or more on a
#: 2-core CPU).
PARSER_PRESETS: dict[str, dict[str, Any]] = {
    "laptop": {"fine_tune_encoder": False, "d_model": 128, "heads": 4, "d_ff": 256, "pos": "spacy",
               "label_hidden": 128, "epochs": 12, "patience": 4},
    "full": {},
}


# --------------------------------------------------------------------------- layer stacks
def _stack(bottom: str, top: str | None) -> Callable[[int, int], list[str]]:
    """A variant: ``num_layers`` layers of ``bottom``, the top ``nsa_layers`` of them ``top`` instead."""

    def kinds(num_layers: int, nsa_layers: int) -> list[str]:
        if top is None:
            return [bottom] * num_layers
        if not 1 <= nsa_layers <= num_layers:
            raise UserError(f"nsa_layers={nsa_layers} must lie in 1 .. num_layers={num_layers}")
        return [bottom] * (num_layers - nsa_layers) + [top] * nsa_layers

    return kinds


#: variant name -> (num_layers, nsa_layers) -> layer kinds bottom-up (BNA's ablation rows).
VARIANTS: dict[str, Callable[[int, int], list[str]]] = {
    "sa": _stack("sa", None),          # plain self-attention (the baseline)
    "bimsa": _stack("bimsa", None),    # BiMSA only
    "sa_nsa": _stack("sa", "nsa"),     # self-attention with NSA on top
    "bna": _stack("bimsa", "nsa"),     # BiMSA with NSA on top: the paper's parser
}

POS_MODES = ("none", "spacy", "gold")

#: The training losses (``ParserConfig.loss``): bna/chart.margin_loss and bna/tree_crf.crf_loss.
LOSSES = ("margin", "crf")

#: The span scorers (``ParserConfig.scorer``): bna/chart.SpanLabelScorer and bna/biaffine.BiaffineSpanScorer.
SCORERS = ("mlp", "biaffine")
