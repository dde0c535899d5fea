"""structattn inside the Hugging Face stack: the processor and collator, Trainer with its default arguments, the
Auto classes (a saved structure-aware folder loads with its mechanism, or is refused; never as the stock model),
LoRA through PEFT, two CPU processes and a compiled train step without graph breaks. Tiny random models with the
default encoder's WordPiece vocabulary; spaCy's small English pipeline parses."""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import structattn
from structattn.errors import UserError
from structattn.structure import ExpansionRules, build_word_structures, encode_words, token_mask

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
TEXTS = ["The cat sat on the mat.", "It purred loudly. Then it slept.", "Dogs bark.", "A bird sang at dawn."]


def tiny_folder(folder: Path, task: str = "sequence-classification", mechanism: str = "sla", **options) -> Path:
    """A tiny random BERT of ``task`` with ``mechanism`` (random gates), saved with its tokenizer."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from structattn.settings import default_encoder

    tok = AutoTokenizer.from_pretrained(default_encoder())
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=128, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    BertModel(cfg).save_pretrained(folder / "stock")
    model = structattn.from_pretrained(str(folder / "stock"), task=task, mechanism=mechanism, num_labels=2,
                                       **options)
    with torch.no_grad():
        for p in structattn.models.encoder.gate_parameters(model):
            p.normal_(0.0, 1.0)
    model.save_pretrained(folder / mechanism)
    tok.save_pretrained(folder / mechanism)
    return folder / mechanism


@pytest.fixture(scope="module")
def sla_folder(tmp_path_factory) -> Path:
    return tiny_folder(tmp_path_factory.mktemp("sla"))


@pytest.fixture(scope="module")
def processor(sla_folder):
    return structattn.StructureProcessor.from_pretrained(sla_folder)


# ---------------------------------------------------------------------------------------------- the processor
def test_processor_reads_the_mechanism_and_matches_the_word_pipeline(processor):
    """The processor's mask equals the one the word-level pipeline builds from the same parse."""
    assert processor.mechanism.name == "sla" and processor.spec.relation == "sla"
    from structattn.dependency.cache import parse_cached

    passages = parse_cached(TEXTS, processor.parser, kind="texts")
    structures = build_word_structures(passages, None, "sla", **processor.spec.options)
    out = processor(TEXTS)
    for i, (passage, structure) in enumerate(zip(passages, structures)):
        words = [w for s in passage for w in s.words]
        (window,) = encode_words(processor.tokenizer, words, max_length=10_000)
        assert out["input_ids"][i] == window.input_ids
        expected = token_mask(structure, np.asarray(window.token_word), ExpansionRules.for_relation("sla"))
        assert np.array_equal(out["structure_mask"][i], expected)


def test_processor_input_forms_agree(processor):
    one = processor(TEXTS[0])
    batch = processor(TEXTS)
    assert one["input_ids"] == batch["input_ids"][0]
    assert np.array_equal(one["structure_mask"], batch["structure_mask"][0])
    words = [["The", "cat", "sat", "."], ["Dogs", "bark", "."]]
    split = processor(words, is_split_into_words=True)
    assert split["input_ids"][1] == processor.tokenizer(words[1], is_split_into_words=True)["input_ids"]
    pair = processor(["Who sat?"], ["The cat sat."], padding=True, return_tensors="pt")
    assert pair["token_type_ids"][0].tolist().count(1) == len(processor.tokenizer("The cat sat.")["input_ids"]) - 1
    cut = processor(TEXTS, truncation=True, max_length=6)
    assert max(len(ids) for ids in cut["input_ids"]) == 6


def test_padding_in_the_processor_equals_the_collator(processor):
    padded = processor(TEXTS, padding=True, return_tensors="pt")
    collated = structattn.StructureDataCollator(processor)(processor.encode(TEXTS))
    assert padded.keys() == collated.keys()
    for key in padded:
        assert torch.equal(padded[key], collated[key]), key
    assert padded["structure_mask"].shape == (4, padded["input_ids"].shape[1], padded["input_ids"].shape[1])
    # padded rows see the real tokens, real rows never see padding
    mask, att = padded["structure_mask"], padded["attention_mask"].bool()
    assert not (mask & att[:, :, None] & ~att[:, None, :]).any()
    assert (mask | att[:, :, None]).any(-1).all()


