"""Training a translation model (Multi30k En->De by default): resumable, early stopping on dev BLEU.

Recipe (Vaswani et al.'s, at the sizes of :data:`structattn.models.translation.SIZES`): label-smoothed
cross-entropy (0.1), Adam (0.9, 0.98, eps 1e-9), linear warm-up to ``learning_rate`` then inverse square
root, batches of at most ``max_tokens`` padded tokens per side, dev BLEU (greedy, ``eval_beam``) every
``eval_every`` updates, stop after ``patience`` evaluations without a better dev BLEU or at
``max_updates``. The final model is the better on dev BLEU (beam ``beam``) of the best checkpoint and the
average of the last ``average_last`` evaluated checkpoints (0 or 1: the best checkpoint alone).

Folder ``output_dir``::

    run_config.json      the NMTConfig (a rerun with other settings refuses to resume here)
    tokenizer/           the joint BPE (learned once, on the kept training pairs)
    checkpoint/          written atomically at every evaluation: model.safetensors, tensors.pt (optimizer
                         state, torch RNG state, fp16 loss scale; read with ``weights_only=True``) and
                         state.json (trainer state, Python and NumPy RNG states): no pickle
    best/                the best dev-BLEU model (+ tokenizer)
    recent/              the last ``average_last`` evaluated weights
    final/               the chosen model (+ tokenizer): ``structattn translate --model OUTPUT_DIR/final``
    hypotheses/<split>.de  detokenised test translations, one line per source line
    summary.json         BLEU per test set, history (dev BLEU and mean training loss per evaluation), sizes,
                         wall time, throughput, device

Rerunning the same command resumes from ``checkpoint/`` (a finished run only redoes the final steps).

``precision`` (``--precision``): ``fp32`` (default), ``bf16`` (forward and loss under bfloat16 autocast, float32
weights) or ``fp16`` (CUDA only, with loss scaling): see :mod:`structattn.train.precision`. It is part of the
run's settings, so a resume in another precision is refused. Only training runs in it: dev evaluation,
model selection and the test translations run in float32, the precision ``structattn translate`` uses, so the
recorded scores are those the saved (float32) weights give.

Checkpoints of earlier versions (``checkpoint/trainer.pt``: optimizer and RNG states in one ``torch.save``
pickle) are read once with ``torch.load(..., weights_only=True)`` - torch's restricted loader, which builds only
tensors, numbers, strings and containers and runs no code from the file - and rewritten at once in today's
layout. A ``trainer.pt`` that loader refuses is not read at all (unpickling it could run any code it holds): the
run stops with a :class:`~structattn.errors.UserError` that says to delete the folder or use another one.
"""
from __future__ import annotations

import dataclasses
import json
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..config_io import JsonConfig
from ..errors import UserError
from ..io import atomic_write_json
from .checkpoint import (AtomicDir, numpy_rng_json, python_rng_json, recover_atomic_dirs, set_numpy_rng,
                         set_python_rng, set_torch_rng, torch_rng_tensors)
from .precision import MixedPrecision, recorded_precision
from .running_mean import RunningMean

CHECKPOINT, BEST, FINAL, RECENT = "checkpoint", "best", "final", "recent"


@dataclass
class NMTConfig(JsonConfig):
    """One translation run. Mechanism options (``layers``, ``k``, ``gate``) override the variant's."""

    output_dir: str = "runs/nmt/run"
    variant: str = "transformer"
    size: str = "tiny"
    seed: int = 1
    data_dir: str | None = None  # the folder that holds multi30k/ (default: the data folder)
    train_source: str | None = None  # own parallel files instead of Multi30k (train and dev pairs needed,
    train_target: str | None = None  # a test pair optional)
    dev_source: str | None = None
    dev_target: str | None = None
    test_source: str | None = None
    test_target: str | None = None
    test_splits: list[str] = field(default_factory=lambda: ["test2016", "test2017", "test2018", "mscoco2017"])
    max_train_examples: int = 0  # 0 = all
    vocab_size: int = 8000
    max_length: int = 100  # training pairs with more sub-words on a side are dropped (counted)
    max_tokens: int = 4096
    learning_rate: float = 5e-3  # the Multi30k Transformer-tiny recipe (with 2,000 warm-up and 8,000 updates)
    warmup: int = 2000
    max_updates: int = 8000
    label_smoothing: float = 0.1
    clip_norm: float = 0.0  # 0 = no clipping
    eval_every: int = 500
    eval_beam: int = 1
    patience: int = 6
    average_last: int = 5
    beam: int = 5
    length_penalty: float = 1.0
    layers: int | None = None  # mechanism layers (default: the variant's, the lowest 2)
    k: int | None = None  # window half-width m of Xu et al. (local / hybrid variants)
    gate: str | None = None  # "token" or "head" (hybrid_gate, sla)
    precision: str = "fp32"  # fp32 | bf16 (autocast; CPUs with avx512_bf16/AMX, GPUs) | fp16 (CUDA only, loss scaling)
    threads: int = 0  # torch threads (0 = torch's default)

    def mechanism_options(self) -> dict[str, Any]:
        return {k: v for k, v in (("layers", self.layers), ("k", self.k), ("gate", self.gate)) if v is not None}


