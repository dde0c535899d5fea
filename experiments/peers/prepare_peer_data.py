"""Write the peers' input files from OUR readers, into a folder outside the repository.

  python experiments/peers/prepare_peer_data.py ptb OUT        # SuPar: OUT/ptb.{train,dev,test}.trees, (TOP ...) per line,
                                                          #   and OUT/ptb.test.gold (the gold our evalb scores against)
  python experiments/peers/prepare_peer_data.py multi30k OUT   # Joey NMT: our joint BPE (8,000) learned exactly as
                                                          #   `structattn train-translation` learns it; OUT/bpe/<split>.{en,de}
                                                          #   = space-separated BPE pieces, OUT/bpe/vocab.txt
  python experiments/peers/prepare_peer_data.py detok OUT HYP DETOK  # Joey's piece output -> text, with our tokenizer

Run with the library importable (PYTHONPATH=src, or the project venv).
"""
from __future__ import annotations

import sys
from pathlib import Path


def ptb(out: Path) -> None:
    from structattn.tasks.ptb import read_split

    out.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev", "test"):
        trees = read_split(split)  # cleaned: -NONE- and empty constituents removed, function tags stripped
        with open(out / f"ptb.{split}.trees", "w") as f:
            f.writelines(f"(TOP {t.to_string()})\n" for t in trees)  # SuPar reads a root label above the tree
        with open(out / f"ptb.{split}.gold", "w") as f:
            f.writelines(t.to_string() + "\n" for t in trees)
        print(split, len(trees))


def _tokenizer(out: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(out / "tokenizer"))


def multi30k(out: Path) -> None:
    from structattn.translation.data import SPECIAL_TOKENS, normalise, train_bpe_tokenizer
    from structattn.tasks.multi30k import SPLITS, read_split

    train = read_split("train")
    texts = [t for t in train.sources + train.targets if t.strip()]  # as structattn.translation.trainer.load_tokenizer
    tokenizer = train_bpe_tokenizer(texts, vocab_size=8000)
    tokenizer.save_pretrained(str(out / "tokenizer"))
    bpe = out / "bpe"
    bpe.mkdir(parents=True, exist_ok=True)
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
    (bpe / "vocab.txt").write_text("".join(tok + "\n" for tok, _ in vocab if tok not in SPECIAL_TOKENS))
    for split in SPLITS:
        data = read_split(split)
        for lang, lines in (("en", data.sources), ("de", data.targets)):
            with open(bpe / f"{split}.{lang}", "w") as f:
                for line in lines:
                    pieces = tokenizer.tokenize(normalise(line))
                    assert all(" " not in p for p in pieces)
                    f.write(" ".join(pieces) + "\n")
        print(split, len(data))


def detok(out: Path, hyp: Path, dest: Path) -> None:
    tokenizer = _tokenizer(out)
    with open(hyp) as f, open(dest, "w") as g:
        for line in f:
            g.write(tokenizer.convert_tokens_to_string(line.split()).strip() + "\n")


if __name__ == "__main__":
    cmd, out = sys.argv[1], Path(sys.argv[2])
    {"ptb": lambda: ptb(out), "multi30k": lambda: multi30k(out),
     "detok": lambda: detok(out, Path(sys.argv[3]), Path(sys.argv[4]))}[cmd]()
