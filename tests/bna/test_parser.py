"""ChartParser and its word encoders on tiny models: vocabularies, layer stacks, shapes, padding invariance,
overfitting five trees, save/load round trips (character and pretrained encoders), bad input.

The pretrained path uses a randomly initialised 2-layer BERT with a 30-entry vocabulary saved to tmp_path:
nothing is downloaded.
"""
from __future__ import annotations

import json

import pytest
import torch

from structattn.bna.model import VARIANTS, ChartParser, ParserConfig, label_vocabulary, layer_kinds
from structattn.errors import UserError
from structattn.bna.word_encoders import CharWordEncoder, PretrainedWordEncoder, build_vocabularies
from structattn.tasks.ptb import parse_trees

torch.set_num_threads(1)

GOLD = """
(S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .))
(S (NP (PRP He)) (VP (VBD ran)) (. .))
(S (NP (NNP John)) (VP (VBZ likes) (NP (NNP Mary))))
(NP (NP (DT a) (JJ big) (NN dog)) (PP (IN with) (NP (NNS teeth))))
(S (NP (-LRB- -LRB-) (DT The) (NNS dogs) (-RRB- -RRB-)) (VP (VBD barked) (ADVP (RB loudly))) (. .))
"""

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "he", "ran", "john",
         "likes", "mary", "a", "big", "dog", "with", "teeth", "dogs", "barked", "loud", "##ly", "(", ")", ".",
         "un", "##believ", "##ably"]


@pytest.fixture(scope="module")
def trees():
    return parse_trees(GOLD)


def tiny(**overrides) -> ParserConfig:
    base = dict(encoder="none", d_model=16, heads=2, d_head=8, d_ff=32, label_hidden=16, char_dim=8, word_dim=8,
                num_layers=2, ngram=2, residual_dropout=0.0, ff_dropout=0.0, attn_dropout=0.0, char_dropout=0.0)
    base.update(overrides)
    return ParserConfig(**base)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A folder with a random 2-layer BERT (hidden 16, 16 positions) and its tiny WordPiece tokenizer."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny_bert")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)
    BertModel(config).save_pretrained(folder)
    BertTokenizerFast(vocab={w: i for i, w in enumerate(VOCAB)}).save_pretrained(folder)
    return folder


def strings(parsed) -> list[str]:
    return [t.to_string() for t in parsed]


# ------------------------------------------------------------------------------------------- config
def test_config_json_round_trip_and_unknown_keys(tmp_path):
    cfg = ParserConfig(layers=["bimsa", "nsa"], epochs=3, pos="gold")
    cfg.save(tmp_path / "c.json")
    assert ParserConfig.load(tmp_path / "c.json") == cfg
    assert ParserConfig.from_dict({"layers": "sa,nsa", "fine_tune_encoder": "false", "epochs": "4"}) == \
        ParserConfig(layers=["sa", "nsa"], fine_tune_encoder=False, epochs=4)
    with pytest.raises(UserError, match=r"unknown key\(s\) nope; valid keys: .*attn_dropout.*warmup_steps"):
        ParserConfig.from_dict({"nope": 1})
    with pytest.raises(UserError, match="epochs=2.5"):
        ParserConfig.from_dict({"epochs": 2.5})


def test_training_fields_have_the_agreed_defaults():
    cfg = ParserConfig()
    assert (cfg.output_dir, cfg.seed, cfg.epochs, cfg.batch_size, cfg.learning_rate, cfg.encoder_learning_rate,
            cfg.warmup_steps, cfg.patience, cfg.max_train_trees, cfg.max_eval_trees, cfg.eval_every,
            cfg.clip_grad) == ("runs/parser", 42, 30, 32, 1e-3, 5e-5, 200, 5, 0, 0, 0, 5.0)


# ------------------------------------------------------------------------------------------- layer stacks
@pytest.mark.parametrize("variant,expected", [
    ("sa", ["sa"] * 4), ("bimsa", ["bimsa"] * 4), ("sa_nsa", ["sa"] * 3 + ["nsa"]), ("bna", ["bimsa"] * 3 + ["nsa"])])
def test_variants_without_a_pretrained_encoder_have_four_layers(variant, expected):
    assert layer_kinds(ParserConfig(encoder="none", variant=variant)) == expected


