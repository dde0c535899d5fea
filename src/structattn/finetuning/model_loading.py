"""Loading the model and tokenizer an SLA/WLA/LISA run trains: a transformers task model (the encoder with its
mechanism and a task head) and its fast tokenizer."""
from __future__ import annotations

import torch


def model_task_name(kind: str) -> str:
    return {"classification": "sequence-classification", "regression": "sequence-classification",
            "tagging": "token-classification"}[kind]


def load_model_and_tokenizer(cfg, task, model_path: str | None = None):
    """The task model with the configured mechanism, and its fast tokenizer."""
    from ..models.encoder import from_pretrained, mechanism_overrides
    from ..models.tokenizer import load_tokenizer
    from ..settings import default_encoder

    name = model_path or cfg.model or default_encoder()
    kwargs = {}
    if task.kind == "regression":
        kwargs.update(num_labels=1, problem_type="regression")
    else:
        kwargs.update(num_labels=task.num_labels)
        if task.label_list:
            kwargs["id2label"] = dict(enumerate(task.label_list))
            kwargs["label2id"] = {lab: i for i, lab in enumerate(task.label_list)}
    # float32 weights whatever dtype the checkpoint was stored in (transformers v5 keeps the stored one): the
    # optimiser updates them, and --precision decides what the products run in
    model = from_pretrained(name, task=model_task_name(task.kind), mechanism=cfg.mechanism,
                            **mechanism_overrides(cfg), dtype=torch.float32, **kwargs)
    return model, load_tokenizer(name, model.config.model_type)