# Fields that never change what a run computes.
RESULT_NEUTRAL_FIELDS = frozenset({"output_dir", "threads"})


@dataclass
class NMTState:
    """Trainer state besides the tensors (``checkpoint/state.json``)."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    best_bleu: float | None = None
    best_step: int = -1
    evals_without_improvement: int = 0
    history: list = field(default_factory=list)
    recent: list = field(default_factory=list)  # steps whose weights are in recent/
    train_seconds: float = 0.0
    target_tokens: int = 0
    elapsed_seconds: float = 0.0
    finished: bool = False
    python_rng: Any = None  # random.getstate() as JSON lists (None in a checkpoint of an earlier version)
    numpy_rng: Any = None  # np.random.get_state() as JSON values (None: earlier versions did not save it)


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


def _read_sets(config: NMTConfig):
    """(train, dev, {test name: data}): Multi30k's splits, or the user's own files (own test set: ``test``)."""
    from ..tasks.multi30k import read_parallel, read_split

    own = [config.train_source, config.train_target, config.dev_source, config.dev_target]
    if any(own):
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
        train, dev = read_split("train", config.data_dir), read_split("dev", config.data_dir)
        tests = {s: read_split(s, config.data_dir) for s in config.test_splits}
    if config.max_train_examples:
        limit = config.max_train_examples
        train.sources, train.targets, train.line_numbers = (train.sources[:limit], train.targets[:limit],
                                                            train.line_numbers[:limit])
    return train, dev, tests


def load_tokenizer(config: NMTConfig, out: Path, train) -> Any:
    """The run's BPE: ``out/tokenizer`` when it exists, else learned on the training pairs and saved there."""
    from transformers import AutoTokenizer

    from ..heads.translation import train_bpe_tokenizer

    folder = out / "tokenizer"
    if folder.is_dir():
        return AutoTokenizer.from_pretrained(str(folder))
    texts = [t for t in train.sources + train.targets if t.strip()]
    tokenizer = train_bpe_tokenizer(texts, vocab_size=config.vocab_size)
    with AtomicDir(folder) as tmp:
        tokenizer.save_pretrained(str(tmp))
    return tokenizer


def prepare_data(config: NMTConfig, tokenizer, train, dev, tests, mechanism) -> NMTData:
    """Filter and encode the training pairs (counts printed); dev and test sets unfiltered. The training sources
    are parsed when ``mechanism`` (a MechanismConfig or None) reads a structure mask."""
    from ..tasks.multi30k import filter_training_pairs
    from ..heads.translation import build_source_structure, encode_texts

    def length(texts):
        return [len(x) for x in encode_texts(tokenizer, texts)]

    kept, counts = filter_training_pairs(train, length, config.max_length)
    summary = counts.summary("train")
    print(summary)
    data = NMTData(encode_texts(tokenizer, kept.sources), encode_texts(tokenizer, kept.targets),
                   list(dev.sources), list(dev.targets), {s: (d.sources, d.targets) for s, d in tests.items()},
                   filter_summary=summary)
    if mechanism is not None and mechanism.reads_structure:
        print("parsing the training sources (cached) ...")
        data.train_structure = build_source_structure(tokenizer, kept.sources, mechanism.relation,
                                                      **mechanism.relation_options())
    return data


# ---------------------------------------------------------------------------------------------- helpers


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _check_resume(config: NMTConfig, out: Path) -> None:
    path = out / "run_config.json"
    if not path.is_file():
        config.save(path)
        return
    saved = recorded_precision(json.loads(path.read_text(encoding="utf-8")))
    now = dataclasses.asdict(config)
    diff = sorted(k for k in set(saved) | set(now) if k not in RESULT_NEUTRAL_FIELDS and saved.get(k) != now.get(k))
    if diff:
        changes = ", ".join(f"{k}: {saved.get(k)!r} -> {now.get(k)!r}" for k in diff)
        raise UserError(f"{out} holds a run with other settings ({changes}); use another --output-dir, or the same "
                        "settings to resume")


