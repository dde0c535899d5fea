"""Train the BNA chart parser on a treebank (the parsing family of
[`structattn.train.engine`][structattn.train.engine]): dev EVALB, best model and test parses.

``train_parser(config, data=...)`` runs one `ParserConfig` in ``config.output_dir``:

1. reads the trees (`TreebankFiles`: the fixed train/dev/test split of the NLTK WSJ sample by default, or
   the user's own train, dev and optional test files, read and cleaned by the same rules; ``max_train_trees`` /
   ``max_eval_trees`` keep the first N, and the numbers used are printed), and POS tags when ``config.pos`` asks
   for them (spaCy tags cached on disk);
2. trains with Adam in two parameter groups (the pretrained encoder at ``encoder_learning_rate``, everything
   else at ``learning_rate``), both ramped up linearly from 0 over ``warmup_steps`` optimizer steps and then
   held constant; gradients clipped to norm ``clip_grad``; the batch order of epoch e is a permutation seeded
   by (seed, e);
3. parses the dev trees after every epoch (or every ``eval_every`` steps) and scores them with EVALB (each history
   entry also has ``train_loss``, the mean batch loss since the previous evaluation); a better
   dev F1 replaces ``best/`` (``ChartParser.save_pretrained``); ``patience`` evaluations without improvement stop
   the run (those within the first ``warmup_steps`` updates do not count: dev F1 swings while the rate climbs);
4. the engine writes ``checkpoint/`` at each evaluation and every ``checkpoint_every`` updates, so running the
   same command in the same ``output_dir`` after a kill resumes exactly where the last checkpoint left off and
   ends with the same results; with several processes (``accelerate launch``) each takes every N-th batch;
5. at the end loads ``best/``, parses dev and test, writes ``dev.trees`` and ``test.trees`` (one tree per line in
   treebank order), scores them against the raw treebank files (as ``structattn score evalb`` does) and writes
   ``summary.json`` (its ``data`` says which files were read; with own files and no test file there is no test
   parse and ``test`` is null).

``config.precision`` (``--precision``): ``fp32`` (default), ``bf16`` or ``fp16`` (CUDA only), as the engine runs it.
Only training runs in it; dev and test parses run in float32, as a saved parser parses later.

The settings a resume must match (``settings.json``) include the files read (path and SHA-256 of each own file).
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

from ..errors import UserError
from ..io import atomic_write_json, atomic_write_text
from ..train.checkpoint import save_pretrained_atomically
from ..train.engine import (Engine, EngineState, Evaluation, Family, resume_settings, run_facts, seeded_batches,
                            warmup_factor)

BEST = "best"


# ---------------------------------------------------------------------------------------------- data
@dataclass(frozen=True)
class TreebankFiles:
    """Where a run's trees come from: a registered parsing corpus (``corpus``, None: the fixed split of the NLTK WSJ
    sample; `structattn.tasks.registry`), or the user's own bracketed treebank files (``train`` and ``dev``
    required, ``test`` optional: without it, no test parse).
    """

    train: str | None = None
    dev: str | None = None
    test: str | None = None
    corpus: str | None = None

    def __post_init__(self):
        if (self.train is None) != (self.dev is None) or (self.test is not None and self.train is None):
            raise UserError("own treebank files: give --train FILE and --dev FILE (and optionally --test FILE); "
                            "without any of them the NLTK WSJ sample's fixed split is used")
        if self.own and self.corpus is not None:
            raise UserError(f"--corpus {self.corpus} and own treebank files (--train, --dev) exclude each other; "
                            "give one of them")
        if not self.own:
            from ..tasks.registry import corpus

            corpus("parsing", self.corpus)  # an unknown corpus is refused here, before anything is read

    @property
    def own(self) -> bool:
        return self.train is not None

    @property
    def reader(self):
        """The registered corpus's reader (a `structattn.tasks.ptb.TreebankCorpus`)."""
        from ..tasks.registry import corpus

        return corpus("parsing", self.corpus)

    def splits(self) -> tuple[str, ...]:
        """The splits that are parsed and scored at the end: dev, and test unless own files lack one."""
        return ("dev", "test") if not self.own or self.test is not None else ("dev",)

    def check(self, config=None) -> None:
        """UserError for a named file that is missing or a folder, and (with the run's ``config``) for a tree of an
        own file that is malformed, holds a control character or has more words than ``config.max_words``, named
        ``FILE:LINE``, and training trees without a labelled constituent: every file (``--test`` too) is read and
        checked before anything is trained."""
        from .model import has_constituent_label, label_vocabulary
        from ..tasks.ptb import read_treebank

        for split in ("train", "dev", "test"):
            name = getattr(self, split)
            if name is not None and not Path(name).is_file():
                what = "is a folder, not a tree file" if Path(name).is_dir() else "not found"
                raise UserError(f"--{split} {name}: {what}; give a bracketed treebank file (one tree per line, or "
                                "the PTB's multi-line layout)")
        if config is None or not self.own:
            return
        for split in ("train", "dev", "test"):
            if (name := getattr(self, split)) is None:
                continue
            starts: list[int] = []
            trees = read_treebank(name, starts=starts)
            limit = config.max_train_trees if split == "train" else config.max_eval_trees
            for tree, line in list(zip(trees, starts))[:limit or None]:
                if len(tree.leaves()) > config.max_words:
                    raise UserError(f"{name}:{line}: {len(tree.leaves())} words, more than the parser's max_words="
                                    f"{config.max_words}; remove the tree or raise --max-words")
            if split == "train" and not has_constituent_label(label_vocabulary(trees[:limit or None])):
                raise UserError(f"{name}: the training trees have no labelled constituent besides TOP (every tree "
                                "is a bare word, an unlabelled bracket or TOP over words, and EVALB scores none of "
                                "these); give trees like (S (NP ...) (VP ...))")

    def read(self, split: str, *, clean: bool = True) -> list:
        """The trees of ``split`` in file order (cleaned unless ``clean=False``)."""
        from ..tasks.ptb import read_treebank

        if self.own:
            return read_treebank(getattr(self, split), clean=clean)
        return self.reader.read_split(split, clean=clean)

    def raw_files(self, split: str) -> list[Path]:
        """The file(s) ``structattn score evalb`` scores ``<split>.trees`` against."""
        return [Path(getattr(self, split))] if self.own else self.reader.split_files(split)

    def describe(self) -> dict:
        """What the run reads, for summary.json and the resume check: the registered corpus's name and split, or each
        own file's absolute path and SHA-256."""
        if not self.own:
            from ..tasks.registry import corpus_names

            return {"treebank": self.corpus or corpus_names("parsing")[0], "split": self.reader.split_note}
        return {split: {"path": str(Path(name).resolve()),
                        "sha256": hashlib.sha256(Path(name).read_bytes()).hexdigest()}
                for split in ("train", "dev", "test") if (name := getattr(self, split)) is not None}


