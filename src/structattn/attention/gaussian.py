"""Gaussian locality biases on self-attention scores: the baselines of Xu et al. 2019's Table 1.

Notation: b batch, h heads, n queries, m keys, d head size; i a query position, j a key position (0-based
token positions), I_i the number of keys query i may attend (the sentence length in tokens, padding
excluded).

Every bias has the form (Yang et al. 2018, "Modeling Localness for Self-Attention Networks", Eq. 5-6)

    G_ij = -(j - P_i)^2 / (2 sigma_i^2),    sigma_i = D_i / 2,

added to the scaled scores before the softmax (`structattn.attention.biased.biased_attention`). The
kinds differ in what is predicted from the query of the head, q_i [d] (one set of parameters per layer,
shared by the heads, so each head gets its own centre/width from its own query):

* ``luong`` — LOCAL_H in Xu et al.; Luong et al. 2015's local-p attention: a predicted centre
  P_i = I_i * sigmoid(u_p . tanh(W_p q_i)) and a fixed width D (Luong et al.'s D = 10; ``window``).
* ``sperber`` — NEIGHBOR in Xu et al.; Sperber et al. 2018: centred on the query itself, P_i = i, with a
  learned width. Sperber et al. learn one variance per head; Xu et al. (whose Table 1 counts +0.4M
  parameters for it, as for LOCAL_H) re-implemented it in Yang et al.'s framework with a predicted width,
  D_i = I_i * sigmoid(u_d . tanh(W_p q_i)), which is what this module does.
* ``yang`` — LOCAL_S in Xu et al.; Yang et al. 2018: both predicted, P_i as in ``luong``, D_i as in
  ``sperber`` (W_p shared by the two, as in Yang et al.).

Parameters: W_p [d, d], u_p [d] (``luong``, ``yang``), u_d [d] (``sperber``, ``yang``). sigma_i^2 is
kept at or above `MIN_VARIANCE` so a width that collapses cannot divide by zero.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from .mechanisms import GAUSSIAN_KINDS  # noqa: E402  (re-exported: the configuration's names)

#: Floor on sigma^2 (in squared token positions): keeps G finite when a predicted width goes to 0.
MIN_VARIANCE = 1e-4


class GaussianLocality(nn.Module):
    """Computes the additive bias G [b, h, n, m] of one attention layer from its queries.

    Args:
        kind: ``luong`` | ``sperber`` | ``yang``.
        head_dim: d, the size of one head's query.
        window: D of ``luong`` (ignored by the others).
        init_std: std of the normal initialisation of u_p and u_d (W_p: Xavier uniform). With u = 0 the
            centre starts at I/2 and the width at D = I/2.
    """

    def __init__(self, kind: str, head_dim: int, window: float = 10.0, init_std: float = 0.02, *, device=None,
                 dtype=None):
        super().__init__()
        if kind not in GAUSSIAN_KINDS:
            raise ValueError(f"unknown Gaussian bias {kind!r}; valid: {', '.join(GAUSSIAN_KINDS)}")
        self.kind = kind
        self.head_dim = head_dim
        self.window = float(window)
        self.init_std = float(init_std)
        self.proj = nn.Linear(head_dim, head_dim, bias=False, device=device, dtype=dtype)  # W_p
        self.centre = (nn.Parameter(torch.empty(head_dim, device=device, dtype=dtype))
                       if kind in ("luong", "yang") else None)  # u_p
        self.width = (nn.Parameter(torch.empty(head_dim, device=device, dtype=dtype))
                      if kind in ("sperber", "yang") else None)  # u_d
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.proj.weight)
        with torch.no_grad():
            for p in (self.centre, self.width):
                if p is not None:
                    p.normal_(0.0, self.init_std)

    def centre_and_width(self, query: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """P [b, h, n] and D [b, h, n] (float32 or float64) for query [b, h, n, d] and lengths I [b, 1|h, n]."""
        ct = torch.promote_types(query.dtype, torch.float32)
        hidden = torch.tanh(self.proj(query)).to(ct)
        size = lengths.to(ct)
        n = query.shape[2]
        if self.centre is not None:
            centre = size * torch.sigmoid(hidden @ self.centre.to(ct))
        else:
            centre = torch.arange(n, device=query.device, dtype=ct).expand(query.shape[:3])
        if self.width is not None:
            width = size * torch.sigmoid(hidden @ self.width.to(ct))
        else:
            width = torch.full(query.shape[:3], self.window, device=query.device, dtype=ct)
        return centre, width

    def forward(self, query: torch.Tensor, num_keys: int, lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
        """G [b, h, n, m] (float32, float64 for float64 queries).

        query: [b, h, n, d]; num_keys: m; lengths: I [b, 1|h, n] (keys each query may attend; None = m).
        """
        if lengths is None:
            lengths = torch.full((1, 1, 1), float(num_keys), device=query.device)
        centre, width = self.centre_and_width(query, lengths)
        variance = (width / 2.0).square().clamp_min(MIN_VARIANCE)
        positions = torch.arange(num_keys, device=query.device, dtype=centre.dtype)
        return -(positions - centre.unsqueeze(-1)).square() / (2.0 * variance.unsqueeze(-1))

    def extra_repr(self) -> str:
        extra = f", window={self.window:g}" if self.kind == "luong" else ""
        return f"kind={self.kind}, head_dim={self.head_dim}{extra}"