OLD_TRAINER_FILE = "trainer.pt"  # the pickled trainer state of earlier versions (see the module docstring)


def _write_checkpoint(ckpt: Path, model, optimizer, precision: MixedPrecision, state: NMTState) -> None:
    """Write ``ckpt`` atomically: model.safetensors, tensors.pt, state.json (with the RNG states taken now)."""
    from safetensors.torch import save_file

    state.python_rng, state.numpy_rng = python_rng_json(), numpy_rng_json()
    with AtomicDir(ckpt) as tmp:
        save_file(_weights(model), str(tmp / "model.safetensors"))
        torch.save({"optimizer": optimizer.state_dict(), "rng": torch_rng_tensors(),
                    "scaler": precision.state_dict()}, tmp / "tensors.pt")
        atomic_write_json(tmp / "state.json", dataclasses.asdict(state))


def _read_checkpoint(ckpt: Path) -> tuple[NMTState, dict, bool]:
    """(state, tensors, old) of the checkpoint in ``ckpt``; ``old``: written by an earlier version
    (``trainer.pt``), to be rewritten at once. Tensors are read with ``weights_only=True`` in both layouts."""
    state = NMTState(**json.loads((ckpt / "state.json").read_text(encoding="utf-8")))
    if (ckpt / "tensors.pt").is_file():
        return state, torch.load(ckpt / "tensors.pt", map_location="cpu", weights_only=True), False
    path = ckpt / OLD_TRAINER_FILE
    try:
        extra = torch.load(path, map_location="cpu", weights_only=True)
        tensors = {"optimizer": extra["optimizer"], "rng": {"torch": extra["torch_rng"]}, "scaler": {}}
        python_rng = extra["python_rng"]
    except Exception as exc:  # noqa: BLE001 - torch's refusal (an UnpicklingError), a missing key, a bad file
        raise UserError(
            f"{path} was written by an earlier structattn and holds something torch's safe loader "
            f"(weights_only=True) does not read ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}). It is "
            "not unpickled, because unpickling a file can run any code in it. Delete "
            f"{ckpt.parent} to train this run again from the start, or use another --output-dir.") from None
    state.python_rng = json.loads(json.dumps(python_rng))  # tuples -> lists, as python_rng_json() gives
    return state, tensors, True


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
    from ..models.translator import Translator

    was_training = model.training
    model.eval()
    try:
        return Translator(model, tokenizer).translate(texts, beam=beam, length_penalty=length_penalty)
    finally:
        model.train(was_training)


def _save_model(model, tokenizer, folder: Path) -> None:
    with AtomicDir(folder) as tmp:
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))


def _weights(model) -> dict[str, torch.Tensor]:
    """The model's tensors once each (tied embeddings share one key), on the CPU, for safetensors."""
    seen, out = set(), {}
    for key, value in model.state_dict().items():
        ptr = value.data_ptr()
        if ptr in seen:
            continue
        seen.add(ptr)
        out[key] = value.detach().cpu().contiguous()
    return out


def _load_weights(model, weights: dict[str, torch.Tensor]) -> None:
    """Load tensors saved by :func:`_weights` or ``save_pretrained``; a key missing must be a tensor tied to a
    loaded one or a fixed table the model rebuilds itself (Marian's sinusoidal positions, not saved by
    ``save_pretrained``)."""
    current = model.state_dict()
    fixed = {name for name, p in model.named_parameters() if not p.requires_grad}
    unexpected = sorted(set(weights) - set(current))
    if unexpected:
        raise UserError(f"saved weights hold keys this model does not have ({', '.join(unexpected[:3])}); the "
                        "checkpoint belongs to another configuration")
    model.load_state_dict({k: v.to(current[k].dtype) for k, v in weights.items()}, strict=False)
    loaded = {current[k].data_ptr() for k in weights}
    missing = [k for k in current if k not in weights and k not in fixed and current[k].data_ptr() not in loaded]
    if missing:
        raise UserError(f"saved weights lack {', '.join(missing[:3])}; the checkpoint is incomplete")