def _limit(trees: list, limit: int, what: str) -> list:
    """The first ``limit`` trees (0 = all), saying how many of how many are used."""
    used = trees[:limit] if limit else trees
    print(f"{what}: using {len(used):,} of {len(trees):,} trees")
    return used


def _words(trees) -> list[list[str]]:
    return [t.leaves() for t in trees]


def tags_for(trees, config, *, tagger=None) -> list[list[str]] | None:
    """The POS tags the parser sees for ``trees``: None (``pos="none"``), the trees' own tags (``"gold"``) or
    spaCy's (``"spacy"``, cached on disk, see `cached_spacy_tags`)."""
    if config.pos == "none":
        return None
    if config.pos == "gold":
        return [t.tags() for t in trees]
    if config.pos == "spacy":
        return cached_spacy_tags(_words(trees), tagger=tagger)
    raise UserError(f"pos={config.pos!r} is not one of none, spacy, gold")


def _spacy_model_name() -> str:
    from ..settings import DEFAULT_SPACY_MODEL
    return DEFAULT_SPACY_MODEL


def _tag_cache_path(words: list[list[str]], model_name: str) -> Path:
    from ..settings import cache_dir

    version = "unknown"
    try:
        import spacy.util
        version = spacy.util.get_package_version(model_name) or "unknown"
    except Exception:  # no spaCy or no such package: the name alone keys the cache
        pass
    key = json.dumps({"model": model_name, "version": version, "words": words}, ensure_ascii=False)
    return cache_dir() / "ptb_tags" / (hashlib.sha256(key.encode("utf-8")).hexdigest() + ".json")


