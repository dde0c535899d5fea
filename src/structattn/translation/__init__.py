"""Hybrid local/global attention for translation (Xu et al. 2019): a Transformer whose lowest encoder layers mix
window-local and global attention by a gate, with the Gaussian baselines.

- ``data``: the BPE tokenizer, source parses and token batches; ``model``: the translation Transformer;
- ``translator``: beam search and a trained model by name; ``trainer``: training on Multi30k;
- ``probing``: the probing classifiers; ``gates``: the gates' analysis; ``report``: the results tables.
"""
