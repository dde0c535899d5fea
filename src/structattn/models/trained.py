"""Trained models that load by a short name: ``structattn parse --model bna-minilm``.

Each name is one entry of `TRAINED`: what kind of model it is, what it does and the command that builds it.
Its files are package data, ``structattn/trained/<name>/`` (so an editable or a wheel install has them): the
model folder as its loader reads it (``config.json``, ``model.safetensors``, ...), ``card.json`` (data, split,
exact command, commit, test score, size, time to train) and ``CARD.md`` (the same for people). A name is
*shipped* when its folder holds the weights; a known name whose folder is empty is built with its ``build``
command (``make models`` and its parts). A parser with a frozen pretrained encoder stores that encoder by
reference to its pip package
([`structattn.bna.model.ChartParser.save_pretrained`][structattn.bna.model.ChartParser.save_pretrained]), never a copy.
A reader is a span-QA run's folder in the packed form of `structattn.models.packing` (``structattn pack-reader``).

[`resolve`][structattn.models.trained.resolve] turns what a user gave as ``--model`` (or the spaCy component's
``model=``) into a folder: an existing path is used as it is; else a shipped name gives its folder; a known but
unshipped name, a name of another kind and an unknown name are [`UserError`][structattn.errors.UserError] saying what to
do (the valid names listed). The folder is checked first (`check_model_folder`): a damaged or missing file is one
line, never a loader's traceback or a model that reads with a wrong vocabulary, and so is a folder an earlier
structattn wrote (`structattn.models.saved_version`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..integrity import folder_damage
from .saved_version import check_saved_version

# the package data folder that holds one sub-folder per shipped model
TRAINED_DIR = Path(__file__).resolve().parents[1] / "trained"

KINDS = ("parser", "translator", "reader")


@dataclass(frozen=True)
class TrainedModel:
    """One named model: ``kind`` (one of `KINDS`), what it does, the command that builds it, and for its card
    the domain of its training data, what it is good at and what it is bad at (measured examples)."""

    name: str
    kind: str
    description: str
    build: str
    domain: str = ""
    good_at: str = ""
    bad_at: str = ""

    @property
    def folder(self) -> Path:
        """The installed model's folder (inside the package's ``trained/``)."""
        return TRAINED_DIR / self.name

    @property
    def shipped(self) -> bool:
        """Its weights are in the package (``config.json`` and ``model.safetensors`` in its folder)."""
        return (self.folder / "config.json").is_file() and (self.folder / "model.safetensors").is_file()

    def card(self) -> dict[str, Any]:
        """The model's ``card.json`` ({} when the folder has none)."""
        path = self.folder / "card.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}

    def size_bytes(self) -> int:
        """Bytes of the model's own files (a pretrained encoder stored by reference is not counted)."""
        return folder_bytes(self.folder)