def cached_spacy_tags(words: list[list[str]], *, tagger=None, model_name: str | None = None) -> list[list[str]]:
    """spaCy's fine-grained tags for each sentence, from ``<cache_dir>/ptb_tags/<sha>.json`` when there.

    The file name hashes the words, the pipeline name and its version. An unreadable or inconsistent file is
    recomputed (and says so). ``tagger(words) -> tags`` defaults to ``ptb_text.spacy_tags`` with the pipeline.
    """
    model_name = model_name or _spacy_model_name()
    path = _tag_cache_path(words, model_name)
    if path.is_file():
        try:
            tags = json.loads(path.read_text(encoding="utf-8"))["tags"]
            if len(tags) == len(words) and all(isinstance(t, list) and len(t) == len(w) for t, w in zip(tags, words)):
                return tags
            print(f"tag cache {path} does not fit its sentences; tagging again")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"tag cache {path} is unreadable ({type(exc).__name__}); tagging again")
    if tagger is None:
        from .ptb_text import spacy_tags

        def tagger(sentences):
            return spacy_tags(sentences, model_name)
    tags = [list(t) for t in tagger(words)]
    atomic_write_json(path, {"model": model_name, "tags": tags})
    return tags


def chart_passes(batch: Sequence[int], lengths: Sequence[int], max_cells: int) -> list[tuple[list[int], float]]:
    """The forward passes of one batch of trees (indices into ``lengths``, words per tree) that keep each pass's
    span chart within ``max_cells`` cells (sentences x (longest + 1)^2, what the NSA layers and the label scorer
    hold for the backward), as ``(tree indices, share of the batch)``; 0 = the batch in one pass.

    A batch within the budget is one pass, unchanged. A larger one is cut, longest trees first, into passes as full
    as the budget allows (a tree over it alone is its own pass); the shares are the passes' fractions of the batch's
    trees, so that the shares times the passes' mean losses add up to the batch's mean loss."""
    def cells(count: int, longest: int) -> int:
        return count * (longest + 1) ** 2

    batch = list(batch)
    if not max_cells or cells(len(batch), max(lengths[i] for i in batch)) <= max_cells:
        return [(batch, 1.0)]
    passes: list[list[int]] = []
    for i in sorted(batch, key=lambda i: -lengths[i]):  # stable: equal lengths keep the batch's order
        if passes and cells(len(passes[-1]) + 1, lengths[passes[-1][0]]) <= max_cells:
            passes[-1].append(i)
        else:
            passes.append([i])
    return [(part, len(part) / len(batch)) for part in passes]


# ---------------------------------------------------------------------------------------------- optimiser
def make_optimizer(model, config) -> torch.optim.Optimizer:
    """Adam over the model's two parameter groups (``ChartParser.parameter_groups``: the pretrained encoder at
    ``encoder_learning_rate``, the rest at ``learning_rate``); the engine ramps both by
    [`warmup_factor`][structattn.train.engine.warmup_factor]."""
    return torch.optim.Adam(model.parameter_groups(config.learning_rate, config.encoder_learning_rate),
                            betas=(0.9, config.adam_beta2), eps=config.adam_eps)


