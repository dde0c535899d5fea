"""Training a translation model (Multi30k En->De by default): resumable, early stopping on dev BLEU.

Recipe (Vaswani et al.'s, at the sizes of `structattn.translation.model.SIZES`): label-smoothed
cross-entropy (0.1), Adam (0.9, 0.98, eps 1e-9), linear warm-up to ``learning_rate`` then inverse square
root, batches of at most ``max_tokens`` padded tokens per side, dev BLEU (greedy, ``eval_beam``) every
``eval_every`` updates, stop after ``patience`` evaluations without a better dev BLEU or at
``max_updates``. The final model is the better on dev BLEU (beam ``beam``) of the best checkpoint and the
average of the last ``average_last`` evaluated checkpoints (0 or 1: the best checkpoint alone).

The translation family of [`structattn.train.engine`][structattn.train.engine]: data, the loss, dev BLEU and the final
selection are here; updates, several processes (``accelerate launch``: each process takes every N-th token batch, the
loss weighted by target tokens), checkpoints and resume are the engine's.

Folder ``output_dir``::

    settings.json        the settings a resume must match (run_config.json: the whole NMTConfig)
    tokenizer/           the joint BPE (learned once, on the kept training pairs)
    checkpoint/          the engine's: at every evaluation and every ``checkpoint_every`` updates, no pickle
    best/                the best dev-BLEU model (+ tokenizer)
    recent/              the last ``average_last`` evaluated weights
    final/               the chosen model (+ tokenizer): ``structattn translate --model OUTPUT_DIR/final``
    hypotheses/<split>.de  detokenised test translations, one line per source line
    summary.json         BLEU per test set, history (dev BLEU and mean training loss per evaluation), sizes,
                         wall time, throughput, device

Rerunning the same command resumes from ``checkpoint/`` (a finished run only redoes the final steps).
``precision`` (``--precision fp32|bf16|fp16``) is the engine's; only training runs in it: dev evaluation, model
selection and the test translations run in float32, the precision ``structattn translate`` uses.
"""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from .. import stopping
from .config import NMT_PRESETS, NMTConfig  # noqa: F401  (re-exported)
from ..errors import UserError
from ..io import atomic_write_json
from ..models.trained import model_folder_damage
from ..train.checkpoint import load_model_tensors, model_tensors, save_pretrained_atomically
from .data import TRAINING_BATCHES
from ..train.engine import (Engine, EngineState, Evaluation, Family, linear_schedule, run_facts,
                            warmup_inverse_sqrt)

BEST, FINAL, RECENT = "best", "final", "recent"


#: The stride of this family's seeded batch order (``seed * stride + epoch``, `epoch_seed`): the
#: committed Multi30k runs (results/nmt.jsonl, results/laptop/, results/precision/) were trained with it, and their
#: translations are reproduced byte for byte only under it; the other families use the engine's default.
TRANSLATION_ORDER_STRIDE = 100_003

#: ``--lr-decay``: the learning-rate factor after step ``step`` (1-based) of ``total``, with ``warmup`` linear
#: warm-up steps. ``linear`` reaches 0 one step after the last (the last update still learns).
LR_DECAYS: dict[str, Callable[[int, int, int], float]] = {  # keys: config.LR_DECAY_NAMES
    "inverse_sqrt": lambda step, warmup, total: warmup_inverse_sqrt(step, warmup),
    "linear": lambda step, warmup, total: linear_schedule(step, warmup, total + 1),
}


# ---------------------------------------------------------------------------------------------- data


@dataclass
class NMTData:
    """Encoded data of a run (ids per sentence; ``structure`` per split when the variant reads one)."""

    train_src: list
    train_tgt: list
    dev_texts: list
    dev_refs: list
    tests: dict  # split -> (source texts, reference texts)
    train_structure: Any = None
    filter_summary: str = ""


def _read_sets(config: NMTConfig, corpus: str | None = None):
    """(train, dev, {test name: data}): the splits of the registered translation corpus ``corpus`` (None: the
    default, Multi30k; `structattn.tasks.registry`), or the user's own files (own test set: ``test``)."""
    from ..tasks.multi30k import read_parallel
    from ..tasks.registry import corpus as registered_corpus, corpus_names

    own = [config.train_source, config.train_target, config.dev_source, config.dev_target]
    if any(own):
        if corpus is not None and corpus != corpus_names("translation")[0]:
            raise UserError(f"--corpus {corpus} and own parallel files (--train-source, ...) exclude each other; "
                            "give one of them")
        if not all(own):
            raise UserError("own data needs all four of --train-source, --train-target, --dev-source, --dev-target")
        train = read_parallel(config.train_source, config.train_target)
        dev = read_parallel(config.dev_source, config.dev_target)
        tests = {}
        if config.test_source or config.test_target:
            if not (config.test_source and config.test_target):
                raise UserError("an own test set needs both --test-source and --test-target")
            tests["test"] = read_parallel(config.test_source, config.test_target)
    else:
        reader = registered_corpus("translation", corpus)
        train, dev = reader.read_split("train", config.data_dir), reader.read_split("dev", config.data_dir)
        tests = {s: reader.read_split(s, config.data_dir) for s in config.test_splits}
    if config.max_train_examples:
        limit = config.max_train_examples
        train.sources, train.targets, train.line_numbers = (train.sources[:limit], train.targets[:limit],
                                                            train.line_numbers[:limit])
    return train, dev, tests


