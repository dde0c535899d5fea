"""SG-Net (Zhang et al. 2020): an encoder, a syntax-guided layer with an aggregation on top, and a task head.

    h  = encoder(input_ids; structure_mask)           [b, T, d]  a transformers base model, optionally with a
                                                                 structattn mechanism installed
    h̄  = SyntaxGuidedBlock(h; sg_mask, sg_tokens)      [b, T, d]  absent for aggregation "none" (the baseline:
                                                                 h̄ = h)
    head(h̄)                                                       span_qa | multiple_choice | classification | tagging

Example::

    cfg = SGNetConfig(aggregation="dual", head="span_qa")
    model = SGNetModel.from_encoder("bert-base-uncased", cfg)                  # or mechanism="sla", m=3 ...
    out = model(input_ids, attention_mask, token_type_ids, sg_mask=M, sg_tokens=S,
                start_positions=s, end_positions=e)                          # out.loss, out.start_logits
    model.save_pretrained("run/"); model = SGNetModel.from_pretrained("run/")

One class per head, as transformers' task classes: [`SGNetForSpanQA`][structattn.sgnet.model.SGNetForSpanQA],
[`SGNetForMultipleChoice`][structattn.sgnet.model.SGNetForMultipleChoice],
[`SGNetForSequenceClassification`][structattn.sgnet.model.SGNetForSequenceClassification] (regression with one label)
and [`SGNetForTagging`][structattn.sgnet.model.SGNetForTagging], each an
[`SGNetModel`][structattn.sgnet.model.SGNetModel] (the encoder, the SG part, pooling, saving) that declares its output
modules and computes its logits and loss. ``SGNetModel(encoder, config)``, ``from_encoder`` and ``from_pretrained``
build the class of ``config.head`` (`SGNET_HEADS`); ``isinstance(model, SGNetModel)`` holds for every head.

Heads carry transformers' names, so a stock task class loads the baseline: ``qa_outputs`` (d -> 2, as
``BertForQuestionAnswering``), ``classifier`` after a dropout (multiple choice d -> 1, classification
d -> num_labels, both on a pooler dense + tanh of the first token; tagging d -> num_labels per token). The
pooler is the encoder's own when it has one (BERT, RoBERTa, XLM-R, ALBERT: saved as ``bert.pooler.dense`` ...,
applied to h̄ instead of h); otherwise (ELECTRA, DistilBERT) the model owns ``pooler.dense``.

Saved folder ([`SGNetModel.save_pretrained`][structattn.sgnet.model.SGNetModel.save_pretrained]): ``config.json`` is the
encoder's config (with the ``structattn`` mechanism entry when one is installed, ``num_labels`` set for the
classification and tagging heads) plus ``structattn_sgnet`` = [`SGNetConfig`][structattn.sgnet.model.SGNetConfig];
``model.safetensors`` holds the encoder under its base-model prefix (``bert.`` ...), the head under transformers' names
and the SG part under ``sgnet.``. A model with an SG part (or a mechanism) saves as ``model_type: structattn``
(`structattn.models.saved_type`): transformers' ``AutoModel*`` refuse an SG part in one line (load it with this class
or ``structattn.Reader``); for the baseline (aggregation ``none``) ``AutoModelFor*`` loads the whole model (for the
pooled heads when the encoder has its own pooler), with its mechanism when it has one.
``save_pretrained(folder, packed=True)`` writes the smaller form of `structattn.models.packing` (int8 matrices with row
scales); ``from_pretrained`` reads both forms, the packed one dequantised to float32.

Positions outside ``sg_tokens`` keep h̄ = h (the paper's footnote 9). The pooled heads read position 0
([CLS]): when ``sg_tokens`` excludes it, the SG part cannot reach their logits (a warning says so once).
"""
from __future__ import annotations

import copy
import dataclasses
import inspect
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from ..config_io import JsonConfig
from ..errors import UserError
from .layer import AGGREGATIONS, INITS, LayerSizes, SyntaxGuidedBlock, bert_init
from ..verbosity import quiet_loading

Tensor = torch.Tensor

AGGREGATION_NAMES = ("none",) + tuple(AGGREGATIONS)
from .names import POOLS  # noqa: E402  (re-exported)
# HEADS, the head names, is derived from SGNET_HEADS (the head classes) at the end of the module
CONFIG_KEY = "structattn_sgnet"


