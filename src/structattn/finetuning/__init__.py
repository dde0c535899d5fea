"""Fine-tuning a pretrained encoder on a sentence or token task, with or without a structure mechanism: SLA (Li et
al. 2021) and its baselines WLA and LISA. The mechanisms themselves are in `structattn.attention`, the task features
and the family's shared part in the core (`structattn.train.features`, `structattn.train.encoder_family`); here are
the transformers task model's loading (``model_loading``), LISA's parent supervision (``lisa``) and its targets
(``features``), and the family (``trainer``)."""