def learning_rate_factor(step: int, config) -> float:
    """The learning rates' multiplier before optimizer step ``step`` (0-based): the linear warm-up over
    ``warmup_steps``, then ``lr_decay`` every ``lr_decay_steps`` steps after it, continuously (SuPar's exponential
    decay); constant when ``lr_decay`` is 1."""
    decayed = max(0, step + 1 - config.warmup_steps)
    return warmup_factor(step, config.warmup_steps) * config.lr_decay ** (decayed / config.lr_decay_steps)


def settings(config, data: dict) -> dict:
    """What a resume must match: the config's result-changing fields and the files read (``data``)."""
    return {**resume_settings(config), "data": data}


def _metrics(result) -> dict:
    """recall, precision, f1, complete_match (+ sentence counts) of an EvalbResult."""
    data = result.to_dict()
    keep = ("recall", "precision", "f1", "complete_match", "tagging_accuracy", "sentences", "error_sentences",
            "skipped_sentences")
    return {k: data[k] for k in keep if k in data}


# ---------------------------------------------------------------------------------------------- the run
class ParserFamily(Family):
    """The parsing family of the engine: treebank trees, the chart parser, its margin loss and dev EVALB."""

    main_metric = "f1"

    def __init__(self, config, data: TreebankFiles, command: list[str] | None = None):
        self.config, self.data, self.command = config, data, command
        self.data_read = data.describe()
        self.out = Path(config.output_dir)

    def settings(self) -> dict:
        return settings(self.config, self.data_read)

    @property
    def patience_from_step(self) -> int:
        # dev F1 swings while the rate climbs (at batch 250 the warm-up is 12 epochs): patience counts after it
        return self.config.warmup_steps

    def load_data(self) -> None:
        config, data = self.config, self.data
        self.engine.seed()
        self.train_trees = _limit(data.read("train"), config.max_train_trees, "train")
        self.train_lengths = [len(t.leaves()) for t in self.train_trees]
        self.dev_trees = _limit(data.read("dev"), config.max_eval_trees, "dev")
        if not self.train_trees or not self.dev_trees:
            raise UserError("no training or dev trees; check the treebank folder and max_train_trees/max_eval_trees")
        self.train_tags = tags_for(self.train_trees, config)
        self.dev_tags = tags_for(self.dev_trees, config)

    def build_model(self):
        from .model import ChartParser

        self.model = ChartParser.build(self.config, self.train_trees)
        return self.model

    def build_optimizer(self, model) -> torch.optim.Optimizer:
        return make_optimizer(model, self.config)

    def schedule(self, total: int):
        return lambda step: learning_rate_factor(step, self.config)

    def updates(self) -> tuple[int, int]:
        steps_per_epoch = self.engine.steps_per_epoch(math.ceil(len(self.train_trees) / self.config.batch_size))
        return steps_per_epoch * self.config.epochs, self.config.eval_every or steps_per_epoch

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        config = self.config
        return seeded_batches(len(self.train_trees), config.batch_size, self.epoch_order_seed(config.seed, epoch),
                              self.train_lengths if config.group_by_length else None)

    def passes(self, batch: list[int]) -> list[tuple[list[int], float]]:
        return chart_passes(batch, self.train_lengths, self.config.max_chart_cells)

    def batch_loss(self, batch: list[int]):
        tags = [self.train_tags[i] for i in batch] if self.train_tags is not None else None
        return self.model.loss([self.train_trees[i] for i in batch], tags), 1

    def predict(self, inputs, model=None) -> list:
        """Parse the words of ``inputs`` (trees) with ``model`` (default: the one training); the output trees
        carry the input trees' tags (see `_parse`)."""
        return self._parse(model or self.model, inputs, tags_for(inputs, self.config))

    def _parse(self, model, trees, tags) -> list:
        model.eval()
        with torch.no_grad():
            # Output trees carry the gold tags (as SuPar does): EVALB deletes punctuation by each tree's own
            # tags, and the parser does not predict tags, so its input tags must not decide what is scored.
            return model.parse(_words(trees), tags, batch_size=self.config.batch_size,
                               output_tags=[t.tags() for t in trees])

    def evaluate_dev(self, state: EngineState, end_of_epoch: bool) -> Evaluation:
        from ..tasks.evalb import evalb

        predicted = self._parse(self.model, self.dev_trees, self.dev_tags)
        # an evaluation due by eval_every at an epoch's last step records that epoch; one due at its end, the next
        config = self.config
        counted = end_of_epoch and bool(config.eval_every) and state.step % config.eval_every == 0
        return Evaluation({"step": state.step, "epoch": state.epoch - counted,
                           **_metrics(evalb(self.dev_trees, predicted))})

    def on_best(self, entry: dict) -> None:
        self.engine.state.extra["best_epoch"] = entry["epoch"]
        if self.engine.is_main:
            save_pretrained_atomically(self.out / BEST, self.model)

    def summary(self, state: EngineState) -> dict:
        return _finish(self, state)


