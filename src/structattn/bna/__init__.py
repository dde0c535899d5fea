"""BNA: forward/backward masked self-attention (BiMSA) and n-gram span attention (NSA) feeding a CKY chart parser
of constituency trees.

- ``bimsa``, ``nsa``, ``fenceposts``, ``transformer_block``, ``word_encoders``: the network's layers;
- ``chart``: the span label scorer, CKY decoding and the margin loss;
- ``config``: what decides a parser and its training run (no torch: the command line reads it);
- ``model``: the parser ([`ChartParser`][structattn.bna.model.ChartParser]); ``trainer``: its training on the PTB;
- ``ptb_text``: raw text into PTB-style tokens; ``spacy_component``: the parser as a spaCy pipe;
- ``report``: the results tables.
"""