@dataclass
class SGNetConfig(JsonConfig):
    """What SG-Net adds to an encoder (saved in ``config.json`` under ``structattn_sgnet``).

    Fields:
        aggregation: ``none`` (baseline: head on the encoder output), ``dual``, ``sg_only``, ``vanilla``,
            ``concat``, ``biattention`` ([`structattn.sgnet.layer`][structattn.sgnet.layer]).
        alpha: the ``dual`` weight α of the encoder output (the paper: 0.5); None = learned weights
            (the official code: γ softmax(w)).
        init: the extra layer starts ``fresh`` (BERT's initialisation) or as a ``copy`` of the encoder's
            last layer.
        head: ``span_qa``, ``multiple_choice``, ``classification`` or ``tagging``.
        num_labels: classes of the classification and tagging heads (classification with 1 = regression).
        dropout: dropout before the ``classifier`` (None = the encoder's ``classifier_dropout`` or hidden
            dropout, as transformers' task classes); the span head has none, like ``BertForQuestionAnswering``.
        pool: what the pooled heads (multiple choice, classification) read: ``first`` = h̄ at position 0
            ([CLS], the paper and transformers), ``mean`` = the mean of h̄ over the real tokens. One SG layer
            cannot bring syntax to position 0: [CLS] is no word of any parse, so its SG output is either left
            out (the paper's footnote 9) or an unmasked re-reading of the encoder output; ``mean`` reads the
            words' aggregated outputs, where the SG layer's output is. ``option`` (multiple choice only) = the
            mean of h̄ over the option's own tokens (``pool_mask``): the one pool whose C vectors differ from the
            start (a mean over a whole input of hundreds of tokens barely moves when a few option tokens change),
            and words, so the SG layer's output reaches it.
    """

    aggregation: str = "dual"
    alpha: float | None = 0.5
    init: str = "fresh"
    head: str = "span_qa"
    num_labels: int = 2
    dropout: float | None = None
    pool: str = "first"

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """[`UserError`][structattn.errors.UserError] naming the bad field and the valid values."""
        choices = {"aggregation": AGGREGATION_NAMES, "init": INITS, "head": HEADS, "pool": POOLS}
        for name, valid in choices.items():
            if getattr(self, name) not in valid:
                raise UserError(f"SG-Net: unknown {name} {getattr(self, name)!r}; valid: {', '.join(valid)}")
        if self.alpha is not None and not 0.0 <= float(self.alpha) <= 1.0:
            raise UserError(f"SG-Net: alpha={self.alpha} must lie in [0, 1], or be null for learned weights")
        if isinstance(self.num_labels, bool) or not isinstance(self.num_labels, int) or self.num_labels < 1:
            raise UserError(f"SG-Net: num_labels={self.num_labels!r} must be a positive integer")
        if self.pool not in SGNET_HEADS[self.head].pools:
            raise UserError(f"SG-Net: pool 'option' reads the tokens of a multiple-choice option; the {self.head} "
                            "head has none (use pool 'first' or 'mean')")
        if self.dropout is not None and not 0.0 <= float(self.dropout) < 1.0:
            raise UserError(f"SG-Net: dropout={self.dropout} must lie in [0, 1)")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config") -> "SGNetConfig":
        cfg = super().from_dict(data, source)
        cfg.validate()  # from_dict sets fields one by one after construction
        return cfg


def _pooler_dense(encoder: nn.Module) -> nn.Linear | None:
    """The encoder's own pooler projection (BERT/RoBERTa/XLM-R ``pooler.dense``, ALBERT ``pooler``) or None."""
    pooler = getattr(encoder, "pooler", None)
    if isinstance(pooler, nn.Linear):
        return pooler
    dense = getattr(pooler, "dense", None)
    return dense if isinstance(dense, nn.Linear) else None


def _has_prefix(weights: Path, prefix: str) -> bool:
    """Whether the safetensors file ``weights`` holds a tensor whose name starts with ``prefix``."""
    from safetensors import safe_open

    with safe_open(str(weights), framework="pt") as f:
        return any(key.startswith(prefix) for key in f.keys())