def _average_weights(paths: list[Path]) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    total: dict[str, torch.Tensor] = {}
    for p in paths:
        for key, value in load_file(str(p)).items():
            total[key] = total.get(key, 0) + value.double()
    return {k: (v / len(paths)) for k, v in total.items()}


# ---------------------------------------------------------------------------------------------- the run


def train_translation(config: NMTConfig, *, show_progress: bool = True, stop_after_updates: int | None = None,
                      command: list[str] | None = None) -> dict:
    """Train, select and test one translation run in ``config.output_dir``; return the summary dict.

    ``stop_after_updates`` (tests) returns right after that update without saving, as a kill would.
    """
    from safetensors.torch import load_file, save_file
    from tqdm.auto import tqdm

    from ..heads.translation import TranslationCollator, token_batches
    from ..models.translation import build_model, size_of, variant_mechanism
    from ..tasks.bleu import corpus_bleu
    from .parsing import device_description, training_device

    session_start = time.time()
    device = training_device()
    precision = MixedPrecision(config.precision, device)  # fp16 on a CPU stops here, before anything is written
    if config.threads:
        torch.set_num_threads(config.threads)
    mechanism = variant_mechanism(config.variant, **config.mechanism_options())
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    recover_atomic_dirs(out)
    _check_resume(config, out)
    train, dev, tests = _read_sets(config)
    tokenizer = load_tokenizer(config, out, train)
    data = prepare_data(config, tokenizer, train, dev, tests, mechanism)

    _seed_everything(config.seed)
    model = build_model(tokenizer, config.size, config.variant, seed=config.seed, **config.mechanism_options())
    model = model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate, betas=(0.9, 0.98), eps=1e-9)
    state = NMTState()
    ckpt = out / CHECKPOINT
    if (ckpt / "state.json").is_file():
        state, tensors, old_layout = _read_checkpoint(ckpt)
        _load_weights(model, load_file(str(ckpt / "model.safetensors")))
        optimizer.load_state_dict(tensors["optimizer"])
        precision.load_state_dict(tensors["scaler"])
        set_torch_rng(tensors["rng"])
        set_python_rng(state.python_rng)
        if state.numpy_rng is not None:  # None: an earlier version's checkpoint (NumPy keeps the seeded state)
            set_numpy_rng(state.numpy_rng)
        print(f"resuming {out} at update {state.step:,} (epoch {state.epoch}, best dev BLEU {state.best_bleu})")
        if old_layout:
            _write_checkpoint(ckpt, model, optimizer, precision, state)
            print(f"rewrote {ckpt} without pickle (tensors.pt + state.json instead of {OLD_TRAINER_FILE})")
    elapsed_before = state.elapsed_seconds
    collate = TranslationCollator(tokenizer.pad_token_id)
    pad, start = tokenizer.pad_token_id, model.config.decoder_start_token_id
    src_len = [len(x) for x in data.train_src]
    tgt_len = [len(x) for x in data.train_tgt]

    def save_checkpoint():
        state.elapsed_seconds = elapsed_before + time.time() - session_start
        _write_checkpoint(ckpt, model, optimizer, precision, state)

    def evaluate_and_checkpoint(train_loss: float | None):
        hyps = _translate(model, tokenizer, data.dev_texts, config.eval_beam, config.length_penalty)
        bleu = corpus_bleu(hyps, data.dev_refs)["bleu"]
        improved = state.best_bleu is None or bleu > state.best_bleu
        entry = {"step": state.step, "epoch": state.epoch, "dev_bleu": round(bleu, 2),
                 "train_seconds": round(state.train_seconds, 1)}
        if train_loss is not None:  # per target token, label-smoothed, since the previous evaluation or resume
            entry["train_loss"] = round(train_loss, 4)
        state.history.append(entry)
        if improved:
            state.best_bleu, state.best_step, state.evals_without_improvement = bleu, state.step, 0
            _save_model(model, tokenizer, out / BEST)
        else:
            state.evals_without_improvement += 1
        if config.average_last > 1:
            recent = out / RECENT
            recent.mkdir(exist_ok=True)
            save_file(_weights(model), str(recent / f"step-{state.step}.safetensors"))
            state.recent = (state.recent + [state.step])[-config.average_last:]
            for p in recent.glob("step-*.safetensors"):
                if int(p.stem.split("-")[1]) not in state.recent:
                    p.unlink()
        save_checkpoint()
        return bleu

    bar = tqdm(total=config.max_updates, initial=state.step, disable=not show_progress, desc=f"{config.variant}",
               dynamic_ncols=True)
    model.train()
    token_losses = RunningMean()  # label-smoothed loss per target token since the last evaluation
    while not state.finished:
        batches = token_batches(src_len, tgt_len, config.max_tokens, seed=config.seed * 100_003 + state.epoch)
        for batch_idx in batches[state.batch_in_epoch:]:
            t0 = time.time()
            batch = collate([data.train_src[i] for i in batch_idx], [data.train_tgt[i] for i in batch_idx],
                            data.train_structure, batch_idx if data.train_structure is not None else None)
            batch = {k: v.to(device) for k, v in batch.items()}
            labels = batch.pop("labels")
            for group in optimizer.param_groups:
                group["lr"] = config.learning_rate * warmup_inverse_sqrt(state.step + 1, config.warmup)
            with precision.autocast():
                logits = model(**batch, decoder_input_ids=_decoder_inputs(labels, pad, start)).logits
                loss, tokens = _label_smoothed_loss(logits, labels, config.label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            precision.step(loss, optimizer, model.parameters(), config.clip_norm)
            state.step += 1
            state.batch_in_epoch += 1
            state.target_tokens += tokens
            loss_value = loss.item()
            token_losses.add(loss_value, tokens)
            state.train_seconds += time.time() - t0
            bar.update(1)
            bar.set_postfix(loss=f"{loss_value:.3f}", best=state.best_bleu)
            if stop_after_updates is not None and state.step >= stop_after_updates:
                bar.close()
                return {"stopped_at_update": state.step}
            if state.step % config.eval_every == 0 or state.step >= config.max_updates:
                bleu = evaluate_and_checkpoint(token_losses.take())
                bar.write(f"update {state.step:,}: dev BLEU {bleu:.2f} (best {state.best_bleu:.2f} at "
                          f"{state.best_step:,})")
                if state.evals_without_improvement >= config.patience or state.step >= config.max_updates:
                    state.finished = True
                    break
        else:
            state.epoch += 1
            state.batch_in_epoch = 0
    bar.close()
    save_checkpoint()  # finished = True: a rerun goes straight to the final steps

    summary = _finish(config, out, state, tokenizer, data, model)
    summary.update({"wall_seconds": round(elapsed_before + time.time() - session_start, 1),
                    "device": device_description(device), "torch_threads": torch.get_num_threads(),
                    "model": size_of(model), "command": command, "filter": data.filter_summary})
    from .provenance import provenance

    summary.update(provenance(model))
    atomic_write_json(out / "summary.json", summary)
    return summary


def _finish(config: NMTConfig, out: Path, state: NMTState, tokenizer, data: NMTData, model) -> dict:
    """Pick the final model (best vs averaged, by beam dev BLEU), save it, translate the test sets."""
    from safetensors.torch import load_file

    from ..tasks.bleu import corpus_bleu

    candidates = {"best": load_file(str(out / BEST / "model.safetensors"))}
    recent = [out / RECENT / f"step-{s}.safetensors" for s in state.recent]
    if config.average_last > 1 and len(recent) > 1 and all(p.is_file() for p in recent):
        candidates[f"average of last {len(recent)}"] = _average_weights(recent)
    dev_scores = {}
    for name, weights in candidates.items():
        _load_weights(model, weights)
        hyps = _translate(model, tokenizer, data.dev_texts, config.beam, config.length_penalty)
        dev_scores[name] = corpus_bleu(hyps, data.dev_refs)["bleu"]
        print(f"dev BLEU (beam {config.beam}) of {name}: {dev_scores[name]:.2f}")
    chosen = max(dev_scores, key=dev_scores.get)
    weights = candidates[chosen]
    _load_weights(model, weights)
    _save_model(model, tokenizer, out / FINAL)
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
            "best_step": state.best_step, "best_dev_bleu_greedy": state.best_bleu, "updates": state.step,
            "epochs": state.epoch, "history": state.history, "tests": results,
            "train_seconds": round(state.train_seconds, 1),
            "target_tokens_per_second": round(state.target_tokens / max(state.train_seconds, 1e-9), 1)}


def warmup_inverse_sqrt(step: int, warmup: int) -> float:
    """Learning-rate factor: linear warm-up to 1 at ``warmup`` updates, then sqrt(warmup / step)."""
    step = max(step, 1)
    return step / warmup if step < warmup else math.sqrt(warmup / step)
