"""The paper's (and DeLaN's) way of getting ``∂M/∂q`` and ``∂V/∂q``: torch.autograd through the plain
network, with ``create_graph=True`` so the result can be trained. It shares the weights of a
:class:`ServoLNN`, checks the analytic derivatives, and is the slow baseline of ``ros-lnn bench``.
"""

from __future__ import annotations

import torch
from torch import nn

from .servo_lnn import ServoLNN


class AutogradServoLNN(nn.Module):
    """Same network and signature as :class:`ServoLNN`; derivatives by ``torch.autograd.grad``."""

    def __init__(self, model: ServoLNN):
        super().__init__()
        self.model = model  # shared, not copied
        self.n, self.n_f, self.n_e = model.n, model.n_f, model.n_e
        self.partition = model.partition

    @classmethod
    def from_model(cls, model: ServoLNN) -> AutogradServoLNN:
        return cls(model)

    def terms(self, q):
        m, n = self.model, self.n
        with torch.enable_grad():
            if not q.requires_grad:
                q = q.detach().requires_grad_(True)
            V, L = m.heads(m.net.values(q))
            M = L @ L.transpose(-1, -2) + m.eps_eye
            (dV,) = torch.autograd.grad(V.sum(), q, create_graph=True)
            # One backward pass per entry of M (samples are independent, so summing over the batch is exact).
            rows = [
                torch.autograd.grad(M[..., i, j].sum(), q, create_graph=True)[0]
                for i in range(n)
                for j in range(n)
            ]
        dM = torch.stack(rows, dim=-1).unflatten(-1, (n, n))  # (..., k, i, j)
        return M, dM, V, dV

    # Same outputs as ServoLNN from the same machinery; only ``terms`` (the derivatives) differs.
    forward = ServoLNN.forward
    inverse = ServoLNN.inverse