def test_layer_count_rules():
    assert layer_kinds(ParserConfig(variant="bna")) == ["bimsa", "nsa"]  # pretrained: 2 layers
    assert layer_kinds(ParserConfig(variant="bna", num_layers=5, nsa_layers=2)) == ["bimsa"] * 3 + ["nsa"] * 2
    assert layer_kinds(ParserConfig(variant="bna", layers=["nsa", "sa"])) == ["nsa", "sa"]
    with pytest.raises(UserError, match="nsa_layers=3"):
        layer_kinds(ParserConfig(variant="sa_nsa", num_layers=2, nsa_layers=3))
    assert set(VARIANTS) == {"sa", "bimsa", "sa_nsa", "bna"}


def test_unknown_variant_and_layer_kind_are_user_errors(trees):
    with pytest.raises(UserError, match="unknown parser variant 'bnaa'; valid variants: sa, bimsa, sa_nsa, bna"):
        ChartParser.build(tiny(variant="bnaa"), trees)
    with pytest.raises(UserError, match="unknown layer kind 'lstm'"):
        ChartParser.build(tiny(layers=["bimsa", "lstm"]), trees)
    with pytest.raises(UserError, match="pos mode"):
        ChartParser.build(tiny(pos="predicted"), trees)
    with pytest.raises(UserError, match="even"):
        ChartParser.build(tiny(d_model=15), trees)
    with pytest.raises(UserError, match="unknown scorer 'bilinear'; valid: mlp, biaffine"):
        ChartParser.build(tiny(scorer="bilinear"), trees)
    with pytest.raises(UserError, match="char_hidden=7 must be 0"):
        ChartParser.build(tiny(char_hidden=7), trees)


def test_char_hidden_sizes_the_character_lstm(trees):
    assert ChartParser.build(tiny(), trees).encoder.char_lstm.hidden_size == 8  # 0: d_model, split in two directions
    assert ChartParser.build(tiny(char_hidden=10), trees).encoder.char_lstm.hidden_size == 5


# ------------------------------------------------------------------------------------------- vocabularies
def test_vocabularies_come_from_the_training_trees(trees):
    extra = parse_trees("(S (VP (VB Go)))")
    parser = ChartParser.build(tiny(pos="gold"), trees + extra)
    assert parser.labels == ["", "ADVP", "NP", "PP", "S", "S::VP", "VP"]
    assert label_vocabulary(extra) == ["", "S::VP"]
    assert parser.tags == sorted({"-LRB-", "-RRB-", ".", "DT", "IN", "JJ", "NN", "NNP", "NNS", "PRP", "RB",
                                  "VB", "VBD", "VBZ"})
    words, chars = build_vocabularies([["The", "the", "cat"], ["dog", "THE"]])
    assert words == ["<pad>", "<unk>", "the"]  # lower-cased, seen twice or more
    assert chars[:4] == ["<pad>", "<unk>", "<w>", "</w>"] and set(chars[4:]) == set("TheTHEcatdog")


# ------------------------------------------------------------------------------------------- forward
def test_forward_shapes_and_empty_label(trees):
    torch.manual_seed(0)
    parser = ChartParser.build(tiny(), trees)
    words = [t.leaves() for t in trees[:3]]
    scores, lengths = parser(words)
    assert lengths.tolist() == [7, 3, 3]
    assert scores.shape == (3, 8, 8, len(parser.labels))
    assert torch.all(scores[..., 0] == 0)


@pytest.mark.parametrize("variant", ["bna", "sa"])
def test_parses_do_not_depend_on_batching(trees, variant):
    """Padding must not leak: a sentence scores the same alone and beside longer ones."""
    torch.manual_seed(1)
    parser = ChartParser.build(tiny(variant=variant, pos="gold"), trees).eval()
    words, tags = [t.leaves() for t in trees], [t.tags() for t in trees]
    with torch.no_grad():
        batched, _ = parser(words, tags)
        for k, (w, t) in enumerate(zip(words, tags)):
            alone, _ = parser([w], [t])
            n = len(w) + 1
            torch.testing.assert_close(batched[k, :n, :n], alone[0], atol=1e-5, rtol=1e-5)
    assert strings(parser.parse(words, tags, batch_size=1)) == strings(parser.parse(words, tags, batch_size=4))