class Pooler(nn.Module):
    """dense + tanh of the first token: hidden [b, T, d] -> [b, d] (for encoders without a pooler)."""

    def __init__(self, hidden: int):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)

    def forward(self, pooled: Tensor) -> Tensor:
        """pooled [b, d] (the first token's h̄, or a mean) -> [b, d]."""
        return torch.tanh(self.dense(pooled))


class SGNetModel(nn.Module):
    """SG-Net around a transformers base model (module docstring): the encoder, the SG part and what every head
    shares (input checks, the pooled vector, saving and loading). Each head is a subclass (`SGNET_HEADS`)
    that declares its output modules and computes its logits and loss in `_head`.

    ``SGNetModel(encoder, config)`` builds the head class of ``config.head``
    ([`head_class`][structattn.sgnet.model.SGNetModel.head_class]), as do
    [`from_encoder`][structattn.sgnet.model.SGNetModel.from_encoder] and
    [`from_pretrained`][structattn.sgnet.model.SGNetModel.from_pretrained]; every head is an ``SGNetModel``. A head
    class called by its own name takes only its own head's config.

    Args:
        encoder: a transformers base model (``AutoModel``), possibly with a structattn mechanism installed.
        config: [`SGNetConfig`][structattn.sgnet.model.SGNetConfig]. With ``init="copy"`` the extra layer copies
            ``encoder``'s last layer.

    The encoder is registered under its ``base_model_prefix`` (``model.bert`` ...) and reachable as
    [`base_model`][structattn.sgnet.model.SGNetModel.base_model]; the SG part is ``model.sgnet`` (None for aggregation
    ``none``). The heads that do not pool (span_qa, tagging) remove the encoder's pooler (``encoder.pooler = None``), as
    transformers' task classes build theirs without one.
    """

    #: the `SGNetConfig.head` this class computes
    head_name: ClassVar[str] = ""
    #: whether the head reads the pooled vector (`pool`): it keeps the encoder's pooler or owns one
    pooled: ClassVar[bool] = False
    #: the `SGNetConfig.pool` values the head takes
    pools: ClassVar[tuple[str, ...]] = ("first", "mean")

    def __new__(cls, *args: Any, **kwargs: Any) -> "SGNetModel":
        """``SGNetModel(encoder, config)`` is an instance of ``config.head``'s class (then ``__init__`` runs)."""
        if cls is SGNetModel:
            config = kwargs.get("config", args[1] if len(args) > 1 else None)
            if config is not None:  # copy and pickle call __new__ without arguments, on the head class itself
                cls = SGNetModel.head_class(config.head)
        return super().__new__(cls)

    def __init__(self, encoder: nn.Module, config: SGNetConfig):
        super().__init__()
        config.validate()
        if config.head != self.head_name:
            raise UserError(f"{type(self).__name__} computes the {self.head_name} head, not {config.head!r}; build "
                            f"SGNetModel(encoder, config) to get the class of the config's head")
        self.config = config
        prefix = getattr(encoder, "base_model_prefix", "") or "encoder"
        if prefix in ("sgnet", "pooler", "classifier", "qa_outputs", "dropout", "config"):
            raise UserError(f"encoder base_model_prefix {prefix!r} clashes with an SG-Net module name")
        self.base_model_prefix = prefix
        setattr(self, prefix, encoder)
        self.sizes = LayerSizes.from_config(encoder.config)
        self._takes_token_types = "token_type_ids" in inspect.signature(encoder.forward).parameters
        self._warned_cls = False
        if not self.pooled and getattr(encoder, "pooler", None) is not None:
            # Unused by these heads (transformers' own QA and tagging classes build the encoder without it):
            # unused parameters would stall distributed training.
            encoder.pooler = None

        self.sgnet: SyntaxGuidedBlock | None = None
        if config.aggregation != "none":
            self.sgnet = SyntaxGuidedBlock(self.sizes, config.aggregation, config.alpha)
            self.sgnet.init_from(config.init, encoder)

    # ------------------------------------------------------------------ construction

    @property
    def base_model(self) -> nn.Module:
        """The encoder (a transformers base model)."""
        return getattr(self, self.base_model_prefix)

    @staticmethod
    def head_class(head: str) -> type["SGNetModel"]:
        """The class of a head name (`SGNET_HEADS`)."""
        if head not in SGNET_HEADS:
            raise UserError(f"SG-Net: unknown head {head!r}; valid: {', '.join(SGNET_HEADS)}")
        return SGNET_HEADS[head]

    def _add_classifier(self, outputs: int) -> None:
        """``dropout`` then ``classifier`` (d -> outputs), and ``pooler`` for a pooled head on an encoder without
        one; BERT's initialisation. Dropout rate: ``config.dropout``, else the encoder's ``classifier_dropout``,
        else its hidden dropout (as transformers' task classes)."""
        d = self.sizes.hidden
        rate = self.config.dropout
        if rate is None:
            rate = getattr(self.base_model.config, "classifier_dropout", None)
        if rate is None:
            rate = self.sizes.hidden_dropout
        self.dropout = nn.Dropout(float(rate))
        self.classifier = nn.Linear(d, outputs)
        if self.pooled and _pooler_dense(self.base_model) is None:
            self.pooler = Pooler(d)
        for name in ("classifier", "pooler"):
            if hasattr(self, name):
                bert_init(getattr(self, name), self.sizes.initializer_range)

    @classmethod
    def from_encoder(cls, name_or_path: str, config: SGNetConfig, mechanism: Any = None,
                     **options: Any) -> "SGNetModel":
        """SG-Net on a pretrained encoder (a Hugging Face name or folder).

        mechanism: None = the encoder's stock attention; else a structattn mechanism (name, dict or
        ``MechanismConfig``) loaded through
        [`structattn.models.encoder.from_pretrained`][structattn.models.encoder.from_pretrained] with ``options``
        (mechanism options and transformers' ``from_pretrained`` keywords).
        """
        config.validate()
        # the SG layer and head are created in float32: load the encoder in float32 too, whatever dtype its
        # checkpoint was stored in (transformers v5 keeps the stored dtype, which would mix dtypes in the head)
        options.setdefault("dtype", torch.float32)
        if mechanism is not None:
            from ..models.encoder import from_pretrained

            encoder = from_pretrained(name_or_path, task="base", mechanism=mechanism, **options)
        else:  # the encoder as saved (its mechanism included), also the encoder part of an SG-Net folder
            from ..models.encoder import load_as_saved

            encoder = load_as_saved(name_or_path, **options)
        return cls(encoder, config)

    # ------------------------------------------------------------------ forward

    def _flatten(self, name: str, x: Tensor | None, dims: int, batch: int, choices: int | None) -> Tensor | None:
        """Check that ``x`` is [b, ...] (or [b, C, ...] for multiple choice) with ``dims`` dimensions after
        those, and merge b and C."""
        if x is None:
            return None
        if not isinstance(x, torch.Tensor):
            x = torch.as_tensor(x)
        lead = (batch,) if choices is None else (batch, choices)
        want = len(lead) + dims
        if x.dim() != want or tuple(x.shape[:len(lead)]) != lead:
            shape = "[batch, choices, ...]" if choices is not None else "[batch, ...]"
            raise UserError(f"{name} has shape {tuple(x.shape)}; expected {want} dimensions {shape} starting "
                            f"with {list(lead)} (like input_ids {'[batch, choices, T]' if choices else '[batch, T]'})")
        return x.reshape(-1, *x.shape[len(lead):]) if choices is not None else x

    def sequence_output(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                        token_type_ids: Tensor | None = None, structure_mask: Tensor | None = None,
                        sg_mask: Tensor | None = None, sg_tokens: Tensor | None = None,
                        **encoder_kwargs: Any) -> tuple[Tensor, Any]:
        """The head's input h̄ [b, T, d] and the encoder's output (its ``last_hidden_state`` is h).

        input_ids, attention_mask, token_type_ids [b, T]; structure_mask [b, T, T] bool for the encoder's
        mechanism (None for stock attention); sg_mask [b, T, T] bool for the SG layer (needed unless the
        aggregation is ``none`` or ``vanilla``, ignored there); sg_tokens [b, T] bool (None = every position
        takes h̄). ``encoder_kwargs`` go to the encoder (e.g. ``output_gates=True``).
        """
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        kwargs = dict(encoder_kwargs)
        if token_type_ids is not None and self._takes_token_types:
            kwargs["token_type_ids"] = token_type_ids
        if structure_mask is not None:
            kwargs["structure_mask"] = structure_mask
        enc = self.base_model(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        h = enc.last_hidden_state if hasattr(enc, "last_hidden_state") else enc[0]
        if self.sgnet is None:
            return h, enc
        return self.sgnet(h, attention_mask != 0, sg_mask, sg_tokens), enc

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None,
                structure_mask: Tensor | None = None, sg_mask: Tensor | None = None, sg_tokens: Tensor | None = None,
                labels: Tensor | None = None, start_positions: Tensor | None = None,
                end_positions: Tensor | None = None, pool_mask: Tensor | None = None, **encoder_kwargs: Any):
        """Logits (and the loss when labels are given) of the head.

        Shapes: input_ids, attention_mask, token_type_ids [b, T] ([b, C, T] for multiple choice); structure_mask,
        sg_mask [b, T, T] ([b, C, T, T]); sg_tokens [b, T] ([b, C, T]); pool_mask [b, C, T] bool, the option's
        tokens (needed by ``pool="option"``, ignored otherwise).

        Labels and outputs (transformers' output classes; ``gates`` added when the encoder returns them):
            span_qa: start_positions, end_positions [b] -> start_logits, end_logits [b, T]; loss = mean of the
                two cross-entropies, positions clamped to T and ignored there (BertForQuestionAnswering).
            multiple_choice: labels [b] -> logits [b, C]; cross-entropy.
            classification: labels [b] -> logits [b, num_labels]; cross-entropy, or MSE when num_labels = 1.
            tagging: labels [b, T] (-100 ignored) -> logits [b, T, num_labels]; cross-entropy.
        """
        if not isinstance(input_ids, torch.Tensor):
            input_ids = torch.as_tensor(input_ids)
        choices = self._choices(input_ids)
        b = input_ids.shape[0]
        flat = {name: self._flatten(name, x, dims, b, choices) for name, x, dims in (
            ("input_ids", input_ids, 1), ("attention_mask", attention_mask, 1), ("token_type_ids", token_type_ids, 1),
            ("structure_mask", structure_mask, 2), ("sg_mask", sg_mask, 2), ("sg_tokens", sg_tokens, 1))}
        self._check_cls(flat["sg_tokens"])
        pool_tokens = self._pool_tokens(flat["attention_mask"], pool_mask, b, choices)
        hbar, enc = self.sequence_output(**flat, **encoder_kwargs)
        out = self._head(hbar, pool_tokens, b, choices, labels, start_positions, end_positions)
        gates = enc.get("gates") if hasattr(enc, "get") else None
        if gates is not None:
            out["gates"] = gates
        return out

    def _choices(self, input_ids: Tensor) -> int | None:
        """C of input_ids [b, C, T] for a head that takes options; None for the others, which take [b, T]."""
        if input_ids.dim() != 2:
            raise UserError(f"input_ids has shape {tuple(input_ids.shape)}; expected [batch, T]")
        return None

    def _pool_tokens(self, attention_mask: Tensor | None, pool_mask: Tensor | None, b: int,
                     choices: int | None) -> Tensor | None:
        """The tokens ``pool="mean"`` averages, [b(*C), T]: the real ones (attention_mask)."""
        return attention_mask

    def _check_cls(self, sg_tokens: Tensor | None) -> None:
        """Warn once when a pooled head's position 0 is outside sg_tokens: the SG part cannot reach its logits."""
        if (self._warned_cls or sg_tokens is None or self.sgnet is None or not self.sgnet.masked
                or not self.pooled or self.config.pool != "first"):
            return
        if not bool(sg_tokens[:, 0].all()):
            self._warned_cls = True
            warnings.warn(f"SG-Net: the {self.config.head} head pools position 0 ([CLS]), which sg_tokens leaves "
                          "out: there h̄ = h, so the syntax-guided layer does not reach the logits. Include position "
                          "0 in sg_tokens (or pass sg_tokens=None) to use it", UserWarning,
                          stacklevel=5)  # _check_cls, forward, two nn.Module call frames, the caller

    def pool(self, hbar: Tensor, tokens: Tensor | None) -> Tensor:
        """h̄ [b, T, d], tokens [b, T] (None = all) -> [b, d]: tanh(dense(x)), x = h̄ at position 0
        (``pool="first"``) or the mean of h̄ over ``tokens`` (``"mean"``: the real tokens; ``"option"``: the
        option's, `_pool_tokens`); the encoder's pooler when it has one."""
        if self.config.pool in ("mean", "option"):
            real = (torch.ones(hbar.shape[:2], device=hbar.device) if tokens is None
                    else (tokens != 0).to(hbar.dtype)).unsqueeze(-1)
            x = (hbar * real).sum(1) / real.sum(1).clamp_min(1.0)
        else:
            x = hbar[:, 0]
        dense = _pooler_dense(self.base_model)
        if dense is None:
            return self.pooler(x)
        return torch.tanh(dense(x))

    def _head(self, hbar: Tensor, pool_tokens: Tensor | None, b: int, choices: int | None, labels: Tensor | None,
              start_positions: Tensor | None, end_positions: Tensor | None):
        """The head's output (a transformers ``ModelOutput``, loss set when its labels are given) from h̄
        [b(*C), T, d]; pool_tokens [b(*C), T] from `_pool_tokens`."""
        raise NotImplementedError(f"{type(self).__name__} has no head: build SGNetModel(encoder, config)")

    # ------------------------------------------------------------------ saving

    def hf_config(self):
        """The encoder's transformers config as saved: ``structattn_sgnet`` added, ``num_labels`` (and
        ``problem_type`` for regression) set for the classification and tagging heads."""
        from ..models.saved_type import mark

        cfg = copy.deepcopy(self.base_model.config)
        self._label_config(cfg)
        setattr(cfg, CONFIG_KEY, self.config.to_dict())
        if self.config.aggregation != "none" or getattr(cfg, "structattn", None):
            # saved as model_type structattn: AutoModel* refuse an SG part instead of loading the encoder alone, and
            # load a mechanism with its gates (the baseline on a stock encoder stays loadable by the stock class)
            mark(cfg)
        return cfg

    def _label_config(self, cfg: Any) -> None:
        """Set what transformers' task class of this head reads from the config (``num_labels`` ...)."""

    def save_pretrained(self, folder: str | Path, *, packed: bool = False, **packing: Any) -> None:
        """Write ``config.json`` and ``model.safetensors`` into ``folder`` (module docstring).

        ``packed=True``: the smaller form of `structattn.models.packing` (int8 matrices with row scales,
        tensors of a pip package by reference); ``packing`` goes to `pack_state_dict`
        (``quantize``, ``min_elements``, ``encoder_package``).
        [`from_pretrained`][structattn.sgnet.model.SGNetModel.from_pretrained] reads both forms."""
        from safetensors.torch import save_file, save_model

        from ..io import atomic_write_text

        folder = Path(folder)
        config = self.hf_config()
        tensors = None
        if packed:  # packed before anything is written: a refused reference leaves the folder as it was
            from ..models.packing import PACKING_KEY, pack_state_dict

            tensors, meta = pack_state_dict(self.state_dict(), prefix=self.base_model_prefix, **packing)
            setattr(config, PACKING_KEY, meta)
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / "config.json", config.to_json_string(use_diff=False))
        tmp = folder / ".model.safetensors.tmp"
        if tensors is None:
            save_model(self, str(tmp), metadata={"format": "pt"})
        else:
            save_file(tensors, str(tmp), metadata={"format": "pt"})
        os.replace(tmp, folder / "model.safetensors")

    @classmethod
    @quiet_loading()
    def from_pretrained(cls, folder: str | Path, device: str | torch.device = "cpu") -> "SGNetModel":
        """Load a folder written by [`save_pretrained`][structattn.sgnet.model.SGNetModel.save_pretrained] (offline) as
        its head's class; the model is in eval mode."""
        from safetensors.torch import load_model
        from transformers import AutoConfig, AutoModel

        folder = Path(folder)
        config_path, weights = folder / "config.json", folder / "model.safetensors"
        if not config_path.is_file() or not weights.is_file():
            raise UserError(f"{folder} is not a saved SG-Net model: it needs config.json and model.safetensors "
                            "(written by SGNetModel.save_pretrained)")
        from ..config_io import read_json

        raw = read_json(config_path, "config file")
        if not isinstance(raw, dict) or not isinstance(raw.get(CONFIG_KEY), dict):
            raise UserError(f"{config_path} has no {CONFIG_KEY!r} entry: it is not an SG-Net model (load a plain "
                            "encoder with SGNetModel.from_encoder)")
        sg_config = SGNetConfig.from_dict(raw[CONFIG_KEY], source=f"{config_path}: {CONFIG_KEY}")
        from ..models.packing import PACKING_KEY
        from ..models.saved_type import unmark

        hf = unmark(AutoConfig.from_pretrained(str(folder)))

        for key in (CONFIG_KEY, PACKING_KEY):
            if hasattr(hf, key):
                delattr(hf, key)
        mechanism = getattr(hf, "structattn", None)
        if isinstance(mechanism, dict):
            from ..attention.integration import install
            from ..attention.mechanisms import MechanismConfig

            mech = MechanismConfig.from_dict(mechanism)
            encoder = AutoModel.from_config(hf, attn_implementation=mech.base, dtype=torch.float32)
            install(encoder, mech)
        else:
            encoder = AutoModel.from_config(hf, dtype=torch.float32)   # float32 like the head, as from_encoder
        # An encoder saved without its pooler (a reader's, whose span head removed it, carried on under a pooled
        # head that then owns a fresh pooler) is rebuilt without one, so that the same modules hold the weights.
        prefix = getattr(encoder, "base_model_prefix", "") or "encoder"
        if getattr(encoder, "pooler", None) is not None and not _has_prefix(weights, f"{prefix}.pooler."):
            encoder.pooler = None
        # The weights come from the file: a fresh extra layer avoids copying from the random encoder.
        model = cls(encoder, dataclasses.replace(sg_config, init="fresh"))  # the class of the saved head
        model.config = sg_config
        if isinstance(raw.get(PACKING_KEY), dict):  # the packed form: dequantised to float32 here
            from ..models.packing import unpack_state_dict

            state = unpack_state_dict(weights, raw[PACKING_KEY], config_path)
            missing, unexpected = model.load_state_dict(state, strict=False)
        else:
            missing, unexpected = load_model(model, str(weights), strict=False, device=str(device))
        if missing or unexpected:
            raise UserError(f"{weights} does not match the SG-Net model in {config_path}: missing "
                            f"{sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]}")
        return model.to(device).eval()


