"""SG-Net (Zhang et al. 2020): a syntax-guided layer on top of the encoder, for span QA (SQuAD), multiple choice
(RACE, MCTest) and sentence tasks.

- ``layer``: the syntax-guided layer (SDOI-masked self-attention and its aggregation with the encoder's states);
- ``model``: the encoder, the layer and the task heads; ``loading``: building it from a pretrained encoder;
- ``span_qa``: span decoding (best span, null score, no-answer threshold);
- ``reading_features`` / ``multiple_choice_features``: passages, questions and options into features;
- ``reading`` / ``multiple_choice`` / ``sentence``: the families (on the core's
  [`EncoderFamily`][structattn.train.encoder_family.EncoderFamily]);
- ``reader`` / ``reader_packing``: a trained reader by name, and its packed form; ``report``: the results tables.
"""