def test_char_encoder_rows_and_unknown_words():
    words, chars = build_vocabularies([["a", "a", "b"]])
    enc = CharWordEncoder(chars, words, d_out=6, char_dim=4, word_dim=4, char_dropout=0.0, max_words=5).eval()
    out = enc([["a", "zz"], ["b", "a", "a"]])
    assert out.shape == (2, 5, 6)
    assert torch.all(out[0, 4] == 0)  # padding row of the shorter sentence
    # START / STOP: learned vectors plus their position embedding
    torch.testing.assert_close(out[0, 0], enc.start + enc.position.weight[0])
    torch.testing.assert_close(out[0, 3], enc.stop + enc.position.weight[3])
    torch.testing.assert_close(out[1, 4], enc.stop + enc.position.weight[4])
    with pytest.raises(UserError, match="sentence 0: 6 words, more than the parser's max_words=5"):
        enc([["a"] * 6])


def test_char_states_equal_one_word_at_a_time_forward_and_backward():
    """The encoder groups words by length for the BiLSTM; the reference runs each word alone (no grouping, no
    padding) through the same LSTM and reads its final states."""
    torch.manual_seed(0)
    sentences = [["a", "bb", "ccc", "a"], ["dddd", "bb"], ["e", "ccc", "ffffff", "bb", "a"]]
    words, chars = build_vocabularies(sentences, min_count=1)
    enc = CharWordEncoder(chars, words, d_out=6, char_dim=4, word_dim=4, char_dropout=0.0, max_words=8)
    char_lists = [enc._char_ids(w) for sent in sentences for w in sent]
    grouped = enc._char_vectors(char_lists, torch.device("cpu"))  # [N, 6]
    weight = torch.randn_like(grouped)
    grad_grouped = torch.autograd.grad((grouped * weight).sum(), list(enc.char_lstm.parameters()))
    alone = []
    for ids in char_lists:
        _, (h_n, _) = enc.char_lstm(enc.char_embedding(torch.tensor([ids])))  # h_n [2, 1, 3]
        alone.append(torch.cat([h_n[0, 0], h_n[1, 0]]))
    alone = torch.stack(alone)
    grad_alone = torch.autograd.grad((alone * weight).sum(), list(enc.char_lstm.parameters()))
    torch.testing.assert_close(grouped, alone)
    for g, r in zip(grad_grouped, grad_alone):
        torch.testing.assert_close(g, r)


# ------------------------------------------------------------------------------------------- training
# the biaffine scorer starts every span at 0 (its weights are zero): it takes more steps to fit
@pytest.mark.parametrize("variant,pos,scorer,steps", [("bna", "none", "mlp", 80), ("sa", "gold", "mlp", 80),
                                                      ("bna", "none", "biaffine", 160)])
def test_overfits_five_trees(trees, variant, pos, scorer, steps):
    torch.manual_seed(0)
    parser = ChartParser.build(tiny(variant=variant, pos=pos, scorer=scorer, span_hidden=16), trees)
    opt = torch.optim.Adam(parser.parameters(), lr=2e-2)
    losses = []
    for _ in range(steps):
        loss = parser.loss(trees)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 10
    parsed = parser.parse([t.leaves() for t in trees], [t.tags() for t in trees])
    assert strings(parsed) == strings(trees)
    assert parser.training  # parse() puts the mode back


def test_unknown_gold_label_is_a_user_error(trees):
    parser = ChartParser.build(tiny(), trees[1:3])
    with pytest.raises(UserError, match="tree 0: label 'PP' is not in the parser's label vocabulary"):
        parser.loss([trees[0]])