# ---------------------------------------------------------------------------------------------------- heads


class SGNetForSpanQA(SGNetModel):
    """Span QA (SQuAD): ``qa_outputs`` (d -> 2) on every token, as ``BertForQuestionAnswering`` (no dropout)."""

    head_name = "span_qa"

    def __init__(self, encoder: nn.Module, config: SGNetConfig):
        super().__init__(encoder, config)
        self.qa_outputs = nn.Linear(self.sizes.hidden, 2)
        bert_init(self.qa_outputs, self.sizes.initializer_range)

    def _head(self, hbar, pool_tokens, b, choices, labels, start_positions, end_positions):
        """start_logits, end_logits [b, T]; loss = the mean of the two cross-entropies, positions clamped to T
        and ignored there."""
        from transformers.modeling_outputs import QuestionAnsweringModelOutput

        start, end = self.qa_outputs(hbar).split(1, dim=-1)
        start, end = start.squeeze(-1).contiguous(), end.squeeze(-1).contiguous()
        loss = None
        if start_positions is not None and end_positions is not None:
            ignored = start.shape[1]
            s = torch.as_tensor(start_positions, device=start.device).reshape(-1).clamp(0, ignored)
            e = torch.as_tensor(end_positions, device=start.device).reshape(-1).clamp(0, ignored)
            loss = (F.cross_entropy(start, s, ignore_index=ignored)
                    + F.cross_entropy(end, e, ignore_index=ignored)) / 2
        return QuestionAnsweringModelOutput(loss=loss, start_logits=start, end_logits=end)


