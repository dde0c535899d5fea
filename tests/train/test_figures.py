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


def test_gate_figure_written_only_with_data(tmp_path):
    assert not plot_gate_means([], ["sst2"], tmp_path / "f.png")
    runs = [{"task": "sst2", "mechanism": m, "label": lab, "best_metrics": {"gate_means": [0.4 + s / 10, 0.5]}}
            for m, lab in [("sla", "SLA (m=3)"), ("wla", "WLA (k=3)")] for s in range(2)]
    assert plot_gate_means(runs, ["sst2", "fce"], tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 2000
    many = [dict(r, task=t) for t in ["sst2", "cola", "mrpc", "stsb", "rte"] for r in runs]
    assert plot_gate_means(many, ["sst2", "cola", "mrpc", "stsb", "rte"], tmp_path / "g.png")
    from matplotlib.image import imread
    one_row, two_rows = imread(tmp_path / "f.png"), imread(tmp_path / "g.png")
    assert two_rows.shape[0] == 2 * one_row.shape[0]  # five panels wrap into two rows of at most four


def test_gate_curves_keep_training_sets_apart():
    def run(seed, limit):
        return {"task": "sst2", "mechanism": "sla", "label": "SLA (m=3)", "max_train_examples": limit,
                "best_metrics": {"gate_means": [0.1 * seed + limit / 1e5, 0.5]}}
    runs = [run(1, 0), run(2, 0), run(1, 10000)]
    full = gate_curves(runs, "sst2")["SLA (m=3)"]
    first = gate_curves(runs, "sst2:first10000")["SLA (m=3)"]
    assert full.shape == (2, 2) and np.allclose(full[:, 0], [0.1, 0.2])
    assert first.shape == (1, 2) and np.allclose(first[:, 0], [0.2])
    assert gate_curves(runs, "fce") == {}
    lisa = dict(run(1, 0), task="fce", lisa_weight=1.0)  # SLA + LISA runs are not Figure 2's
    assert gate_columns(runs + [lisa]) == ["sst2", "sst2:first10000"]
