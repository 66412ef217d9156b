"""The plain MLP of the black-box families (LNN, HNN, TLNN heads, neural ODE, DAC residual) and the
scalar network over ``[φ(q), q̇]`` that the LNN and the HNN share (``φ``: sin/cos for the angle
coordinates)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

SMOOTH_ACTIVATIONS: dict[str, type[nn.Module]] = {"softplus": nn.Softplus, "tanh": nn.Tanh}


def mlp(
    d_in: int,
    hidden: Sequence[int],
    activation: str,
    d_out: int = 1,
    activations: Mapping[str, type[nn.Module]] = SMOOTH_ACTIVATIONS,
) -> nn.Sequential:
    """``Linear → activation`` for each hidden width, then a ``Linear`` to ``d_out``."""
    act = activations[activation]
    layers: list[nn.Module] = []
    width = d_in
    for h in hidden:
        layers += [nn.Linear(width, h), act()]
        width = h
    layers.append(nn.Linear(width, d_out))
    return nn.Sequential(*layers)


def network_config(model: nn.Module) -> dict:
    """The part of a checkpoint's ``model_config`` every coordinate network here shares: its family tag,
    hidden widths, activation and the coordinates it sees as angles."""
    return {
        "family": model.family,
        "hidden": model.hidden_widths,
        "activation": model.activation,
        "angle_coordinates": model.angle_coordinates,
    }


class ScalarFieldNet(nn.Module):
    """A scalar ``f_θ(q, v)``: MLP of ``[φ(q), v / qd_scale]`` to one value (the LNN's ``𝓛``, the HNN's
    ``H``)."""

    family = ""
    qd_scale: torch.Tensor

    def __init__(
        self,
        n: int,
        hidden: Sequence[int] = (128, 128),
        activation: str = "softplus",
        angle_coordinates: Sequence[int] = (),
        coordinate_names: Sequence[str] = (),
    ):
        super().__init__()
        self.n, self.hidden_widths, self.activation = n, list(hidden), activation
        self.angle_coordinates = sorted(int(i) for i in angle_coordinates)
        self.coordinate_names = list(coordinate_names) or [f"q{i + 1}" for i in range(n)]
        self.net = mlp(2 * n + len(self.angle_coordinates), hidden, activation)
        self.register_buffer("qd_scale", torch.ones(n))

    def config(self) -> dict:
        return network_config(self) | {"n": self.n, "coordinate_names": self.coordinate_names}

    def features(self, q, v):
        a = self.angle_coordinates
        if a:
            lin = [i for i in range(self.n) if i not in a]
            q = torch.cat([q[..., lin], torch.sin(q[..., a]), torch.cos(q[..., a])], -1)
        return torch.cat([q, v / self.qd_scale], -1)

    def scalar(self, q, v):
        """``f`` (...) at any batch shape."""
        return self.net(self.features(q, v))[..., 0]


__all__ = ["SMOOTH_ACTIVATIONS", "mlp", "ScalarFieldNet"]