class SGNetForMultipleChoice(SGNetModel):
    """Multiple choice (RACE, MCTest): ``classifier`` (d -> 1) after ``dropout`` on each option's pooled vector,
    as ``BertForMultipleChoice``; inputs [b, C, ...] are read as b·C sequences."""

    head_name = "multiple_choice"
    pooled = True
    pools = POOLS

    def __init__(self, encoder: nn.Module, config: SGNetConfig):
        super().__init__(encoder, config)
        self._add_classifier(1)

    def _choices(self, input_ids: Tensor) -> int | None:
        if input_ids.dim() != 3:
            raise UserError(f"the multiple-choice head takes input_ids [batch, choices, T]; got shape "
                            f"{tuple(input_ids.shape)}")
        return input_ids.shape[1]

    def _pool_tokens(self, attention_mask, pool_mask, b, choices):
        """``pool="option"``: the option's tokens (pool_mask [b, C, T] -> [b·C, T]); else the real ones."""
        if self.config.pool != "option":
            return attention_mask
        if pool_mask is None:
            raise UserError("pool 'option' needs pool_mask [batch, choices, T] (True on the option's tokens; "
                            "MultipleChoiceCollator(..., option_mask=True) builds it)")
        return self._flatten("pool_mask", pool_mask, 1, b, choices)

    def _head(self, hbar, pool_tokens, b, choices, labels, start_positions, end_positions):
        """logits [b, C]; cross-entropy over the options."""
        from transformers.modeling_outputs import MultipleChoiceModelOutput

        logits = self.classifier(self.dropout(self.pool(hbar, pool_tokens))).view(b, choices)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits, torch.as_tensor(labels, device=logits.device).reshape(-1).long())
        return MultipleChoiceModelOutput(loss=loss, logits=logits)


