"""One window definition per mechanism (issue 9, point 1), and how modules are found and caches bounded.

``window_unit="token"`` (``hybrid``): the collator and a call without ``structure_mask`` build the same band over
token positions, so ``model(**tokenizer(texts))`` and the training batch give the same output.
``window_unit="word"`` (``wla``): a call without ``structure_mask`` has no word boundaries and must fail.
"""
from __future__ import annotations

import copy
import warnings

import pytest
import torch
from attn_helpers import COMMON, LAYERS, random_batch, tiny_model, window_mask

from structattn.attention import attention_modules, force_gate, gate_parameters
from structattn.errors import UserError
from structattn.models.encoder import apply_mechanism, mechanism_of

TEXTS = ["the cat sat on the mat .", "unbelievably good film , really !", "he went to new york yesterday"]


def _hidden(model, **batch):
    return model(**batch).last_hidden_state


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from structattn.settings import default_encoder

    try:
        folder = default_encoder()
    except ImportError as exc:
        pytest.skip(f"no offline encoder for its tokenizer: {exc}")
    return AutoTokenizer.from_pretrained(folder)


def _collated(model, tokenizer, texts):
    """The training path: the model's StructureSpec, build_features and the collator (as the trainer does)."""
    from structattn.structure import StructureCollator
    from structattn.tasks import get_task
    from structattn.tasks.base import Example
    from structattn.structure.spec import StructureSpec
    from structattn.train.features import build_features

    spec = StructureSpec.for_mechanism(mechanism_of(model))
    examples = [Example(words_a=t.split(), words_b=None, label=0, guid=f"t:{i}") for i, t in enumerate(texts)]
    feats = build_features(get_task("sst2"), examples, tokenizer, spec, max_length=64, stride=16,
                           parser_name="unused (window needs no parse)", show_progress=False)
    batch = StructureCollator(tokenizer.pad_token_id, spec.rules, with_structure=spec.relation is not None)(feats)
    batch.pop("labels")
    return batch


@pytest.mark.parametrize("kernel", ["exact", "fused"])
def test_hybrid_tokenizer_call_equals_the_collator_batch(tokenizer, kernel):
    model = apply_mechanism(tiny_model(vocab_size=tokenizer.vocab_size), "hybrid", kernel=kernel)
    assert mechanism_of(model).window_unit == "token"
    plain = dict(tokenizer(TEXTS, padding=True, return_tensors="pt"))
    collated = _collated(model, tokenizer, TEXTS)
    assert "structure_mask" in collated
    for key in ("input_ids", "attention_mask", "token_type_ids"):  # the same tokens, so the same model input
        assert torch.equal(plain[key], collated[key]), key
    real = plain["attention_mask"].bool()[..., None]
    got, want = _hidden(model, **plain), _hidden(model, **collated)
    assert torch.equal(got * real, want * real)
    # and the mechanism is on: the stock model differs
    with force_gate(model, 0.0):
        assert not torch.allclose(_hidden(model, **plain) * real, got * real, atol=1e-4)


def test_word_window_without_structure_mask_fails_saying_what_to_do():
    ids, att, _ = random_batch()
    wla = apply_mechanism(tiny_model(), "wla", k=2)
    assert mechanism_of(wla).window_unit == "word"
    with pytest.raises(UserError, match="word boundaries") as err:
        wla(input_ids=ids, attention_mask=att)
    assert "StructureCollator" in str(err.value) and "window_unit='token'" in str(err.value)


@pytest.mark.parametrize("mechanism", ["hybrid", "wla"])
def test_token_window_without_structure_mask_is_the_band(mechanism):
    ids, att, _ = random_batch()
    model = apply_mechanism(tiny_model(), mechanism, k=2, window_unit="token", layers=None)
    implicit = _hidden(model, input_ids=ids, attention_mask=att)
    explicit = _hidden(model, input_ids=ids, attention_mask=att, structure_mask=window_mask(*ids.shape, 2))
    assert torch.equal(implicit, explicit)


def test_structure_spec_follows_the_window_unit():
    from structattn.attention import get_mechanism
    from structattn.structure.spec import StructureSpec

    hybrid = StructureSpec.for_mechanism(get_mechanism("hybrid", k=2))
    assert (hybrid.relation, hybrid.options, hybrid.rules.token_window) == ("window", {"k": 2}, 2)
    wla = StructureSpec.for_mechanism(get_mechanism("wla", k=2))
    assert (wla.relation, wla.options, wla.rules.token_window) == ("window", {"k": 2}, None)
    assert wla.rules.special_rows == "all" and wla.rules.special_cols == "visible"
    sla = StructureSpec.for_mechanism(get_mechanism("sla", m=4))
    assert (sla.relation, sla.options, sla.rules.token_window) == ("sla", {"m": 4}, None)
    stock = StructureSpec.for_mechanism(None)
    assert stock.relation is None and not stock.needs_parse
    # only word relations (and LISA's parents) need word structures; a token window is built from positions
    assert not hybrid.needs_word_structures and not stock.needs_word_structures
    assert wla.needs_word_structures and sla.needs_word_structures
    assert StructureSpec.for_mechanism(get_mechanism("hybrid"), need_parents=True).needs_word_structures


def test_token_window_cache_is_bounded():
    from structattn.attention.integration import WINDOW_CACHE_SIZE

    model = apply_mechanism(tiny_model(), "hybrid")
    for t in range(3, 3 + 3 * WINDOW_CACHE_SIZE):
        ids, att, _ = random_batch(b=2, t=t, pad=False)
        model(input_ids=ids, attention_mask=att)
    cache = model._structattn_rt.window_cache
    assert len(cache) == WINDOW_CACHE_SIZE
    assert max(key[0] for key in cache) == 2 + 3 * WINDOW_CACHE_SIZE  # the most recent shapes are kept


def test_subclassed_attention_modules_are_found():
    """Modules are found by class (isinstance), not by the class's name: a user's subclass of
    BertSelfAttention still gets the mechanism."""
    from transformers.models.bert.modeling_bert import BertSelfAttention

    class TracedSelfAttention(BertSelfAttention):
        pass

    ids, att, mask = random_batch()
    stock = tiny_model()
    model = copy.deepcopy(stock)
    for layer in model.encoder.layer:
        old = layer.attention.self
        new = TracedSelfAttention(model.config, layer_idx=old.layer_idx)
        new.load_state_dict(old.state_dict())
        layer.attention.self = new
    apply_mechanism(model.eval(), "sla")
    assert len(attention_modules(model)) == LAYERS
    assert len(gate_parameters(model)) == 2 * LAYERS
    with force_gate(model, 0.0):
        assert torch.equal(_hidden(model, input_ids=ids, attention_mask=att, structure_mask=mask),
                           _hidden(stock, input_ids=ids, attention_mask=att))


def test_untested_architecture_installs_with_a_warning():
    import transformers as T

    ids, att, mask = random_batch()
    torch.manual_seed(0)
    model = T.AutoModel.from_config(T.CamembertConfig(**COMMON, pad_token_id=1)).eval()
    with pytest.warns(UserWarning, match="not in the tested list"):
        apply_mechanism(model, "sla")
    assert len(gate_parameters(model)) == 2 * LAYERS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = model(input_ids=ids, attention_mask=att, structure_mask=mask, output_gates=True)
    assert len(out.gates) == LAYERS
