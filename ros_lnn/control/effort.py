"""From the commanded port to joint actuators: ``u = Gᵀ τ_c`` (EQUATIONS.md §6), limits, and the hook
where a learned model adds the uncertain part of the right-hand side.

For a joint-actuated arm every component of ``τ_c`` along ``Jᵀ`` is absorbed by the constraint forces
(``Gᵀ Jᵀ = 0``), so ``u = Gᵀ τ_c`` applied as joint efforts produces the same motion as the port itself
(``τ = E u`` with ``Gᵀ E = I``). Rates of a floating root have no actuator: their share of ``Gᵀ τ_c`` is
reported as ``unactuated`` instead of being sent.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from ..physics.multibody_kinematics import coordinate_layout, twist_map

#: ``residual(q, q̇, u_nominal) -> Δu``: the learned, uncertain part of the RHS (friction, actuator
#: dynamics, unmodelled loads), added to the model-based efforts before the limits.
Residual = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


@dataclass
class EffortCommand:
    effort: np.ndarray  # what is sent, limits applied (joint order of ``joint_names``)
    requested: np.ndarray  # before the limits (model part + residual)
    model_part: np.ndarray  # Gᵀ τ_c
    residual_part: np.ndarray
    saturated: np.ndarray  # bool per joint
    unactuated: np.ndarray  # Gᵀ τ_c on the floating-root rates (empty for a fixed base)
    saturation_ratio: float  # max |requested| / limit over the joints (> 1: the command was clipped)


class PortToEfforts:
    """Maps τ_c to the efforts of the revolute and prismatic joints, in the order of ``joint_names``.

    ``coordinates``: the joint names in the order of the generalised forces given to
    :meth:`from_generalized` (Pinocchio's depth-first order); default the model's coordinate layout."""

    def __init__(self, model, joint_names=None, effort_limits=None, residual: Residual | None = None,
                 coordinates=None):
        layout = coordinate_layout(model)
        self._root_cols = 6 if layout and layout[0][1] == "floating" else 0
        cols, names = [], []
        c = self._root_cols
        for jidx, kind, width in layout:
            if kind == "floating":
                continue
            if kind not in ("revolute", "prismatic"):
                raise ConfigError(f"joint '{model.joints[jidx].name}' is {kind}: only revolute and prismatic joints "
                                  "take efforts")
            cols.append(c), names.append(model.joints[jidx].name)
            c += width
        names_model = names
        joint_names = list(joint_names or names_model)
        missing = [j for j in joint_names if j not in names_model]
        if missing or len(set(joint_names)) != len(names_model):
            raise ConfigError(f"joint_names {joint_names} must list each actuated joint of the model once: "
                              f"{names_model}")
        self.model = model
        self.joint_names = joint_names
        if coordinates is not None:
            cols, names_model = list(range(len(coordinates))), list(coordinates)
        self._cols = np.array([cols[names_model.index(j)] for j in joint_names], dtype=int)
        if effort_limits is None:
            effort_limits = [model.joints[model.joint_names.index(j)].effort_limit for j in joint_names]
        lim = np.asarray(effort_limits, dtype=float).ravel()
        if lim.size != len(joint_names) or np.any(~(lim > 0)):
            raise ConfigError(f"effort limits {list(lim)} must be one positive number per joint {joint_names}")
        self.limits = lim
        self._neg_limits = -lim
        self._inv_limits = 1.0 / lim
        self._identity = bool(np.array_equal(self._cols, np.arange(len(self._cols)))) and not self._root_cols
        self._no_residual = np.zeros(len(joint_names))
        self._no_residual.setflags(write=False)
        self.residual = residual

    def __call__(self, data, tau_c, q=None, qd=None, G=None) -> EffortCommand:
        if G is not None:
            gen = G.T.dot(np.asarray(tau_c, dtype=float))
        elif getattr(data, "joint_space", False):  # a joint-state workspace (Pinocchio): Gᵀ τ without G
            from ..physics.multibody_pin import port_to_joint

            gen = port_to_joint(data, tau_c)
        else:
            gen = twist_map(self.model, data).T.dot(np.asarray(tau_c, dtype=float))
        return self.from_generalized(gen, q, qd)

    def from_generalized(self, gen: np.ndarray, q=None, qd=None) -> EffortCommand:
        """The command from ``Gᵀ τ_c`` already computed (model coordinate order)."""
        model_part = gen if self._identity else gen.take(self._cols)
        if self.residual is not None:
            res = np.asarray(self.residual(q, qd, model_part), dtype=float).reshape(model_part.shape)
            if not np.all(np.isfinite(res)):
                res = np.zeros_like(model_part)  # a learned part that fails must not poison the command
            requested = model_part + res
        else:
            res = self._no_residual
            requested = model_part.copy()
        effort = np.minimum(np.maximum(requested, self._neg_limits), self.limits)
        magnitude = np.abs(requested)
        ratios = (magnitude * self._inv_limits).tolist()
        ratio = max(ratios, default=0.0) if math.isfinite(sum(ratios)) else math.nan
        return EffortCommand(effort, requested, model_part, res, magnitude > self.limits, gen[:self._root_cols], ratio)