class SGNetForSequenceClassification(SGNetModel):
    """Sentence (pair) classification, or regression when ``num_labels`` is 1: ``classifier`` (d -> num_labels)
    after ``dropout`` on the pooled vector, as ``BertForSequenceClassification``."""

    head_name = "classification"
    pooled = True

    def __init__(self, encoder: nn.Module, config: SGNetConfig):
        super().__init__(encoder, config)
        self._add_classifier(config.num_labels)

    def _head(self, hbar, pool_tokens, b, choices, labels, start_positions, end_positions):
        """logits [b, num_labels]; cross-entropy, or MSE for one label."""
        from transformers.modeling_outputs import SequenceClassifierOutput

        logits = self.classifier(self.dropout(self.pool(hbar, pool_tokens)))
        loss = None
        if labels is not None:
            lab = torch.as_tensor(labels, device=logits.device)
            if self.config.num_labels == 1:
                loss = F.mse_loss(logits.squeeze(-1), lab.reshape(-1).to(logits.dtype))
            else:
                loss = F.cross_entropy(logits, lab.reshape(-1).long())
        return SequenceClassifierOutput(loss=loss, logits=logits)

    def _label_config(self, cfg: Any) -> None:
        cfg.num_labels = self.config.num_labels
        if self.config.num_labels == 1:
            cfg.problem_type = "regression"


