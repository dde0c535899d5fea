"""The encoders every system builds on: a Hugging Face encoder with a structure mechanism (``encoder``), an encoder
named by reference to its pip package (``encoder_reference``), int8 packing of a trained model's weights
(``packing``), the fast tokenizer that takes pre-split words (``tokenizer``) and the registry of shipped trained
models by name (``trained``). Each system's own model lives in
its folder: ``sgnet.model``, ``bna.model``, ``translation.model``."""