def folder_bytes(folder: str | Path) -> int:
    """Bytes of the files in a saved model's folder (weights stored by reference to a package not counted)."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


#: The parsers' training data, and what 3,068 trees of it can and cannot teach (both parsers share it).
_PARSER_DOMAIN = ("edited American news prose: Wall Street Journal articles of 1989 (the NLTK sample of the Penn "
                  "Treebank, 10% of the WSJ part); 3,068 training trees, a tenth of what treebank parsers are "
                  "usually trained on")
_PARSER_GOOD_AT = ("declarative news-style sentences like those of the held-out WSJ files (wsj_0160-0199); "
                   "\"The cat sat on the mat.\" -> (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) "
                   "(NN mat)))) (. .))")
_PARSER_BAD_AT = ("what 3,068 news trees rarely show: questions (\"Why did the market fall?\" gets no SQ and reads "
                  "'the market fall' as one NP), some very short sentences, dialogue, speech, social-media text and "
                  "other domains (not measured: expect lower scores than the test F1). Sentences over 300 words "
                  "are refused. Output trees have no function tags, traces or empty elements, and the "
                  "preterminal tags are spaCy's, not the parser's")


def _parser(name: str, description: str, build: str, limits: str = "") -> TrainedModel:
    """A shipped parser: the parsers share their training data, and so what they are good and bad at; ``limits``
    adds what is measured of this one."""
    return TrainedModel(name, "parser", description, build, domain=_PARSER_DOMAIN, good_at=_PARSER_GOOD_AT,
                        bad_at=_PARSER_BAD_AT + limits)


TRAINED: dict[str, TrainedModel] = {m.name: m for m in (
    _parser("bna-minilm", "BNA constituency parser (BiMSA + NSA, spaCy POS tags) on frozen all-MiniLM-L6-v2",
            "make models-parsers", "; \"It purred.\" comes out as an NP, (NP (NP (PRP It)) (VP (VBD purred)) "
            "(. .)), not an S (bna-scratch gives the S)"),
    _parser("bna-scratch", "BNA constituency parser (BiMSA + NSA, spaCy POS tags), no pretrained encoder "
            "(word embeddings + character BiLSTM)",
            "make models-parsers", "; its words are those of the 3,068 trees (others are read through their "
            "characters only)"),
    _parser("bna-minilm-ft", "BNA constituency parser (BiMSA + NSA, no POS tags) on all-MiniLM-L6-v2 fine-tuned "
            "with it, int8 weights (one float scale per row)", "bash experiments/make_models.sh parser-ft"),
    TrainedModel("hybrid-gate-en-de", "translator",
                 "English->German Transformer-tiny with the hybrid local/global gate (Xu et al. 2019)",
                 "make models-nmt",
                 domain="Multi30k: image captions, one English sentence describing a photograph (people, animals, "
                        "everyday scenes; Flickr30k, and MS COCO for the mscoco2017 test set) with its German "
                        "translation; 29,000 training pairs",
                 good_at="short descriptive captions of scenes: \"A man is riding a bicycle down the street.\" -> "
                         "\"Ein Mann fährt auf einem Fahrrad die Straße entlang.\"",
                 bad_at="anything that is not an image caption (news, questions, instructions, dialogue, technical "
                        "text): out-of-domain text breaks, often into fluent-looking nonsense or repeated pieces, "
                        "e.g. \"The central bank raised interest rates yesterday.\" -> "
                        "\"Die Zititititititititäglichen Wissenschaftlichen mücher.\" and \"Please send me the invoice by Friday.\" -> \"Ein Puller "
                        "in der Wiese in der Aufschrift „Co“ wird von der Aufschrift „Fay“.\"; lines over the "
                        "model's source limit are cut (counted on stderr)"),
    TrainedModel("sgnet-squad2", "reader",
                 "SG-Net (dual) span-QA reader with no-answer on all-MiniLM-L6-v2 (SQuAD 2.0), packed int8",
                 "make models-reader",
                 domain="SQuAD: Wikipedia paragraphs with crowd-written questions, some of them unanswerable",
                 good_at="factual questions about one encyclopaedic passage whose answer is a span of it",
                 bad_at="answers that are not a span of the passage (yes/no, counting, reasoning over several "
                        "passages); other domains not measured"),
)}


def shipped_models(kind: str | None = None) -> list[TrainedModel]:
    """The models whose weights are in this install (of ``kind`` when given), in `TRAINED` order."""
    return [m for m in TRAINED.values() if m.shipped and kind in (None, m.kind)]


def _names(kind: str) -> str:
    """The names of ``kind``, those not shipped in this install marked so."""
    return ", ".join(m.name + ("" if m.shipped else " (not shipped yet)") for m in TRAINED.values() if m.kind == kind)


def resolve(model: str | Path, kind: str) -> Path:
    """The folder that ``model`` (a path or a trained model's name) stands for; ``kind`` is one of `KINDS`
    (module docstring). A path that does not exist is returned as it is when it looks like a path
    (holds a separator or starts with ``.`` or ``~``), so the loader's own "no such folder" error applies."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    path = Path(model).expanduser()
    if path.exists():
        return check_model_folder(path)
    text = str(model)
    entry = TRAINED.get(text)
    if entry is None:
        if isinstance(model, Path) or "/" in text or "\\" in text or text.startswith((".", "~")):
            return path
        raise UserError(f"{text!r} is neither a folder nor a trained {kind}'s name; the {kind} names: "
                        f"{_names(kind)} (`structattn models` lists those installed)")
    if entry.kind != kind:
        raise UserError(f"{text!r} is a trained {entry.kind}, not a {kind}; the {kind} names: {_names(kind)}")
    if not entry.shipped:
        raise UserError(f"the trained {kind} {text!r} is not shipped with this install yet; build it from a "
                        f"checkout with `{entry.build}` (it writes {entry.folder}), or give a model folder")
    return check_model_folder(entry.folder)


#: tokenizer classes (``tokenizer_config.json``) -> the files one of which must be there to load it
TOKENIZER_FILES = {"BertTokenizer": ("vocab.txt", "tokenizer.json"),
                   "BertTokenizerFast": ("vocab.txt", "tokenizer.json"),
                   "TokenizersBackend": ("tokenizer.json",), "PreTrainedTokenizerFast": ("tokenizer.json",)}


def model_folder_damage(folder: Path) -> str | None:
    """What is wrong with a model folder's files (`structattn.integrity.folder_damage`: the manifest, or each
    file's form), or a tokenizer file its ``tokenizer_config.json`` needs that is missing; None when intact."""
    problem = folder_damage(folder) or _vocabulary_damage(folder)
    if problem or not (folder / "tokenizer_config.json").is_file():
        return problem
    tokenizer_class = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8")).get("tokenizer_class")
    needed = TOKENIZER_FILES.get(tokenizer_class, ())
    if needed and not any((folder / name).is_file() for name in needed):
        return f"{folder / needed[0]} is missing (the {tokenizer_class} of tokenizer_config.json reads it)"
    return None


def _vocabulary_damage(folder: Path) -> str | None:
    """A ``vocab.txt`` with fewer entries than ``config.json``'s ``vocab_size`` (cut short: the words past the cut
    would be read as unknown, or the model would answer with other words), else None."""
    vocab, config = folder / "vocab.txt", folder / "config.json"
    if not (vocab.is_file() and config.is_file()):
        return None
    size = json.loads(config.read_text(encoding="utf-8")).get("vocab_size")
    entries = vocab.read_bytes().count(b"\n") + (not vocab.read_bytes().endswith(b"\n"))
    if isinstance(size, int) and entries < size:
        return f"{vocab} has {entries:,} entries where the model's vocabulary has {size:,} (cut short)"
    return None


def check_model_folder(folder: Path) -> Path:
    """``folder`` when it is no folder or an intact one of this version (`model_folder_damage`,
    `structattn.models.saved_version.check_saved_version`); else UserError naming the damaged file, or the
    version that wrote the folder, and what to do."""
    folder = Path(folder)
    if not folder.is_dir():
        return folder
    check_saved_version(folder)
    problem = model_folder_damage(folder)
    if problem:
        shipped = folder.resolve().parent == TRAINED_DIR.resolve()
        todo = ("reinstall structattn to restore it (pip install --force-reinstall structattn, or `git checkout` "
                "in a checkout)" if shipped else "copy the folder again from where it was made, or train it again")
        raise UserError(f"{problem}: the model folder {folder} is damaged; {todo}")
    return folder
