import numpy as np

from structattn.analysis.figures import gate_columns, gate_curves, plot_gate_means, word_attention


def test_word_attention_merges_subwords():
    # tokens: [CLS] a b1 b2 [SEP]; words a=0, b=1
    tw = np.array([-1, 0, 1, 1, -1])
    probs = np.zeros((5, 5))
    probs[1] = [0.1, 0.2, 0.3, 0.3, 0.1]
    probs[2] = [0.0, 0.5, 0.25, 0.25, 0.0]
    probs[3] = [0.0, 0.1, 0.45, 0.45, 0.0]
    out = word_attention(probs, tw, 2)
    assert np.allclose(out[0], [0.2, 0.6])
    assert np.allclose(out[1], [(0.5 + 0.1) / 2, (0.5 + 0.9) / 2])


def _line(mech, seed, gates, task="sst2", **kw):
    """A results line as the sweep writes it (the settings it records; gate means at the best evaluation)."""
    extra = {"m": 3} if mech == "sla" else {"k": 3}
    return {"task": task, "mechanism": mech, "seed": seed, "best": 0.8, "learning_rate": 5e-5, "epochs": 1.0,
            "max_train_examples": 0, "best_metrics": {"gate_means": gates}} | extra | kw


def test_gate_figure_written_only_with_data(tmp_path):
    assert not plot_gate_means([], ["sst2"], tmp_path / "f.png")
    runs = [_line(m, s, [0.4 + s / 10, 0.5]) for m in ("sla", "wla") for s in range(2)]
    assert plot_gate_means(runs, ["sst2", "fce"], tmp_path / "f.png") == ["sst2"]
    assert (tmp_path / "f.png").stat().st_size > 2000
    many = [dict(r, task=t) for t in ["sst2", "cola", "mrpc", "stsb", "rte"] for r in runs]
    assert len(plot_gate_means(many, ["sst2", "cola", "mrpc", "stsb", "rte"], tmp_path / "g.png")) == 5
    from matplotlib.image import imread
    one_row, two_rows = imread(tmp_path / "f.png"), imread(tmp_path / "g.png")
    assert two_rows.shape[0] == 2 * one_row.shape[0]  # five panels wrap into two rows of at most four


def test_gate_curves_keep_training_sets_apart():
    def run(seed, limit):
        return _line("sla", seed, [0.1 * seed + limit / 1e5, 0.5], max_train_examples=limit)
    runs = [run(1, 0), run(2, 0), run(1, 10000)]
    full = gate_curves(runs, "sst2")["SLA (m=3)"]
    first = gate_curves(runs, "sst2:first10000")["SLA (m=3)"]
    assert full.shape == (2, 2) and np.allclose(full[:, 0], [0.1, 0.2])
    assert first.shape == (1, 2) and np.allclose(first[:, 0], [0.2])
    assert gate_curves(runs, "fce") == {}
    lisa = _line("sla", 1, [0.3, 0.3], task="fce", lisa_weight=1.0)  # SLA + LISA runs are not Figure 2's
    assert gate_columns(runs + [lisa]) == ["sst2", "sst2:first10000"]


def test_gate_curves_keep_configurations_apart(tmp_path):
    runs = [_line("sla", s, [0.1 * s, 0.5], max_length=64) for s in (1, 2)]
    runs += [_line("sla", s, [0.7, 0.5], max_length=128) for s in (1, 2)]
    runs += [_line("sla", 1, [0.9, 0.9], gate_bias=-2.0, max_length=128)]
    runs += [_line("sla", 1, [0.0, 0.0], max_length=64, learning_rate=1e-5, best=0.1)]  # not the selected lr
    assert gate_columns(runs) == ["sst2 [max_length=128]", "sst2 [max_length=64]"]
    short = gate_curves(runs, "sst2 [max_length=64]")
    assert list(short) == ["SLA (m=3)"] and np.allclose(short["SLA (m=3)"][:, 0], [0.1, 0.2])
    long = gate_curves(runs, "sst2 [max_length=128]")
    assert sorted(long) == ["SLA (m=3)", "SLA (m=3, bias=-2)"] and long["SLA (m=3)"].shape == (2, 2)
    # "sst2" names both configurations: one panel each
    assert plot_gate_means(runs, ["sst2"], tmp_path / "f.png") == ["sst2 [max_length=128]", "sst2 [max_length=64]"]
