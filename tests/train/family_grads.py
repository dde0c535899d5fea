"""Run by test_distributed_families.py: the gradients of one batch split over processes, through the engine.

usage: family_grads.py parser|translation WORK_DIR OUT_FILE   (under torchrun, or plain python for one process)

WORK_DIR holds the data the test wrote (trees.mrg; train.en and train.de). Each of N processes takes its 1/N
of the items and the engine's loss weighting and gradient all-reduce; dropout is off (eval mode), so one
process at batch 2b and two processes at b compute the gradient of the same mean.
"""
import sys
from pathlib import Path

import torch

from structattn.train.engine import Engine


def parser_case(work: Path):
    from structattn.bna.model import ChartParser, ParserConfig
    from structattn.tasks.ptb import read_treebank

    trees = read_treebank(str(work / "trees.mrg"))
    config = ParserConfig(encoder="none", variant="bna", num_layers=2, d_model=16, heads=2, d_head=8, d_ff=32,
                          label_hidden=16, char_dim=8, word_dim=16, ngram=2, seed=3)
    model = ChartParser.build(config, trees)
    return model, trees, lambda items: (model.loss(items), 1)


def translation_case(work: Path):
    from structattn.translation.data import TranslationCollator, encode_texts, train_bpe_tokenizer
    from structattn.translation.model import build_model
    from structattn.translation.trainer import _decoder_inputs, _label_smoothed_loss

    src = (work / "train.en").read_text(encoding="utf-8").splitlines()
    tgt = (work / "train.de").read_text(encoding="utf-8").splitlines()
    tokenizer = train_bpe_tokenizer(src + tgt, vocab_size=200)
    model = build_model(tokenizer, "micro", "hybrid_gate", seed=1)
    collate = TranslationCollator(tokenizer.pad_token_id)
    src_ids, tgt_ids = encode_texts(tokenizer, src), encode_texts(tokenizer, tgt)
    pad, start = tokenizer.pad_token_id, model.config.decoder_start_token_id

    def loss(items):
        batch = collate([src_ids[i] for i in items], [tgt_ids[i] for i in items], None, None)
        labels = batch.pop("labels")
        logits = model(**batch, decoder_input_ids=_decoder_inputs(labels, pad, start)).logits
        return _label_smoothed_loss(logits, labels, 0.1)  # (mean per target token, target tokens)

    return model, list(range(len(src))), loss


def main(kind: str, work: str, out_file: str) -> None:
    work = Path(work)
    engine = Engine(work / f"engine-{kind}", seed=0, show_progress=False)
    engine.seed()
    model, items, loss = {"parser": parser_case, "translation": translation_case}[kind](work)
    engine.prepare(model, torch.optim.SGD(model.parameters(), lr=0.0))
    model.eval()  # no dropout
    n, rank = engine.num_processes, engine.acc.process_index
    per = len(items) // n
    value, weight = loss(items[rank * per:(rank + 1) * per])
    engine._backward(value * engine._process_scale(weight))
    engine._sync_gradients()
    if engine.is_main:
        grads = {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}
        torch.save({"grads": grads, "world": n, "weight": weight}, out_file)
    engine.acc.wait_for_everyone()


if __name__ == "__main__":
    main(*sys.argv[1:4])