# ------------------------------------------------------------------------------------------- parse output
def test_parse_output_words_and_tags(trees):
    torch.manual_seed(0)
    parser = ChartParser.build(tiny(), trees)
    words = [["(", "The", "cat", ")"], ["-LRB-", "x", "-RRB-"], ["a/b"]]
    out = parser.parse(words)
    assert [t.leaves() for t in out] == [["-LRB-", "The", "cat", "-RRB-"], ["-LRB-", "x", "-RRB-"], ["a\\/b"]]
    assert [t.tags() for t in out] == [["XX"] * 4, ["XX"] * 3, ["XX"]]
    assert all(t.label != "TOP" and t.label in parser.labels for t in out)  # a labelled root always
    tagged = parser.parse(words[1:], [["-LRB-", "NN", "-RRB-"], ["NN"]])
    assert [t.tags() for t in tagged] == [["-LRB-", "NN", "-RRB-"], ["NN"]]
    gold = ChartParser.build(tiny(pos="gold"), trees)
    both = gold.parse(words[2:], [["NN"]], output_tags=[["SYM"]])
    assert both[0].tags() == ["SYM"]  # output_tags label the tree; tags fed the model
    assert strings(both) == strings(gold.parse(words[2:], [["NN"]], output_tags=[["SYM"]], batch_size=1))
    with pytest.raises(UserError, match="sentence 0: 1 words but 2 tags"):
        gold.parse(words[2:], [["NN"]], output_tags=[["SYM", "X"]])


def test_bad_input_is_named(trees):
    parser = ChartParser.build(tiny(max_words=5), trees)
    with pytest.raises(UserError, match="sentence 1: the sentence has no words"):
        parser.parse([["a"], []])
    with pytest.raises(UserError, match="line 9: 6 words, more than the parser's max_words=5"):
        parser.parse([["a"], ["b"] * 6], names=["line 8", "line 9"])
    with pytest.raises(UserError, match="word 2 .'a b'. is empty, holds whitespace"):
        parser.parse([["x", "a b"]])
    with pytest.raises(UserError, match="sentence 0: 2 words but 1 tags"):
        parser.parse([["x", "y"]], [["NN"]])
    gold = ChartParser.build(tiny(pos="gold"), trees)
    with pytest.raises(UserError, match="gold POS tags"):
        gold.parse([["x"]])


# ------------------------------------------------------------------------------------------- saving
@pytest.mark.parametrize("scorer", ["mlp", "biaffine"])
def test_round_trip_char_encoder(trees, tmp_path, scorer):
    torch.manual_seed(0)
    parser = ChartParser.build(tiny(pos="gold", variant="bna", scorer=scorer, span_hidden=12, char_hidden=6), trees)
    if scorer == "biaffine":  # its biaffine weights start at 0: give them values a round trip must keep
        for weight in (parser.scorer.span_weight, parser.scorer.label_weight):
            torch.nn.init.normal_(weight)
    parser.save_pretrained(tmp_path / "p")
    meta = json.loads((tmp_path / "p" / "config.json").read_text())
    assert meta["labels"] == parser.labels and meta["tags"] == parser.tags and meta["config"]["pos"] == "gold"
    loaded = ChartParser.from_pretrained(tmp_path / "p")
    assert loaded.config == parser.config and loaded.encoder.words == parser.encoder.words
    assert not loaded.training
    state, again = parser.state_dict(), loaded.state_dict()
    assert state.keys() == again.keys() and all(torch.equal(state[k], again[k]) for k in state)
    words, tags = [t.leaves() for t in trees], [t.tags() for t in trees]
    assert strings(loaded.parse(words, tags)) == strings(parser.parse(words, tags))


def test_not_a_saved_parser(tmp_path):
    with pytest.raises(UserError, match="is not a saved parser"):
        ChartParser.from_pretrained(tmp_path)


# ------------------------------------------------------------------------------------------- pretrained encoder
def test_pretrained_round_trip_works_offline(trees, tiny_bert, tmp_path):
    import shutil

    torch.manual_seed(0)
    source = tmp_path / "bert"
    shutil.copytree(tiny_bert, source)
    parser = ChartParser.build(tiny(encoder=str(source), pooling="mean"), trees)
    assert parser.kinds == ["bimsa", "nsa"]
    groups = {g["name"]: g for g in parser.parameter_groups(1e-3, 5e-5)}
    assert groups["encoder"]["lr"] == 5e-5 and len(groups["encoder"]["params"]) == \
        len(list(parser.encoder.model.parameters()))
    loss = parser.loss(trees)
    loss.backward()
    assert parser.encoder.model.embeddings.word_embeddings.weight.grad is not None  # fine-tuned
    words = [t.leaves() for t in trees]
    before = strings(parser.parse(words))
    parser.save_pretrained(tmp_path / "saved")
    assert (tmp_path / "saved" / "encoder_tokenizer").is_dir()
    shutil.rmtree(source)  # the saved folder must not need the original encoder
    loaded = ChartParser.from_pretrained(tmp_path / "saved")
    assert strings(loaded.parse(words)) == before
    state, again = parser.state_dict(), loaded.state_dict()
    assert state.keys() == again.keys() and all(torch.equal(state[k], again[k]) for k in state)


