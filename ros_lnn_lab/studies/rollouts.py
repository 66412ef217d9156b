"""Fixed-step rollouts of learned models in torch (batched), for the studies.

A model's state is ``(q, v)``: for the acceleration families ``v = q̇`` and ``(q̇, v̇) = (v, model(q, v, Q))``;
for an HNN ``v = p`` and ``(q̇, v̇)`` is its own :meth:`~ros_lnn.models.hnn.HNN.vector_field` (so its rollouts
conserve its ``H``). Methods:

* ``euler``: explicit Euler, ``z ← z + dt f(z)``;
* ``symplectic_euler``: semi-implicit Euler, ``v ← v + dt v̇(q, v)``, then ``q ← q + dt q̇(q, v_new)``;
* ``rk4``: the classical Runge–Kutta method (forces evaluated at ``t``, ``t + dt/2``, ``t + dt``).

``force``: ``None`` (no generalised force), a tensor (constant, broadcast over steps) or a callable
``force(t) -> (B, n)`` of the time from the start (e.g. recorded torques interpolated linearly).
"""

from __future__ import annotations

from collections.abc import Callable

METHODS = ("euler", "symplectic_euler", "rk4")


def state_derivative(model) -> Callable:
    """``f(q, v, Q) -> (q̇, v̇)`` of a model (see the module docstring)."""
    if hasattr(model, "vector_field"):
        return model.vector_field
    return lambda q, v, Q: (v, model(q, v, Q))


def rollout(derivative: Callable, q0, v0, duration: float, dt: float, method: str = "rk4", force=None):
    """States ``[q, v]`` (steps + 1, B, 2n) from ``(q0, v0)`` (B, n) over ``duration`` in steps of ``dt``
    under ``derivative(q, v, Q) -> (q̇, v̇)`` (e.g. :func:`state_derivative`). Runs without autograd
    graphs (an HNN takes its gradients inside)."""
    import torch

    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    at = force if callable(force) else (lambda t: force)
    steps = int(round(duration / dt))
    q, v = q0, v0
    out = [torch.cat([q, v], -1)]
    with torch.no_grad():
        for k in range(steps):
            t = k * dt
            if method == "euler":
                dq, dv = derivative(q, v, at(t))
                q, v = q + dt * dq, v + dt * dv
            elif method == "symplectic_euler":
                v = v + dt * derivative(q, v, at(t))[1]
                q = q + dt * derivative(q, v, at(t))[0]
            else:
                k1 = derivative(q, v, at(t))
                k2 = derivative(q + 0.5 * dt * k1[0], v + 0.5 * dt * k1[1], at(t + 0.5 * dt))
                k3 = derivative(q + 0.5 * dt * k2[0], v + 0.5 * dt * k2[1], at(t + 0.5 * dt))
                k4 = derivative(q + dt * k3[0], v + dt * k3[1], at(t + dt))
                q = q + dt / 6.0 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
                v = v + dt / 6.0 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
            out.append(torch.cat([q, v], -1))
    return torch.stack(out)


def model_rollout(model, q0, v0, duration: float, dt: float, method: str = "rk4", force=None):
    """:func:`rollout` of a model of an acceleration family or an HNN (see :func:`state_derivative`)."""
    return rollout(state_derivative(model), q0, v0, duration, dt, method, force)


__all__ = ["METHODS", "state_derivative", "rollout", "model_rollout"]
