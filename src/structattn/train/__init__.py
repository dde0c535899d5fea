"""Training on Accelerate and what the encoder families share: the engine and its Family interface (``engine``),
configuration (``config``), checkpoints, the output folder's lock, provenance, significance; the encoder families'
base with inference apart from training (``encoder_family``), the sentence and token tasks' features
(``features``) and feature builds over forked workers (``forking``)."""
