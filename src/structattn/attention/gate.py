"""The gate that mixes local and global attention: g = sigmoid(W h + b).

Notation: b batch, n tokens, H hidden size, G gate heads (1 = one gate per token shared by all attention
heads, as in both papers; ``num_heads`` = one gate per token and head).
"""
from __future__ import annotations

import torch
from torch import nn


class StructureGate(nn.Module):
    """Per-token gate computed from the layer's input hidden states.

    Args:
        hidden_size: H.
        num_gates: G (1 or the number of attention heads).
        bias: whether there is a bias b (Xu et al. use none).
        init_bias: initial value of b (0 gives g ~ 0.5 at the start, the SLA paper's initialisation).
        init_std: std of the normal initialisation of W.

    Parameters: ``weight`` [G, H], ``bias`` [G] (absent without bias). About H + 1 parameters per layer
    for a per-token gate (9.2k for a 12-layer base model).
    """

    def __init__(self, hidden_size: int, num_gates: int = 1, bias: bool = True, init_bias: float = 0.0,
                 init_std: float = 0.02, *, device=None, dtype=None):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_gates = num_gates
        self.init_bias = float(init_bias)
        self.init_std = float(init_std)
        self.weight = nn.Parameter(torch.empty(num_gates, hidden_size, device=device, dtype=dtype))
        if bias:
            self.bias = nn.Parameter(torch.empty(num_gates, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """W ~ N(0, init_std^2), b = init_bias."""
        with torch.no_grad():
            self.weight.normal_(0.0, self.init_std)
            if self.bias is not None:
                self.bias.fill_(self.init_bias)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """W h + b: hidden [b, n, H] -> [b, G, n]."""
        out = torch.nn.functional.linear(hidden, self.weight, self.bias)
        return out.transpose(1, 2)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """g = sigmoid(W h + b): hidden [b, n, H] -> gate [b, G, n] in [0, 1]."""
        return torch.sigmoid(self.logits(hidden))

    def extra_repr(self) -> str:
        return f"hidden_size={self.hidden_size}, num_gates={self.num_gates}, bias={self.bias is not None}"
