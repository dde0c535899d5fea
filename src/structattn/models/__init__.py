"""The end-to-end models a user loads: an encoder with a mechanism (``encoder``), SG-Net (``sgnet``), the BNA
chart parser (``parser``), the translation model and its translator (``translation``, ``translator``) and the
shipped models by name (``trained``)."""
