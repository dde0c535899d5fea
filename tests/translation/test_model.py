"""The translation model's initialisation: fairseq's Xavier-uniform linear layers, N(0, d^-1/2) embeddings."""
import math

import pytest
import torch

pytest.importorskip("tokenizers")

from structattn.translation.data import train_bpe_tokenizer  # noqa: E402
from structattn.translation.model import ModelSize, build_model  # noqa: E402

TEXTS = ["A dog runs on the beach.", "Ein Hund läuft am Strand.", "Two men play chess in a park.",
         "Zwei Männer spielen Schach in einem Park."] * 20


@pytest.fixture(scope="module")
def model():
    tok = train_bpe_tokenizer(TEXTS, vocab_size=300)
    return build_model(tok, ModelSize(2, 2, 64, 128, 4, 0.1, max_positions=64), "transformer", seed=3)


def _xavier_bound(weight, gain):
    fan_out, fan_in = weight.shape
    return gain * math.sqrt(6.0 / (fan_in + fan_out))


def test_linear_layers_are_xavier_uniform_with_fairseq_gains(model):
    checked = 0
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear) or name == "lm_head":
            continue
        gain = 2 ** -0.5 if name.endswith(("q_proj", "k_proj", "v_proj")) else 1.0
        bound = _xavier_bound(module.weight, gain)
        w = module.weight.detach()
        assert w.abs().max() <= bound + 1e-7, name
        # a uniform(-a, a) draw has standard deviation a / sqrt(3); thousands of entries pin it within 10 %
        assert w.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.1), name
        assert module.bias is None or torch.count_nonzero(module.bias) == 0, name
        checked += 1
    assert checked == 2 * (4 + 2) + 2 * (4 + 4 + 2)  # per layer: encoder 4 attention + 2 FFN, decoder 4 + 4 + 2


def test_embeddings_keep_the_scaled_normal_and_stay_tied(model):
    emb = model.get_input_embeddings().weight.detach()
    pad = model.config.pad_token_id
    assert emb[pad].abs().sum() == 0
    others = torch.cat([emb[:pad], emb[pad + 1:]])
    assert others.std().item() == pytest.approx(64 ** -0.5, rel=0.1)
    assert model.get_output_embeddings().weight.data_ptr() == emb.data_ptr()


def test_same_seed_same_weights():
    tok = train_bpe_tokenizer(TEXTS, vocab_size=300)
    size = ModelSize(1, 1, 32, 64, 4, 0.1, max_positions=32)
    a, b = build_model(tok, size, seed=5), build_model(tok, size, seed=5)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


@pytest.mark.parametrize("variant", ["transformer", "hybrid_gate"])
def test_untrained_like_draws_the_weights_build_model_draws(variant):
    """The probing control: a trained model's architecture and mechanism with the weights of a fresh build."""
    from structattn.translation.model import untrained_like
    from structattn.models.encoder import mechanism_of

    tok = train_bpe_tokenizer(TEXTS, vocab_size=300)
    size = ModelSize(2, 1, 32, 64, 4, 0.1, max_positions=32)
    trained = build_model(tok, size, variant, seed=1)
    with torch.no_grad():  # stands for training: every weight moves
        for p in trained.parameters():
            p.add_(0.5)
    fresh, expected = untrained_like(trained, seed=7), build_model(tok, size, variant, seed=7)
    assert mechanism_of(fresh) == mechanism_of(trained)
    assert fresh.state_dict().keys() == expected.state_dict().keys()
    assert all(torch.equal(x, y) for x, y in zip(fresh.state_dict().values(), expected.state_dict().values()))
    moved = trained.get_encoder().layers[0].self_attn.q_proj.weight
    assert not torch.equal(fresh.get_encoder().layers[0].self_attn.q_proj.weight, moved)
    assert not fresh.training


def test_xavier_normal_initialisation_draws_every_matrix_and_the_embeddings_as_joey_nmt():
    tok = train_bpe_tokenizer(TEXTS, vocab_size=300)
    model = build_model(tok, ModelSize(2, 2, 64, 128, 4, 0.1, max_positions=64), seed=3, init="xavier_normal")
    q = model.get_encoder().layers[0].self_attn.q_proj
    assert q.weight.std().item() == pytest.approx(math.sqrt(2 / (64 + 64)), rel=0.1)  # gain 1, not 1/sqrt(2)
    assert torch.count_nonzero(q.bias) == 0
    emb = model.get_input_embeddings().weight.detach()
    vocab = emb.shape[0]
    assert emb[model.config.pad_token_id].abs().sum() == 0
    assert emb.std().item() == pytest.approx(math.sqrt(2 / (vocab + 64)), rel=0.15)
    assert model.get_output_embeddings().weight.data_ptr() == emb.data_ptr()


def test_dropout_placement_options_reach_the_marian_modules():
    tok = train_bpe_tokenizer(TEXTS, vocab_size=300)
    model = build_model(tok, ModelSize(1, 1, 32, 64, 4, 0.3, max_positions=32), seed=1, embedding_dropout=0.0,
                        attention_dropout=0.3, activation_dropout=0.2)
    assert model.model.encoder.dropout == model.model.decoder.dropout == 0.0  # embeddings
    layer = model.get_encoder().layers[0]
    assert layer.dropout == 0.3 and layer.activation_dropout == 0.2 and layer.self_attn.dropout == 0.3
    with pytest.raises(Exception, match="unknown initialisation"):
        build_model(tok, ModelSize(1, 1, 32, 64, 4, 0.3, max_positions=32), init="orthogonal")


