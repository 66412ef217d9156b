"""Input normalisation of the models, set from the training data before training: ServoLNN/DeLaN
scale ``q`` inside the network (``ServoLNN.set_normalisation``), the acceleration families scale
``q̇`` by the buffer ``qd_scale``."""

from __future__ import annotations

import numpy as np


def normalisation(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Offset and scale of the input normalisation: mean and standard deviation of the training ``q``
    (scale floored so a coordinate that never moves does not blow up)."""
    q = np.asarray(q, float)
    scale = q.std(0)
    return q.mean(0), np.where(scale > 1e-6, scale, 1.0)


def set_qd_scale(model, qd) -> None:
    """Input normalisation of the acceleration models: per-coordinate std of the training q̇."""
    import torch

    qd = torch.as_tensor(np.asarray(qd), dtype=torch.float64)
    model.qd_scale.copy_(qd.std(0).clamp_min(1e-6).to(model.qd_scale))


__all__ = ["normalisation", "set_qd_scale"]
