"""Modules that live outside the encoder's self-attention: LISA supervision, SG-Net layer, BiMSA, NSA, ..."""