def train_parser(config, *, show_progress: bool = True, stop_after_steps: int | None = None,
                 command: list[str] | None = None, data: TreebankFiles | None = None,
                 checkpoint_every: int = 0) -> dict:
    """Train, evaluate and test one parser configuration in ``config.output_dir``; return the summary (on the
    main process; the others return where they stopped).

    ``data``: the treebank files (default: the NLTK WSJ sample's fixed split). Rerunning with the same config in
    the same folder resumes from ``checkpoint/`` (a finished run only redoes the final parses).
    ``stop_after_steps`` (tests only) returns ``{"stopped_at_step": N}`` right after that optimizer step without
    saving anything, as a kill would. ``command`` (the argv) is copied into the summary.
    """
    data = data or TreebankFiles()
    data.check(config)
    engine = Engine(config.output_dir, seed=config.seed, precision=config.precision, clip_norm=config.clip_grad,
                    checkpoint_every=checkpoint_every, show_progress=show_progress, name="train-parsing")
    summary = engine.train(ParserFamily(config, data, command), stop_after=stop_after_steps)
    return summary if summary is not None else {"stopped_at_step": engine.state.step}


def _finish(family: ParserFamily, state: EngineState) -> dict:
    """Load best/, parse dev and test (when there is a test file), write the .trees files, score them against
    the raw treebank files and write summary.json (``wall_seconds``: every start of the run, resumed ones
    included, final parses too)."""
    from .model import ChartParser
    from ..tasks.evalb import evalb, evalb_files

    config, data, out, engine = family.config, family.data, family.out, family.engine
    best = ChartParser.from_pretrained(out / BEST, device=engine.device)
    scores = {"test": None}
    for split in data.splits():
        trees = data.read(split)
        used = _limit(trees, config.max_eval_trees, f"{split} (final parse)")
        predicted = family.predict(used, best)
        path = out / f"{split}.trees"
        atomic_write_text(path, "".join(t.to_string() + "\n" for t in predicted))
        # the same figures `structattn score evalb --gold <raw files> --predictions <split>.trees` gives
        if len(used) == len(trees):
            result = evalb_files(data.raw_files(split), path)
        else:  # only the first N trees were parsed: score them against the first N raw trees
            result = evalb(data.read(split, clean=False)[:len(used)], predicted)
        scores[split] = {**_metrics(result), "trees": len(used), "of_trees": len(trees)}
    facts = run_facts(engine)
    summary = {
        "config": config.to_dict(),
        "data": data.describe(),
        "layers": list(best.kinds),
        "dev": scores["dev"], "test": scores["test"],
        "best_dev_f1": state.best, "best_epoch": state.extra.get("best_epoch", -1), "best_step": state.best_step,
        "steps": state.step, "epochs_completed": state.epoch,
        "history": state.history,
        "train_seconds_per_epoch": state.epoch_seconds,
        **{k: facts.pop(k) for k in ("wall_seconds", "device", "torch_threads", "processes")},
        "parameters": sum(p.numel() for p in best.parameters()),
        "trainable_parameters": sum(p.numel() for p in best.parameters() if p.requires_grad),
        "provenance": facts, "command": family.command,
    }
    atomic_write_json(out / "summary.json", summary)
    return summary