def load_tokenizer(config: NMTConfig, out: Path, train) -> Any:
    """The run's BPE: ``out/tokenizer`` when it exists, else learned on the training pairs and saved there."""
    from transformers import AutoTokenizer

    from .data import train_bpe_tokenizer

    folder = out / "tokenizer"
    if folder.is_dir():
        problem = model_folder_damage(folder)
        if problem:  # the run's weights were trained with it: learning another one would not match them
            raise UserError(f"{problem}: the run's tokenizer is damaged and its checkpoint needs that one; restore "
                            f"{folder}, or give another --output-dir (or delete {out}) to start over")
        return AutoTokenizer.from_pretrained(str(folder))
    texts = [t for t in train.sources + train.targets if t.strip()]
    tokenizer = train_bpe_tokenizer(texts, vocab_size=config.vocab_size)
    save_pretrained_atomically(folder, tokenizer)
    return tokenizer


def prepare_data(config: NMTConfig, tokenizer, train, dev, tests, mechanism) -> NMTData:
    """Filter and encode the training pairs (counts printed); dev and test sets unfiltered. The training sources
    are parsed when ``mechanism`` (a MechanismConfig or None) reads a structure mask."""
    from ..tasks.multi30k import filter_training_pairs
    from .data import build_source_structure, encode_texts

    def length(texts):
        return [len(x) for x in encode_texts(tokenizer, texts)]

    kept, counts = filter_training_pairs(train, length, config.max_length)
    summary = counts.summary("train")
    if counts.empty or counts.too_long:  # nothing dropped without a note where notes go
        print(f"note: {train.source_path}: {summary}", file=sys.stderr)
    else:
        print(summary)
    data = NMTData(encode_texts(tokenizer, kept.sources), encode_texts(tokenizer, kept.targets),
                   list(dev.sources), list(dev.targets), {s: (d.sources, d.targets) for s, d in tests.items()},
                   filter_summary=summary)
    if mechanism is not None and mechanism.reads_structure:
        print("parsing the training sources (cached) ...")
        data.train_structure = build_source_structure(tokenizer, kept.sources, mechanism.relation,
                                                      **mechanism.relation_options())
    return data


# ---------------------------------------------------------------------------------------------- functions


def _label_smoothed_loss(logits: torch.Tensor, labels: torch.Tensor, smoothing: float) -> tuple[torch.Tensor, int]:
    """Mean label-smoothed cross-entropy over the non-padding target tokens (labels -100 = padding)."""
    tokens = int((labels != -100).sum())
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1),
                                             ignore_index=-100, label_smoothing=smoothing)
    return loss, tokens


def _decoder_inputs(labels: torch.Tensor, pad_id: int, start_id: int) -> torch.Tensor:
    """Teacher forcing: labels shifted right, starting with the decoder start token; padding -> pad."""
    shifted = labels.new_full(labels.shape, pad_id)
    shifted[:, 1:] = labels[:, :-1]
    shifted[:, 0] = start_id
    return shifted.masked_fill(shifted == -100, pad_id)


def _translate(model, tokenizer, texts, beam, length_penalty) -> list[str]:
    from .translator import Translator

    was_training = model.training
    model.eval()
    try:
        return Translator(model, tokenizer).translate(texts, beam=beam, length_penalty=length_penalty)
    finally:
        model.train(was_training)


def _average_weights(paths: list[Path]) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    total: dict[str, torch.Tensor] = {}
    for p in paths:
        for key, value in load_file(str(p)).items():
            total[key] = total.get(key, 0) + value.double()
    return {k: (v / len(paths)) for k, v in total.items()}


# ---------------------------------------------------------------------------------------------- the run


def check_max_length(config: NMTConfig) -> None:
    """A clear error when training pairs as long as ``max_length`` would not fit the size's position table (the
    model would fail with an IndexError on the first long batch)."""
    from .model import SIZES

    size = SIZES.get(config.size)  # an unknown size is refused, with the valid ones, when the model is built
    if size is not None and config.max_length > size.max_positions:
        raise UserError(f"--max-length {config.max_length}: size {config.size!r} has {size.max_positions} positions, "
                        f"so pairs up to {config.max_length} sub-words would not fit; pass --max-length "
                        f"{size.max_positions} or less, or a larger --size")