def test_packed_fine_tuned_parser_loads_within_half_a_row_scale(trees, tiny_bert, tmp_path):
    torch.manual_seed(0)
    parser = ChartParser.build(tiny(encoder=str(tiny_bert), pooling="mean", fine_tune_encoder=True), trees)
    parser.save_pretrained(tmp_path / "whole")
    parser.save_pretrained(tmp_path / "packed", packed=True, min_elements=64)  # the tiny encoder's matrices too
    whole, packed = (tmp_path / "whole" / "model.safetensors"), (tmp_path / "packed" / "model.safetensors")
    assert packed.stat().st_size < 0.6 * whole.stat().st_size
    loaded = ChartParser.from_pretrained(tmp_path / "packed")
    state, again = parser.state_dict(), loaded.state_dict()
    assert state.keys() == again.keys()
    rounded = 0
    for name, w in state.items():
        if w.dim() == 2 and w.numel() >= 64:  # stored as int8: each row within half its step max|row| / 127
            step = w.abs().amax(dim=1, keepdim=True) / 127
            assert torch.all((again[name] - w).abs() <= step / 2 + 1e-7), name
            rounded += 1
        else:  # vectors and small matrices stay float32, unchanged
            assert torch.equal(again[name], w), name
    assert rounded > 0
    words = [t.leaves() for t in trees]
    assert len(loaded.parse(words)) == len(words)


def _oracle_states(folder, words):
    """Hidden states of each word's sub-words, tokenizing word by word with the tokenizer directly."""
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    pieces = [tok(w, add_special_tokens=False)["input_ids"] for w in words]
    ids = [tok.cls_token_id] + [i for p in pieces for i in p] + [tok.sep_token_id]
    with torch.no_grad():
        states = model(input_ids=torch.tensor([ids])).last_hidden_state[0]
    spans, pos = [], 1
    for p in pieces:
        spans.append((pos, pos + len(p)))
        pos += len(p)
    return states, spans


@pytest.mark.parametrize("pooling", ["first", "last", "mean"])
def test_pretrained_word_vectors_pool_the_sub_words(tiny_bert, pooling):
    words = ["the", "unbelievably", "cat", "-LRB-", "sat", "-RRB-"]
    raw = ["the", "unbelievably", "cat", "(", "sat", ")"]  # what the tokenizer must see
    enc = PretrainedWordEncoder(str(tiny_bert), pooling=pooling).eval()
    with torch.no_grad():
        out = enc([words, ["the"]])
    states, spans = _oracle_states(str(tiny_bert), raw)
    assert out.shape == (2, len(words) + 2, 16)
    assert spans[1] == (2, 5)  # un ##believ ##ably: three sub-words
    torch.testing.assert_close(out[0, 0], states[0])  # START = [CLS]
    torch.testing.assert_close(out[0, len(words) + 1], states[-1])  # STOP = [SEP]
    for k, (a, b) in enumerate(spans):
        expected = {"first": states[a], "last": states[b - 1], "mean": states[a:b].mean(0)}[pooling]
        torch.testing.assert_close(out[0, k + 1], expected, atol=1e-5, rtol=1e-5)
    assert torch.all(out[1, 3:] == 0)  # padding rows


def test_frozen_encoder_gets_no_gradient(trees, tiny_bert):
    parser = ChartParser.build(tiny(encoder=str(tiny_bert), fine_tune_encoder=False), trees)
    parser.train()
    assert not parser.encoder.model.training
    parser.loss(trees).backward()
    assert all(p.grad is None for p in parser.encoder.model.parameters())
    assert parser.project.weight.grad is not None
    assert [g["name"] for g in parser.parameter_groups(1e-3, 5e-5)] == ["parser"]


