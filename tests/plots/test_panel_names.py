"""novelty_vs_causal's panels name the models they show (#48): a pretrained model by its name and depth, one of
our runs as a run, with its name, so "uniform" is not mistaken for a pretrained model."""

from __future__ import annotations

import pandas as pd

from interp.plots.causal import panel_name


def test_a_pretrained_model_and_one_of_our_runs_are_named_apart():
    pretrained = pd.DataFrame({"model": ["smollm2-135m"], "checkpoint": [float("nan")], "n_layers": [30]})
    ours = pd.DataFrame({"model": ["tiny-uniform-seed0"], "checkpoint": ["runs/figures/tiny-uniform-seed0"],
                         "n_layers": [6]})
    assert panel_name(pretrained, "smollm2-135m") == "smollm2-135m (pretrained, 30 layers)"
    assert panel_name(ours, "uniform") == "uniform (our run, 6 layers)\ntiny-uniform-seed0"
    assert panel_name(ours.iloc[:0], "uniform") == "uniform"