def test_processor_user_errors_are_one_line(processor, sla_folder, tmp_path):
    with pytest.raises(UserError, match="padding=True"):
        processor(TEXTS, return_tensors="pt")
    with pytest.raises(UserError, match="is_split_into_words"):
        processor("The cat.", is_split_into_words=True)
    with pytest.raises(UserError, match="truncation"):
        processor(TEXTS, truncation="only_second")
    with pytest.raises(UserError, match="one second segment per example"):
        processor(TEXTS, ["x"])
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(UserError, match="mechanism='sla'"):
        structattn.StructureProcessor.from_pretrained(tmp_path)
    with pytest.raises(UserError, match="lack structure_mask"):
        structattn.StructureDataCollator(processor)([{"input_ids": [1], "attention_mask": [1]}])


def test_processor_saves_and_loads_and_pickles_without_the_parser(processor, tmp_path):
    import pickle

    processor("Warm the parser up.")
    assert processor._parser is not None
    clone = pickle.loads(pickle.dumps(processor))
    assert clone._parser is None and clone.mechanism == processor.mechanism
    processor.save_pretrained(tmp_path)
    again = structattn.StructureProcessor.from_pretrained(tmp_path)
    assert again.mechanism == processor.mechanism and again.parser_name == processor.parser_name
    assert again(TEXTS)["input_ids"] == processor(TEXTS)["input_ids"]


def test_the_parser_loads_once_per_processor(sla_folder, monkeypatch):
    import spacy

    calls = []
    real = spacy.load
    monkeypatch.setattr(spacy, "load", lambda *a, **k: calls.append(a) or real(*a, **k))
    fresh = structattn.StructureProcessor.from_pretrained(sla_folder)
    for i in range(3):
        fresh([f"Sentence number {i} is new here {os.getpid()}."])
    assert len(calls) <= 1


def test_datasets_map_batched(processor):
    datasets = pytest.importorskip("datasets", reason="datasets is in the project's hf extra")
    ds = datasets.Dataset.from_dict({"text": TEXTS, "label": [0, 1, 0, 1]})
    ds = ds.map(lambda b: processor(b["text"]), batched=True, batch_size=3)
    direct = processor(TEXTS)
    assert ds["input_ids"] == direct["input_ids"]
    batch = structattn.StructureDataCollator(processor)([ds[i] for i in range(4)])
    assert torch.equal(batch["structure_mask"], processor(TEXTS, padding=True, return_tensors="pt")["structure_mask"])
    assert batch["labels"].tolist() == [0, 1, 0, 1]


# ------------------------------------------------------------------------------------------------- Trainer
def test_trainer_with_default_arguments_passes_the_mask_to_every_forward(sla_folder, processor, tmp_path):
    datasets = pytest.importorskip("datasets", reason="datasets is in the project's hf extra")
    from transformers import Trainer, TrainingArguments

    model = structattn.from_pretrained(str(sla_folder), task="sequence-classification")
    assert "structure_mask" in inspect.signature(model.forward).parameters
    seen = []
    model.register_forward_pre_hook(lambda m, a, kw: seen.append(kw.get("structure_mask") is not None),
                                    with_kwargs=True)
    ds = datasets.Dataset.from_dict({"text": TEXTS * 2, "label": [0, 1, 0, 1] * 2})
    ds = ds.map(lambda b: processor(b["text"]), batched=True)
    before = [p.detach().clone() for p in structattn.models.encoder.gate_parameters(model)]
    args = TrainingArguments(str(tmp_path / "out"), max_steps=2, per_device_train_batch_size=4, report_to="none")
    assert args.remove_unused_columns  # the default
    trainer = Trainer(model=model, args=args, train_dataset=ds, eval_dataset=ds,
                      data_collator=structattn.StructureDataCollator(processor))
    trainer.train()
    metrics = trainer.evaluate()
    assert np.isfinite(metrics["eval_loss"])
    assert seen and all(seen), f"{seen.count(False)} of {len(seen)} forwards had no structure_mask"
    after = structattn.models.encoder.gate_parameters(model)
    assert any(not torch.equal(a, b) for a, b in zip(before, after)), "the gates did not train"


# --------------------------------------------------------------------------------------------- Auto classes
def _batch(processor):
    return processor(TEXTS, padding=True, return_tensors="pt")