class SGNetForTagging(SGNetModel):
    """Token tagging (POS, NER, error detection): ``classifier`` (d -> num_labels) after ``dropout`` on every
    token, as ``BertForTokenClassification``."""

    head_name = "tagging"

    def __init__(self, encoder: nn.Module, config: SGNetConfig):
        super().__init__(encoder, config)
        self._add_classifier(config.num_labels)

    def _head(self, hbar, pool_tokens, b, choices, labels, start_positions, end_positions):
        """logits [b, T, num_labels]; cross-entropy over the tokens whose label is not -100."""
        from transformers.modeling_outputs import TokenClassifierOutput

        logits = self.classifier(self.dropout(hbar))
        loss = None
        if labels is not None:
            lab = torch.as_tensor(labels, device=logits.device)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), lab.reshape(-1).long(), ignore_index=-100)
        return TokenClassifierOutput(loss=loss, logits=logits)

    def _label_config(self, cfg: Any) -> None:
        cfg.num_labels = self.config.num_labels


#: head name (`SGNetConfig.head`) -> its class; ``SGNetModel(encoder, config)`` builds ``config.head``'s
SGNET_HEADS: dict[str, type[SGNetModel]] = {
    cls.head_name: cls for cls in (SGNetForSpanQA, SGNetForMultipleChoice, SGNetForSequenceClassification,
                                   SGNetForTagging)}
HEADS = tuple(SGNET_HEADS)


__all__ = ["AGGREGATION_NAMES", "CONFIG_KEY", "HEADS", "Pooler", "SGNET_HEADS", "SGNetConfig", "SGNetForMultipleChoice",
           "SGNetForSequenceClassification", "SGNetForSpanQA", "SGNetForTagging", "SGNetModel"]
