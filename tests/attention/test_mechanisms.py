"""The mechanism registry and its typed records."""
from __future__ import annotations

import json

import pytest

from structattn.attention.mechanisms import MECHANISMS, MechanismConfig, describe, get_mechanism, option_names
from structattn.errors import UserError


def test_registry_names():
    assert set(MECHANISMS) == {"sla", "wla", "hybrid", "sdoi", "global", "local", "hybrid_concat", "gauss_luong",
                               "gauss_sperber", "gauss_yang"}


def test_xu_et_al_comparisons_are_in_the_lowest_two_layers_over_tokens():
    for name, mix in (("hybrid", "gate"), ("local", "local"), ("hybrid_concat", "concat")):
        mech = get_mechanism(name)
        assert (mech.relation, mech.k, mech.window_unit, mech.layers, mech.mix) == ("window", 1, "token", 2, mix)
    for kind in ("luong", "sperber", "yang"):
        mech = get_mechanism(f"gauss_{kind}")
        assert (mech.relation, mech.layers, mech.mix, mech.gaussian) == (None, 2, "gaussian", kind)
        assert not mech.is_global and not mech.has_gate and mech.layer_indices(6) == [0, 1]


@pytest.mark.parametrize("options, message", [
    (dict(mix="blend"), "mix must be one of"),
    (dict(mix="gaussian"), "needs gaussian"),
    (dict(mix="gaussian", gaussian="luong"), "has no local mask"),
    (dict(gaussian="yang"), "needs mix='gaussian'"),
    (dict(relation=None, mix="local"), "needs a local pattern"),
])
def test_bad_mix_combinations_are_refused(options, message):
    with pytest.raises(UserError, match=message):
        get_mechanism("sla", **options)


def test_bad_gaussian_window_is_refused():
    with pytest.raises(UserError, match="gaussian_window must be a positive number"):
        get_mechanism("gauss_luong", gaussian_window=0)


def test_paper_defaults():
    sla = get_mechanism("sla")
    assert (sla.relation, sla.m, sla.layers, sla.gate, sla.gate_has_bias, sla.gate_bias) == ("sla", 3, None, "token", True, 0.0)
    assert sla.relation_options() == {"m": 3}
    wla = get_mechanism("wla")
    assert (wla.relation, wla.k, wla.window_unit) == ("window", 3, "word") and wla.relation_options() == {"k": 3}
    hybrid = get_mechanism("hybrid")
    assert (hybrid.relation, hybrid.k, hybrid.layers, hybrid.gate_has_bias) == ("window", 1, 2, False)
    assert hybrid.window_unit == "token"  # Xu et al. count sub-word positions
    assert get_mechanism("sdoi").relation == "sdoi"
    assert get_mechanism("global").is_global and get_mechanism("global").relation_options() == {}


def test_unknown_mechanism_lists_valid_names():
    with pytest.raises(UserError) as err:
        get_mechanism("slaa")
    for name in MECHANISMS:
        assert name in str(err.value)


def test_unknown_option_lists_valid_options():
    with pytest.raises(UserError, match="valid options") as err:
        get_mechanism("sla", threshold=4)
    assert "gate_bias" in str(err.value)


@pytest.mark.parametrize("bad", [dict(gate="layer"), dict(kernel="flash"), dict(base="flex"), dict(m=-1),
                                 dict(m=2.5), dict(layers=0), dict(layers=[]), dict(layers="all"),
                                 dict(relation="nope"), dict(gate_bias=float("nan")), dict(relation="window", k=None),
                                 dict(window_unit="subword"), dict(window_unit="token")])
def test_bad_values_fail_clearly(bad):
    with pytest.raises(UserError):
        get_mechanism("sla", **bad)


def test_overrides_do_not_touch_the_registry():
    custom = get_mechanism("sla", m=4, gate="head", gate_bias=-8.0, layers=[0, -1])
    assert (custom.m, custom.gate, custom.gate_bias, custom.layers) == (4, "head", -8.0, [0, -1])
    assert MECHANISMS["sla"].m == 3 and MECHANISMS["sla"].gate == "token"


def test_layer_resolution():
    assert get_mechanism("sla").layer_indices(6) == [0, 1, 2, 3, 4, 5]
    assert get_mechanism("hybrid").layer_indices(6) == [0, 1]
    assert get_mechanism("sla", layers=[0, -1, 5]).layer_indices(6) == [0, 5]
    assert get_mechanism("global").layer_indices(6) == []
    with pytest.raises(UserError):
        get_mechanism("sla", layers=[6]).layer_indices(6)
    with pytest.raises(UserError):
        get_mechanism("hybrid", layers=7).layer_indices(6)


def test_json_round_trip():
    cfg = get_mechanism("hybrid", gate="head", kernel="exact")
    data = json.loads(json.dumps(cfg.to_dict()))
    back = MechanismConfig.from_dict({**data, "layer_indices": [0, 1], "future_field": 1})
    assert back == cfg


def test_record_and_dict_inputs():
    cfg = get_mechanism("wla", k=5)
    assert get_mechanism(cfg) == cfg and get_mechanism(cfg) is not cfg
    assert get_mechanism(cfg.to_dict(), k=2).k == 2


def test_option_names_and_describe():
    assert {"m", "k", "layers", "gate", "gate_bias", "gate_has_bias", "kernel", "base"} <= set(option_names())
    text = describe()
    assert all(name in text for name in MECHANISMS)


@pytest.mark.parametrize("name,unit", [("wla", "word"), ("hybrid", "token"), ("sla", "word"), ("my_window", "word")])
def test_configs_saved_before_window_unit_load_with_the_unit_they_were_built_for(name, unit):
    """``window_unit`` came with issue 9: older config.json files lack it. wla (and any window of the user's own)
    was trained on word windows through the collator; hybrid gets Xu et al.'s sub-word window."""
    old = {**get_mechanism("wla").to_dict(), "name": name}
    if name == "sla":
        old.update(relation="sla", m=3, k=None)
    del old["window_unit"]
    assert MechanismConfig.from_dict(old).window_unit == unit


def test_token_window_needs_the_window_relation():
    assert get_mechanism("wla", window_unit="token").window_unit == "token"
    with pytest.raises(UserError, match="window_unit='token' applies only to relation 'window'"):
        get_mechanism("hybrid", relation="sla", m=3)
    assert get_mechanism("hybrid", relation="sla", m=3, window_unit="word").relation == "sla"


def test_describe_names_the_window_unit():
    lines = dict(line.split(": ", 1) for line in describe().splitlines())
    assert "over words" in lines["wla"] and "over tokens" in lines["hybrid"] and "over" not in lines["sla"]


def test_gate_bias_without_a_gate_bias_is_refused():
    with pytest.raises(UserError, match="gate_has_bias is False"):
        get_mechanism("hybrid", gate_bias=-2.0)
    assert get_mechanism("hybrid", gate_bias=-2.0, gate_has_bias=True).gate_bias == -2.0


def test_which_mechanisms_read_a_parsed_structure_mask():
    reads = {name for name, mech in MECHANISMS.items() if mech.reads_structure}
    assert reads == {"sla", "wla", "sdoi"}  # token windows and Gaussian biases need no parse
    assert not get_mechanism("wla", window_unit="token").reads_structure
    assert not get_mechanism("sla", relation="all").reads_structure