@pytest.mark.parametrize("mechanism, options", [("sla", {}), ("wla", {"k": 2}), ("hybrid", {"layers": 1}),
                                                ("sdoi", {})])
def test_auto_classes_load_each_mechanism_as_from_pretrained_does(tmp_path, mechanism, options):
    from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification

    folder = tiny_folder(tmp_path, mechanism=mechanism, **options)
    saved = json.loads((folder / "config.json").read_text())
    assert saved["model_type"] == "structattn" and saved["structattn_base_model_type"] == "bert"
    assert AutoConfig.from_pretrained(folder).structattn["name"] == mechanism
    ours = structattn.from_pretrained(str(folder), task="sequence-classification").eval()
    auto = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    assert structattn.mechanism_of(auto) == structattn.mechanism_of(ours)
    batch = _batch(structattn.StructureProcessor.from_pretrained(folder))
    with torch.no_grad():
        assert torch.equal(auto(**batch).logits, ours(**batch).logits)
    base = AutoModel.from_pretrained(folder)
    assert structattn.mechanism_of(base).name == mechanism
    fresh = AutoModelForSequenceClassification.from_config(AutoConfig.from_pretrained(folder))
    assert structattn.mechanism_of(fresh).name == mechanism
    three = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=3, ignore_mismatched_sizes=True)
    assert three.config.num_labels == 3 and structattn.mechanism_of(three).name == mechanism


def test_a_saved_folder_is_never_the_stock_model_without_structattn(sla_folder):
    code = ("from transformers import AutoModelForSequenceClassification as A\n"
            f"A.from_pretrained({str(sla_folder)!r})\n")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode != 0 and "structattn" in done.stderr


def test_remove_mechanism_saves_the_stock_type(sla_folder, tmp_path):
    model = structattn.from_pretrained(str(sla_folder), task="sequence-classification")
    structattn.remove_mechanism(model)
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "bert"


def _small_nmt_size():
    from structattn.translation.model import ModelSize

    return ModelSize(encoder_layers=2, decoder_layers=2, d_model=16, ffn=32, heads=2, dropout=0.0, max_positions=64)


def test_sgnet_and_deepnet_translation_folders_are_refused_in_one_line(tmp_path):
    from transformers import AutoModel, AutoModelForSeq2SeqLM, AutoTokenizer

    from structattn.settings import default_encoder
    from structattn.sgnet.model import SGNetConfig, SGNetModel

    folder = tiny_folder(tmp_path)
    sg = SGNetModel.from_encoder(str(folder), SGNetConfig(aggregation="dual", head="span_qa"))
    sg.save_pretrained(tmp_path / "sgnet")
    assert json.loads((tmp_path / "sgnet" / "config.json").read_text())["model_type"] == "structattn"
    with pytest.raises(UserError, match="SG-Net.*Reader.from_pretrained"):
        AutoModel.from_pretrained(tmp_path / "sgnet")
    assert type(SGNetModel.from_pretrained(tmp_path / "sgnet")).__name__ == "SGNetForSpanQA"

    from structattn.translation.model import build_model

    tok = AutoTokenizer.from_pretrained(default_encoder())
    nmt = build_model(tok, _small_nmt_size(), variant="hybrid_gate", residual="deepnet")
    nmt.save_pretrained(tmp_path / "nmt")
    with pytest.raises(UserError, match="DeepNet.*Translator.from_pretrained"):
        AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "nmt")


def test_hybrid_translation_model_loads_through_auto_seq2seq(tmp_path):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from structattn.settings import default_encoder
    from structattn.translation.model import build_model

    tok = AutoTokenizer.from_pretrained(default_encoder())
    nmt = build_model(tok, _small_nmt_size(), variant="hybrid_gate").eval()
    nmt.save_pretrained(tmp_path)
    auto = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert structattn.mechanism_of(auto).name == "hybrid"
    ids = torch.randint(5, 1000, (2, 9))
    with torch.no_grad():
        a = nmt(input_ids=ids, decoder_input_ids=ids[:, :4]).logits
        b = auto(input_ids=ids, decoder_input_ids=ids[:, :4]).logits
    assert torch.equal(a, b)