def test_every_recipe_field_is_in_the_resume_settings():
    from structattn.translation.trainer import NMTConfig, TranslationFamily

    assert {"adam_eps", "init", "residual", "batching", "lr_decay"} <= set(TranslationFamily(NMTConfig()).settings())
    assert TranslationFamily(NMTConfig(batching="shuffled")).settings()["batching"] == "shuffled"
    assert TranslationFamily(NMTConfig(lr_decay="linear")).settings()["lr_decay"] == "linear"


def test_learning_rate_decays_after_the_warm_up_as_chosen():
    from structattn.errors import UserError
    from structattn.translation.trainer import NMTConfig, TranslationFamily

    def factors(**options):   # the factor of each update of an 8-update run with 4 of warm-up
        schedule = TranslationFamily(NMTConfig(warmup=4, max_updates=8, **options)).schedule(8)
        return [round(schedule(step), 4) for step in range(8)]

    # by hand: warm-up 1/4 .. 4/4, then sqrt(4 / step) for steps 5..8
    assert factors() == [0.25, 0.5, 0.75, 1.0, 0.8944, 0.8165, 0.7559, 0.7071]
    # linear: down by 1/5 an update after the peak, the last update at 1/5 (0 would be one update past the end)
    assert factors(lr_decay="linear") == [0.25, 0.5, 0.75, 1.0, 0.8, 0.6, 0.4, 0.2]
    with pytest.raises(UserError, match="unknown --lr-decay 'cosine'; valid: inverse_sqrt, linear"):
        TranslationFamily(NMTConfig(lr_decay="cosine"))


def test_deepnet_constants_for_four_plus_four_layers_are_the_papers():
    from structattn.translation.model import deepnet_alpha_beta

    c = deepnet_alpha_beta(4, 4)   # by hand: 0.81 * 1024^(1/16), 12^(1/4), 0.87 * 1024^(-1/16), 48^(-1/4)
    assert c["alpha"]["encoder"] == pytest.approx(1.2492, abs=1e-4)
    assert c["alpha"]["decoder"] == pytest.approx(1.8612, abs=1e-4)
    assert c["beta"]["encoder"] == pytest.approx(0.5641, abs=1e-4)
    assert c["beta"]["decoder"] == pytest.approx(0.3799, abs=1e-4)


def test_deepnet_initialisation_scales_value_output_and_feed_forward_by_beta_only():
    tok = train_bpe_tokenizer(TEXTS, vocab_size=300)
    model = build_model(tok, ModelSize(2, 2, 64, 128, 4, 0.1, max_positions=64), seed=3, init="deepnet")
    beta_dec = 24 ** -0.25                    # (12 M)^(-1/4), M = 2
    layer = model.get_decoder().layers[0]
    xavier = math.sqrt(2 / (64 + 64))
    assert layer.self_attn.q_proj.weight.std().item() == pytest.approx(xavier, rel=0.1)
    assert layer.encoder_attn.v_proj.weight.std().item() == pytest.approx(beta_dec * xavier, rel=0.1)
    assert layer.fc1.weight.std().item() == pytest.approx(beta_dec * math.sqrt(2 / (64 + 128)), rel=0.1)
    assert model.config.to_dict().get("residual_scale") is None   # the weights alone change nothing else


def test_deepnet_residual_is_layer_norm_of_alpha_x_plus_branch_and_survives_saving(tmp_path):
    from transformers import AutoModelForSeq2SeqLM

    from structattn.translation.translator import Translator

    tok = train_bpe_tokenizer(TEXTS, vocab_size=300)
    model = build_model(tok, ModelSize(2, 2, 32, 64, 4, 0.1, max_positions=32), seed=1, residual="deepnet").eval()
    alpha = model.config.residual_scale["encoder"]
    assert alpha == pytest.approx(0.81 * 32 ** (1 / 16))
    layer = model.get_encoder().layers[1]
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        got = layer(x, attention_mask=None)
        got = got[0] if isinstance(got, tuple) else got
        plain = AutoModelForSeq2SeqLM.from_config(model.config).eval()   # no hooks: the branches as Marian has them
        plain.load_state_dict(model.state_dict())
        ref = plain.get_encoder().layers[1]
        h = ref.self_attn_layer_norm(alpha * x + ref.self_attn(x)[0])
        want = ref.final_layer_norm(alpha * h + ref.fc2(torch.relu(ref.fc1(h))))
    assert torch.allclose(got, want, atol=1e-4)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded = Translator.load(tmp_path).model
    assert loaded.config.residual_scale == pytest.approx(model.config.residual_scale)
    ids = torch.tensor([[5, 6, 7, 2]])
    with torch.no_grad():
        assert torch.allclose(loaded(input_ids=ids, decoder_input_ids=ids).logits,
                              model(input_ids=ids, decoder_input_ids=ids).logits, atol=1e-5)
    with pytest.raises(Exception, match="unknown residual"):
        build_model(tok, ModelSize(1, 1, 32, 64, 4, 0.3, max_positions=32), residual="rezero")
