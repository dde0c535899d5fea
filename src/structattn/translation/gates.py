"""Gate statistics of a trained translation model: the data of Xu et al.'s Figures 2-4.

    python -m structattn.translation.gates MODEL_DIR [--corpus multi30k] [--split dev] [--out FILE.json]

Runs the encoder over the source side of a split of a registered translation corpus (default Multi30k's English;
`structattn.tasks.registry`; the source only: the gate depends on nothing else)
and averages the gate g (the weight of the local pattern, Eq. 5) over every source piece, padding and ``</s>``
excluded: per encoder layer with a gate (Figure 3), and at the lowest such layer per universal POS tag of the
parser word each piece belongs to (Figure 4; tags from the spaCy parse of the source, carried to the word's BPE
pieces). Per-head gates are averaged over heads. The mean gate of the lowest layer with the window size is Figure
2's curve. Output JSON: ``{"model", "split", "sentences", "pieces", "layers": {index: mean}, "pos": {tag: {"mean",
"pieces"}}}``.
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..errors import UserError


@torch.no_grad()
def gate_statistics(translator, texts: Sequence[str], max_tokens: int = 4096, parser_name: str | None = None) -> dict:
    """Mean gate per layer and, at the lowest gated layer, per POS tag, over ``texts`` (see the module doc)."""
    from ..attention.integration import record
    from .data import normalise
    from ..models.encoder import mechanism_of
    from .data import TranslationCollator, build_source_structure, token_batches

    model, tokenizer = translator.model, translator.tokenizer
    mech = mechanism_of(model)
    if mech is None or not mech.has_gate:
        raise UserError("this model has no gate (the stock transformer, or a local/concat/Gaussian variant): "
                        "gate statistics need hybrid_gate or sla")
    texts = [normalise(t) for t in texts if t.strip()]
    ids = translator.encode(texts)
    parse = build_source_structure(tokenizer, texts, mech.relation or "window", parser_name,
                                   **(mech.relation_options() if mech.relation else {}))
    use_mask = translator.needs_structure
    collate = TranslationCollator(tokenizer.pad_token_id)
    layer_sum: dict[int, float] = defaultdict(float)
    layer_count: dict[int, int] = defaultdict(int)
    pos_sum: dict[str, float] = defaultdict(float)
    pos_count: dict[str, int] = defaultdict(int)
    lowest = None
    lengths = [len(x) for x in ids]
    for batch_idx in token_batches(lengths, lengths, max_tokens, seed=None):
        batch = collate([ids[i] for i in batch_idx], None, parse if use_mask else None,
                        batch_idx if use_mask else None)
        with record(model) as rec:
            model.get_encoder()(**batch)
        lowest = min(rec.layers) if lowest is None else lowest
        for layer, gate in zip(rec.layers, rec.gates):
            g = gate.float()
            g = g.mean(dim=1) if g.dim() == 3 else g  # [b, n]
            for row, idx in enumerate(batch_idx):
                tw = parse.token_word[idx]
                real = tw >= 0  # pieces of words: no </s>, no padding
                values = g[row, :len(tw)].numpy()[real]
                layer_sum[layer] += float(values.sum())
                layer_count[layer] += int(real.sum())
                if layer == lowest:
                    tags = np.asarray(parse.upos[idx], dtype=object)[tw[real]]
                    for tag, value in zip(tags, values):
                        pos_sum[tag or "X"] += float(value)
                        pos_count[tag or "X"] += 1
    return {"sentences": len(texts), "pieces": layer_count.get(lowest, 0), "lowest_layer": lowest,
            "layers": {str(k): layer_sum[k] / layer_count[k] for k in sorted(layer_sum)},
            "pos": {t: {"mean": pos_sum[t] / pos_count[t], "pieces": pos_count[t]} for t in sorted(pos_sum)}}


def main(argv: list[str] | None = None) -> int:
    from ..tasks.registry import corpus, corpus_names
    from .translator import Translator

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--corpus", choices=corpus_names("translation"), default=corpus_names("translation")[0])
    ap.add_argument("--split", default="dev")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    translator = Translator.load(args.model)
    stats = {"model": str(args.model), "split": args.split,
             **gate_statistics(translator, corpus("translation", args.corpus).read_split(args.split).sources)}
    text = json.dumps(stats, indent=2, sort_keys=True)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