# ------------------------------------------------------------------------------------------------------ PEFT
def test_lora_trains_adapters_and_gates_and_round_trips(sla_folder, processor, tmp_path):
    peft = pytest.importorskip("peft", reason="peft is in the project's hf extra")
    from structattn.attention.names import GATE_ATTR

    base = structattn.from_pretrained(str(sla_folder), task="sequence-classification")
    gates_before = [p.detach().clone() for p in structattn.models.encoder.gate_parameters(base)]
    model = peft.get_peft_model(base, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["query", "value"],
                                                      modules_to_save=[GATE_ATTR, "classifier"]))
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert any("lora_A" in n for n in trainable) and any(GATE_ATTR in n for n in trainable)
    batch = _batch(processor)
    labels = torch.tensor([0, 1, 0, 1])
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(3):
        model(**batch, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    trained_gates = [p for n, p in model.named_parameters() if GATE_ATTR in n and "modules_to_save" in n]
    assert trained_gates and any(not torch.equal(a, b) for a, b in zip(gates_before, trained_gates))
    model.save_pretrained(tmp_path / "adapter")
    fresh = structattn.from_pretrained(str(sla_folder), task="sequence-classification")
    reloaded = peft.PeftModel.from_pretrained(fresh, tmp_path / "adapter").eval()
    model.eval()
    with torch.no_grad():
        expected = model(**batch).logits
        assert torch.equal(expected, reloaded(**batch).logits)
        merged = reloaded.merge_and_unload()
        torch.testing.assert_close(merged(**batch).logits, expected, atol=1e-5, rtol=1e-4)


# ------------------------------------------------------------------------------------------- two processes
TWO_RANKS = textwrap.dedent('''
    import hashlib, sys, torch, datasets
    from transformers import Trainer, TrainingArguments
    import structattn

    folder, out = sys.argv[1], sys.argv[2]
    processor = structattn.StructureProcessor.from_pretrained(folder)
    model = structattn.from_pretrained(folder, task="sequence-classification")
    texts = {texts!r} * 4
    ds = datasets.Dataset.from_dict({{"text": texts, "label": [0, 1] * (len(texts) // 2)}})
    ds = ds.map(lambda b: processor(b["text"]), batched=True)
    args = TrainingArguments(out, max_steps=3, per_device_train_batch_size=2, report_to="none", use_cpu=True,
                             ddp_backend="gloo", save_strategy="no", seed=1)
    trainer = Trainer(model=model, args=args, train_dataset=ds, data_collator=structattn.StructureDataCollator(processor))
    trainer.train()
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
    rank, kind = trainer.args.process_index, trainer.accelerator.distributed_type.value
    open(f"{{out}}/rank{{rank}}.txt", "w").write(f"{{trainer.args.world_size}} {{kind}} {{digest}}")
''')


@pytest.mark.slow
def test_two_cpu_processes_end_with_equal_weights(sla_folder, tmp_path):
    pytest.importorskip("datasets", reason="datasets is in the project's hf extra")
    script = tmp_path / "train.py"
    script.write_text(TWO_RANKS.format(texts=TEXTS))
    (tmp_path / "out").mkdir()
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    import socket

    with socket.socket() as sock:  # a free port for the two ranks to meet on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port),
           str(script), str(sla_folder), str(tmp_path / "out")]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [(tmp_path / "out" / f"rank{r}.txt").read_text().split() for r in (0, 1)]
    assert ranks[0][:2] == ranks[1][:2] == ["2", "MULTI_CPU"]  # without use_cpu=True each rank trains alone
    assert ranks[0][2] == ranks[1][2]


# ------------------------------------------------------------------------------------------- torch.compile
@pytest.mark.slow
def test_a_compiled_train_step_has_no_graph_break_on_processor_batches(sla_folder, processor):
    model = structattn.from_pretrained(str(sla_folder), task="sequence-classification").train()
    batch = _batch(processor)
    labels = torch.tensor([0, 1, 0, 1])
    from torch import _dynamo

    _dynamo.reset()
    explained = _dynamo.explain(lambda **kw: model(**kw).loss)(**batch, labels=labels)
    assert explained.graph_break_count == 0, explained.break_reasons
    compiled = torch.compile(model, fullgraph=True)
    loss = compiled(**batch, labels=labels).loss
    loss.backward()
    assert torch.isfinite(loss)
