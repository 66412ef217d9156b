"""From the commanded port to joint actuators: ``u = Gᵀ τ_c`` (EQUATIONS.md §6), limits, and the port
where a learned model adds the uncertain part of the right-hand side: ``u = Gᵀ τ_c + τ̂_res``.

Why the learned part is added to the joint efforts. The DAC split (eq 36) puts everything the certain
model misses into the port: ``𝓜ν̇ + 𝓒(ν)ν − 𝓕_{g,J} = τ_c + τ_unc``. For a joint-actuated arm a port
and a joint effort are two faces of one thing: joint efforts ``w`` act on the bodies as the port ``E w``
(a moment pair about each revolute axis, a force pair along each prismatic axis) with ``Gᵀ E = I``, so
adding ``E τ̂_res`` to the port and adding ``τ̂_res`` to ``u = Gᵀ τ_c`` are the same command. The joint form
is the one to learn and to apply: what the certain model misses on a real arm lives at the joints
(friction, reflected rotor inertia) or is only observable through them (a payload's weight and inertia
seen as extra joint torques), it is measured as joint efforts (``u − [H q̈ + C q̇ + g]`` from the robot's
logs), it needs no port coordinates of the robot's description, and it is bounded per actuator, where
the limits are. The Lyapunov argument is unchanged: with ``τ̂_res = τ_res`` exactly the closed loop is the
certain model's, ``V̇ = −sᵀ K_d s``; a bounded error ``δ = τ_res − τ̂_res`` enters as ``V̇ ≤ −sᵀK_d s +
|s_q| |δ|`` (uniform ultimate boundedness with a ball that shrinks with the learning error).

For a joint-actuated arm every component of ``τ_c`` along ``Jᵀ`` is absorbed by the constraint forces
(``Gᵀ Jᵀ = 0``), so ``u = Gᵀ τ_c`` applied as joint efforts produces the same motion as the port itself
(``τ = E u`` with ``Gᵀ E = I``). Rates of a floating root have no actuator: their share of ``Gᵀ τ_c`` is
reported as ``unactuated`` instead of being sent.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..errors import ConfigError
from ..physics.multibody.kinematics import coordinate_layout, twist_map

#: ``residual(q, q̇, q̈_r) -> τ̂_res``: the learned, uncertain part of the RHS (friction, actuator
#: dynamics, unmodelled loads) at the measured joint state and the joint acceleration the law asks for
#: (all in ``joint_names`` order), added to the model-based efforts before the limits.
Residual = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
#: States of the learned part in a command: not configured, used, used after clipping to its bound,
#: or discarded because it was not finite (the command is then the certain model's alone).
RESIDUAL_STATES = ("off", "ok", "clipped", "non_finite")


class Compensation(Protocol):
    """The compensated term of a model whose certain part is a rigid body: what the joints need besides
    ``H q̈ + C q̇ + g`` (an identified arm's friction and learned residual,
    :class:`ros_lnn.arm.compensation.ArmCompensation`). ``torque(q, q̇)`` (``joint_names`` order) is
    called once per control step, in the order of the steps: a model with an internal state (friction
    with memory) advances it there; ``reset()`` starts it afresh (at activation)."""

    def torque(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray: ...

    def reset(self) -> None: ...


@dataclass
class EffortCommand:
    effort: np.ndarray  # what is sent, limits applied (joint order of ``joint_names``)
    requested: np.ndarray  # before the limits (model part + residual)
    model_part: np.ndarray  # Gᵀ τ_c (a joint law: its feed-forward and feedback)
    residual_part: np.ndarray
    saturated: np.ndarray  # bool per joint
    unactuated: np.ndarray  # Gᵀ τ_c on the floating-root rates (empty for a fixed base)
    saturation_ratio: float  # max |requested| / limit over the joints (> 1: the command was clipped)
    residual_state: str = "off"  # one of RESIDUAL_STATES
    compensation_part: np.ndarray | None = None  # the model's compensated term (None: no compensation)
    #: "off", "ok", or "non_finite": the compensation gave a non-finite torque and the command is zero
    compensation_state: str = "off"
    feedback_part: np.ndarray | None = None  # joint laws: the PD (or damping) term of the effort


class PortToEfforts:
    """Maps τ_c to the efforts of the revolute and prismatic joints, in the order of ``joint_names``.

    ``coordinates``: the joint names in the order of the generalised forces given to
    :meth:`from_generalized` (Pinocchio's depth-first order); default the model's coordinate layout."""

    def __init__(
        self,
        model,
        joint_names=None,
        effort_limits=None,
        residual: Residual | None = None,
        coordinates=None,
        residual_limit=None,
        compensation: Compensation | None = None,
    ):
        layout = coordinate_layout(model)
        self._root_cols = 6 if layout and layout[0][1] == "floating" else 0
        cols, names = [], []
        c = self._root_cols
        for jidx, kind, width in layout:
            if kind == "floating":
                continue
            if kind not in ("revolute", "prismatic"):
                raise ConfigError(
                    f"joint '{model.joints[jidx].name}' is {kind}: only revolute and prismatic joints "
                    "take efforts"
                )
            cols.append(c)
            names.append(model.joints[jidx].name)
            c += width
        names_model = names
        joint_names = list(joint_names or names_model)
        missing = [j for j in joint_names if j not in names_model]
        if missing or len(set(joint_names)) != len(names_model):
            raise ConfigError(
                f"joint_names {joint_names} must list each actuated joint of the model once: {names_model}"
            )
        self.model = model
        self.joint_names = joint_names
        if coordinates is not None:
            cols, names_model = list(range(len(coordinates))), list(coordinates)
        self._cols = np.array([cols[names_model.index(j)] for j in joint_names], dtype=int)
        if effort_limits is None:
            effort_limits = [model.joints[model.joint_names.index(j)].effort_limit for j in joint_names]
        lim = np.asarray(effort_limits, dtype=float).ravel()
        if lim.size != len(joint_names) or np.any(~(lim > 0)):
            raise ConfigError(
                f"effort limits {list(lim)} must be one positive number per joint {joint_names}"
            )
        self.limits = lim
        self._neg_limits = -lim
        self._inv_limits = 1.0 / lim
        self._identity = bool(np.array_equal(self._cols, np.arange(len(self._cols)))) and not self._root_cols
        self._no_residual = np.zeros(len(joint_names))
        self._no_residual.setflags(write=False)
        self.residual = residual
        self.compensation = compensation
        self._zero = np.zeros(len(joint_names))
        self._zero.setflags(write=False)
        self.set_residual_limit(residual_limit)

    def set_residual_limit(self, limit) -> None:
        """``|τ̂_res| ≤ limit`` per joint (one number for all, one per joint, or None: unbounded)."""
        if limit is None:
            self.residual_limit = None
            return
        lim = np.broadcast_to(np.asarray(limit, dtype=float).ravel(), (len(self.joint_names),)).copy()
        if np.any(~(lim >= 0)) or not np.all(np.isfinite(lim)):
            raise ConfigError(
                f"residual limits {list(lim)} must be finite numbers >= 0 per joint {self.joint_names}"
            )
        self.residual_limit = lim

    def __call__(self, data, tau_c, q=None, qd=None, G=None, qdd_r=None) -> EffortCommand:
        if G is not None:
            gen = G.T.dot(np.asarray(tau_c, dtype=float))
        elif getattr(data, "joint_space", False):  # a joint-state workspace (Pinocchio): Gᵀ τ without G
            from ..physics.multibody.pin import port_to_joint

            gen = port_to_joint(data, tau_c)
        else:
            gen = twist_map(self.model, data).T.dot(np.asarray(tau_c, dtype=float))
        return self.from_generalized(gen, q, qd, qdd_r)

    def from_generalized(
        self, gen: np.ndarray, q=None, qd=None, qdd_r=None, compensate_at=None
    ) -> EffortCommand:
        """The command from ``Gᵀ τ_c`` already computed (model coordinate order); ``q, q̇, q̈_r`` in
        ``joint_names`` order for the learned part. The compensation is evaluated at
        ``compensate_at = (q, q̇)`` (the desired state of a feed-forward law; default the measured one);
        a non-finite compensation zeros the whole command (``compensation_state`` ``"non_finite"``)."""
        model_part = gen if self._identity else gen.take(self._cols)
        base, compensation, comp_state = model_part, None, "off"
        if self.compensation is not None:
            cq, cqd = compensate_at if compensate_at is not None else (q, qd)
            compensation = np.asarray(self.compensation.torque(cq, cqd), dtype=float).reshape(
                model_part.shape
            )
            comp_state = "ok"
            if not math.isfinite(float(compensation.dot(compensation))):
                zero = self._zero
                return EffortCommand(
                    zero.copy(), zero.copy(), model_part, zero, np.zeros(len(zero), dtype=bool),
                    gen[: self._root_cols], 0.0, "off", compensation, "non_finite",
                )  # fmt: skip
            base = model_part + compensation
        state = "off"
        if self.residual is not None:
            res: np.ndarray = np.asarray(self.residual(q, qd, qdd_r), dtype=float).reshape(model_part.shape)
            state = "ok"
            if not math.isfinite(float(res.dot(res))):
                # a learned part that fails must not poison the command
                res, state = self._no_residual, "non_finite"
            elif self.residual_limit is not None and np.any(np.abs(res) > self.residual_limit):
                res, state = np.clip(res, -self.residual_limit, self.residual_limit), "clipped"
            requested = base + res
        else:
            res = self._no_residual
            requested = base.copy()
        effort = np.minimum(np.maximum(requested, self._neg_limits), self.limits)
        magnitude = np.abs(requested)
        ratios = (magnitude * self._inv_limits).tolist()
        ratio = max(ratios, default=0.0) if math.isfinite(sum(ratios)) else math.nan
        return EffortCommand(
            effort, requested, model_part, res, magnitude > self.limits, gen[: self._root_cols], ratio, state,
            compensation, comp_state,
        )  # fmt: skip
