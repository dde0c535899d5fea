"""Fine-tuning a pretrained encoder on a sentence or token task, with or without a structure mechanism: SLA (Li et
al. 2021) and its baselines WLA and LISA. The mechanisms themselves are in `structattn.attention`; here are
the task features (``features``), the model loading (``model_loading``), LISA's parent supervision (``lisa``) and
the trainer (``trainer``), the base the reading trainers of `structattn.sgnet` build on."""