class TranslationFamily(Family):
    """The translation family of the engine: BPE-encoded pairs in token batches, label-smoothed cross-entropy,
    dev BLEU, and at the end the choice between the best and the averaged weights and the test translations."""

    main_metric = "dev_bleu"
    config_file = "run_config.json"
    order_stride = TRANSLATION_ORDER_STRIDE

    def __init__(self, config: NMTConfig, command: list[str] | None = None, corpus: str | None = None):
        from ..tasks.registry import corpus_names
        from .model import variant_mechanism

        self.config, self.command = config, command
        # the default corpus stays out of the settings: those of a Multi30k run are its config's alone
        self.corpus = None if corpus == corpus_names("translation")[0] else corpus
        self.out = Path(config.output_dir)
        self.mechanism = variant_mechanism(config.variant, **config.mechanism_options())
        if config.batching not in TRAINING_BATCHES:
            raise UserError(f"unknown --batching {config.batching!r}; valid: {', '.join(TRAINING_BATCHES)}")
        if config.lr_decay not in LR_DECAYS:
            raise UserError(f"unknown --lr-decay {config.lr_decay!r}; valid: {', '.join(LR_DECAYS)}")

    def settings(self) -> dict:
        settings = super().settings()
        return settings if self.corpus is None else {**settings, "corpus": self.corpus}

    def load_data(self) -> None:
        from .data import TranslationCollator

        config = self.config
        train, dev, tests = _read_sets(config, self.corpus)
        with self.engine.acc.main_process_first():  # the main process learns the BPE and parses; the others read
            self.tokenizer = load_tokenizer(config, self.out, train)
            self.data = prepare_data(config, self.tokenizer, train, dev, tests, self.mechanism)
        self.collate = TranslationCollator(self.tokenizer.pad_token_id)
        self.src_len = [len(x) for x in self.data.train_src]
        self.tgt_len = [len(x) for x in self.data.train_tgt]

    def build_model(self):
        from .model import build_model

        config = self.config
        self.engine.seed()
        self.model = build_model(self.tokenizer, config.size, config.variant, seed=config.seed,
                                 **config.model_options())
        return self.model

    def build_optimizer(self, model) -> torch.optim.Optimizer:
        return torch.optim.Adam(model.parameters(), lr=self.config.learning_rate, betas=(0.9, 0.98),
                                eps=self.config.adam_eps)

    def schedule(self, total: int):
        decay, warmup = LR_DECAYS[self.config.lr_decay], self.config.warmup
        return lambda step: decay(step + 1, warmup, total)

    def updates(self) -> tuple[int, int]:
        return self.config.max_updates, self.config.eval_every

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        return TRAINING_BATCHES[self.config.batching](self.src_len, self.tgt_len, self.config.max_tokens,
                                                      seed=self.epoch_order_seed(self.config.seed, epoch))

    def batch_loss(self, indices: list[int]):
        data, model, state = self.data, self.model, self.engine.state
        batch = self.collate([data.train_src[i] for i in indices], [data.train_tgt[i] for i in indices],
                             data.train_structure, indices if data.train_structure is not None else None)
        batch = {k: v.to(self.engine.device) for k, v in batch.items()}
        labels = batch.pop("labels")
        pad, start = self.tokenizer.pad_token_id, model.config.decoder_start_token_id
        logits = model(**batch, decoder_input_ids=_decoder_inputs(labels, pad, start)).logits
        value, tokens = _label_smoothed_loss(logits, labels, self.config.label_smoothing)
        state.extra["target_tokens"] = state.extra.get("target_tokens", 0) + tokens  # this process's
        return value, tokens

    def predict(self, inputs, beam: int | None = None) -> list[str]:
        """Translations of the texts ``inputs`` (beam ``beam``, default the config's)."""
        beam = self.config.beam if beam is None else beam
        return _translate(self.model, self.tokenizer, inputs, beam, self.config.length_penalty)

    def evaluate_dev(self, state: EngineState, end_of_epoch: bool) -> Evaluation:
        from ..tasks.bleu import corpus_bleu

        bleu = corpus_bleu(self.predict(self.data.dev_texts, self.config.eval_beam), self.data.dev_refs)["bleu"]
        return Evaluation({"step": state.step, "epoch": state.epoch - end_of_epoch, "dev_bleu": round(bleu, 2),
                           "train_seconds": round(state.train_seconds, 1)}, bleu)

    def on_evaluated(self, entry: dict) -> None:
        from safetensors.torch import save_file

        config, state, out = self.config, self.engine.state, self.out
        if config.average_last <= 1:
            return
        state.extra["recent"] = (state.extra.get("recent", []) + [state.step])[-config.average_last:]
        if self.engine.is_main:
            (out / RECENT).mkdir(exist_ok=True)
            with stopping.deferred():  # a signal waits for the file (a kill's half file is rewritten on resume)
                save_file(model_tensors(self.model), str(out / RECENT / f"step-{state.step}.safetensors"))
            for p in (out / RECENT).glob("step-*.safetensors"):
                if int(p.stem.split("-")[1]) not in state.extra["recent"]:
                    p.unlink()

    def on_best(self, entry: dict) -> None:
        if self.engine.is_main:
            save_pretrained_atomically(self.out / BEST, self.model, self.tokenizer)

    def summary(self, state: EngineState) -> dict:
        from .model import size_of

        summary = _finish(self.config, self.out, state, self.tokenizer, self.data, self.model)
        summary.update({"model": size_of(self.model), "command": self.command, "filter": self.data.filter_summary,
                        **run_facts(self.engine, self.model)})
        atomic_write_json(self.out / "summary.json", summary)
        return summary