@pytest.mark.parametrize("encoder_rate", [0.0, 1e-2])
def test_fine_tuned_encoder_learns_at_its_own_rate(trees, tiny_bert, encoder_rate):
    """fine_tune_encoder: the encoder runs dropout, gets gradients and is updated by the trainer's optimizer at
    encoder_learning_rate (0: unchanged), while the new layers move at learning_rate."""
    from structattn.bna.trainer import make_optimizer

    config = tiny(encoder=str(tiny_bert), fine_tune_encoder=True, learning_rate=1e-2,
                  encoder_learning_rate=encoder_rate)
    parser = ChartParser.build(config, trees)
    optimizer = make_optimizer(parser, config)
    assert [(g["name"], g["lr"]) for g in optimizer.param_groups] == [("encoder", encoder_rate), ("parser", 1e-2)]
    parser.train()
    assert parser.encoder.model.training
    before = {n: p.detach().clone() for n, p in parser.named_parameters()}
    parser.loss(trees).backward()
    assert all(p.grad is not None for p in parser.encoder.model.encoder.parameters())
    optimizer.step()
    changed = {n for n, p in parser.named_parameters() if not torch.equal(p, before[n])}
    layers = {n for n in before if n.startswith("encoder.model.encoder.layer.")}  # what the loss reaches
    assert "project.weight" in changed
    assert (layers & changed) == (layers if encoder_rate else set())


def test_sentence_over_the_encoder_limit_is_named(trees, tiny_bert):
    parser = ChartParser.build(tiny(encoder=str(tiny_bert)), trees)
    assert parser.encoder.max_subwords == 16
    long = ["the"] * 3 + ["unbelievably"] * 4  # 3 + 12 sub-words + CLS + SEP = 17
    with pytest.raises(UserError, match=r"sentence 1: 7 words make 17 sub-words \(special tokens included\) "
                                        r"but the encoder .* takes at most 16"):
        parser.parse([["the", "cat"], long])
    assert len(parser.parse([["the"] * 14])) == 1  # 16 tokens: just fits


# ------------------------------------------------------------------------------------------- spaCy tags
def _have_spacy_model() -> bool:
    from structattn.errors import UserError as Err
    from structattn.dependency.spacy_backend import SpacyParser
    try:
        SpacyParser()
        return True
    except Err:
        return False


@pytest.mark.skipif(not _have_spacy_model(), reason="the default spaCy pipeline is not installed")
def test_spacy_tags_feed_and_label_the_parse(trees):
    from structattn.bna.ptb_text import spacy_tags

    assert spacy_tags([["-LRB-", "The", "cat", "-RRB-", "sat", "."], []]) == \
        [["-LRB-", "DT", "NN", "-RRB-", "VBD", "."], []]
    parser = ChartParser.build(tiny(pos="spacy"), trees)
    parser.loss(trees).backward()
    assert len(parser._spacy_cache) == len(trees)  # tags of the training sentences computed once
    out = parser.parse([["The", "cat", "sat", "."]])
    assert out[0].tags() == ["DT", "NN", "VBD", "."]


def test_frozen_encoder_remembers_sentences_and_matches_the_encoder(tiny_bert):
    """While training, a frozen encoder encodes each sentence once, on its own: its rows equal a fresh
    one-sentence encoding and do not depend on the batch the sentence came in. Parsing (no grad) encodes the
    batch together, uncached, to the same values."""
    frozen = PretrainedWordEncoder(str(tiny_bert), fine_tune=False)
    tuned = PretrainedWordEncoder(str(tiny_bert), fine_tune=True).eval()
    long_one, short_one = ["the", "unbelievably", "cat", "sat"], ["the"]
    batch = frozen([long_one, short_one])  # grad enabled: the training path
    with torch.no_grad():
        alone = tuned([short_one])
    assert not batch.requires_grad
    torch.testing.assert_close(batch[1, :3], alone[0])
    assert torch.all(batch[1, 3:] == 0)  # padding rows
    calls = []
    frozen.model.register_forward_hook(lambda *a: calls.append(1))
    again = frozen([short_one, long_one])
    assert calls == []  # both sentences came from the cache
    torch.testing.assert_close(again[0, :3], batch[1, :3])
    torch.testing.assert_close(again[1], batch[0])
    with torch.no_grad():
        parsed = frozen([long_one, short_one])
    assert calls == [1]  # one batched pass, not one per sentence
    torch.testing.assert_close(parsed, batch, atol=1e-5, rtol=1e-5)
