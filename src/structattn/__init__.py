"""structattn: structure-aware attention (SLA, WLA, hybrid, SDOI, BNA) inside Hugging Face encoders."""
__version__ = "0.1.0"