def train_translation(config: NMTConfig, *, show_progress: bool = True, stop_after_updates: int | None = None,
                      command: list[str] | None = None, corpus: str | None = None) -> dict:
    """Train, select and test one translation run in ``config.output_dir``; return the summary dict (on the main
    process; the others return where they stopped).

    ``corpus``: the registered translation corpus read when the config names no own files (None: Multi30k).

    ``stop_after_updates`` (tests) returns right after that update without saving, as a kill would.
    """
    check_max_length(config)
    engine = Engine(config.output_dir, seed=config.seed, precision=config.precision, clip_norm=config.clip_norm,
                    checkpoint_every=config.checkpoint_every, show_progress=show_progress, name=config.variant)
    if config.threads:
        torch.set_num_threads(config.threads)
    summary = engine.train(TranslationFamily(config, command, corpus), stop_after=stop_after_updates)
    return summary if summary is not None else {"stopped_at_update": engine.state.step}


def _finish(config: NMTConfig, out: Path, state: EngineState, tokenizer, data: NMTData, model) -> dict:
    """Pick the final model (best vs averaged, by beam dev BLEU), save it, translate the test sets."""
    from safetensors.torch import load_file

    from ..tasks.bleu import corpus_bleu

    candidates = {"best": load_file(str(out / BEST / "model.safetensors"))}
    recent = [out / RECENT / f"step-{s}.safetensors" for s in state.extra.get("recent", [])]
    if config.average_last > 1 and len(recent) > 1 and all(p.is_file() for p in recent):
        candidates[f"average of last {len(recent)}"] = _average_weights(recent)
    dev_scores = {}
    for name, weights in candidates.items():
        load_model_tensors(model, weights)
        hyps = _translate(model, tokenizer, data.dev_texts, config.beam, config.length_penalty)
        dev_scores[name] = corpus_bleu(hyps, data.dev_refs)["bleu"]
        print(f"dev BLEU (beam {config.beam}) of {name}: {dev_scores[name]:.2f}")
    chosen = max(dev_scores, key=dev_scores.get)
    weights = candidates[chosen]
    load_model_tensors(model, weights)
    save_pretrained_atomically(out / FINAL, model, tokenizer)
    results = {}
    hyp_dir = out / "hypotheses"
    hyp_dir.mkdir(exist_ok=True)
    for split, (sources, refs) in data.tests.items():
        hyps = _translate(model, tokenizer, sources, config.beam, config.length_penalty)
        path = hyp_dir / f"{split}.de"
        path.write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
        scored = corpus_bleu(path.read_text(encoding="utf-8").split("\n")[:-1], refs)
        results[split] = {"bleu": round(scored["bleu"], 2), "hypotheses": str(path), "signature": scored["signature"]}
        print(f"{split}: BLEU {scored['bleu']:.2f}")
    return {"variant": config.variant, "seed": config.seed, "config": dataclasses.asdict(config),
            "final_model": chosen, "dev_bleu_beam": {k: round(v, 2) for k, v in dev_scores.items()},
            "best_step": state.best_step, "best_dev_bleu_greedy": state.best, "updates": state.step,
            "epochs": state.epoch, "history": state.history, "tests": results,
            "train_seconds": round(state.train_seconds, 1),
            # the main process's tokens times the processes (each takes as many batches)
            "target_tokens_per_second": round(state.extra.get("target_tokens", 0) * state.num_processes
                                              / max(state.train_seconds, 1e-9), 1)}

