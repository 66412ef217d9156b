"""A simulated arm that differs from its description the way real arms differ from their URDF.

The description (URDF or YAML) is the controller's *certain* model. A real arm adds what the description
leaves out; :class:`PlantMismatch` lists the usual three, all off by default:

* joint friction, viscous and Coulomb, ``τ_f = d ∘ q̇ + c ∘ tanh(q̇ / v_s)`` (the tanh is the usual
  regularised Coulomb law: the friction force turns over within ``v_s`` of rest instead of jumping);
* a payload on a link (default the last): a point-like mass with its own inertia, at an offset from the
  link's centre of mass — the tool or load the URDF does not know;
* motor-side (reflected rotor) inertia per joint, ``I_r = J_m N²`` of a geared joint: added to the
  diagonal of the joint-space inertia (Pinocchio's ``armature``, which ``crba``, ``aba`` and ``rnea`` all
  include).

:class:`Plant` integrates the arm with them (``forward_dynamics``) and gives the efforts it needs for a
motion (``inverse_dynamics``): ``H_p(q) q̈ + C_p(q, q̇) q̇ + g_p(q) + τ_f(q̇) − u_passive = u`` with the
payload's ``H_p, C_p, g_p``. What the certain model misses is then
``τ_res(q, q̇, q̈) = inverse_dynamics(q, q̇, q̈) − [H q̈ + C q̇ + g − u_passive]`` (description's terms):
:meth:`Plant.residual`, the exact value a learned model of the residual approximates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pinocchio as pin

from ...errors import ConfigError
from .model import MultibodyModel
from .pin import PinocchioModel


def _per_joint(values, n: int, name: str) -> np.ndarray:
    """``values`` as one number per joint: empty → zeros, one number → the same for every joint."""
    v = np.asarray(values if values is not None else (), dtype=float).ravel()
    if v.size == 0:
        return np.zeros(n)
    if v.size == 1:
        return np.full(n, float(v[0]))
    if v.size != n:
        raise ConfigError(f"plant mismatch: {name} has {v.size} values; give one, or one per joint ({n})")
    return v


@dataclass(frozen=True)
class PlantMismatch:
    """What the simulated arm has that its description lacks. Per-joint values are in the order of the
    description's moving joints (Pinocchio's coordinates); one value applies to every joint."""

    viscous: tuple = ()  # d [N m s/rad or N s/m]
    coulomb: tuple = ()  # c [N m or N]
    coulomb_velocity: float = 0.05  # v_s [rad/s or m/s]
    payload_mass: float = 0.0  # [kg]
    payload_offset: tuple = (0.0, 0.0, 0.0)  # payload CoM from the link's CoM, link coordinates [m]
    payload_inertia: tuple = (0.0, 0.0, 0.0)  # principal moments about the payload CoM, link axes [kg m²]
    payload_link: int = -1  # body index carrying the payload (-1: the last)
    rotor_inertia: tuple = ()  # reflected motor inertia per joint [kg m² or kg]

    def __post_init__(self):
        numbers = [
            self.coulomb_velocity,
            self.payload_mass,
            *self.payload_offset,
            *self.payload_inertia,
            *np.ravel(self.viscous),
            *np.ravel(self.coulomb),
            *np.ravel(self.rotor_inertia),
        ]
        if not all(math.isfinite(float(x)) for x in numbers):
            raise ConfigError("plant mismatch: every value must be finite")
        if (
            self.coulomb_velocity <= 0
            or self.payload_mass < 0
            or min(self.payload_inertia) < 0
            or len(self.payload_offset) != 3
            or len(self.payload_inertia) != 3
        ):
            raise ConfigError(
                "plant mismatch: coulomb_velocity > 0, payload_mass >= 0, payload_offset three "
                "numbers, payload_inertia three numbers >= 0"
            )
        if (
            np.any(np.ravel(self.viscous) < 0)
            or np.any(np.ravel(self.coulomb) < 0)
            or np.any(np.ravel(self.rotor_inertia) < 0)
        ):
            raise ConfigError("plant mismatch: friction and rotor inertia must be >= 0")

    @property
    def active(self) -> bool:
        return bool(
            np.any(np.ravel(self.viscous))
            or np.any(np.ravel(self.coulomb))
            or self.payload_mass
            or np.any(self.payload_inertia)
            or np.any(np.ravel(self.rotor_inertia))
        )


class Plant:
    """The arm of ``model`` with ``mismatch``: its own Pinocchio model (payload added to the link's
    inertia, rotor inertia as armature) and joint friction."""

    def __init__(self, model: MultibodyModel, mismatch: PlantMismatch | None = None):
        self.mismatch = mismatch = mismatch or PlantMismatch()
        self.certain = PinocchioModel(model)  # the description alone (the controller's model)
        self.pmodel = PinocchioModel(model)  # modified below into the plant
        pm, n = self.pmodel.pin, self.pmodel.nv
        self.viscous = _per_joint(mismatch.viscous, n, "viscous")
        self.coulomb = _per_joint(mismatch.coulomb, n, "coulomb")
        self.rotor_inertia = _per_joint(mismatch.rotor_inertia, n, "rotor_inertia")
        self.coulomb_velocity = float(mismatch.coulomb_velocity)
        if mismatch.payload_mass > 0 or any(mismatch.payload_inertia):
            b = mismatch.payload_link % model.n_bodies
            jid = int(self.pmodel.body_joint[b])
            if jid == 0:
                raise ConfigError(
                    f"plant mismatch: body '{model.bodies[b].name}' does not move; "
                    "put the payload on a moving link"
                )
            R_b = self.pmodel.body_rotation[b]
            lever = self.pmodel.body_lever[b] + R_b @ np.asarray(mismatch.payload_offset, float)
            inertia = R_b @ np.diag(np.asarray(mismatch.payload_inertia, float)) @ R_b.T
            pm.inertias[jid] = pm.inertias[jid] + pin.Inertia(float(mismatch.payload_mass), lever, inertia)
        pm.armature = self.rotor_inertia.copy()
        self.pmodel.data = pm.createData()
        self._certain_data = self.certain.pin.createData()
        self.nv = n

    def friction(self, qd) -> np.ndarray:
        """``τ_f = d ∘ q̇ + c ∘ tanh(q̇ / v_s)``: the effort the joints lose to friction."""
        qd = np.asarray(qd, float)
        return self.viscous * qd + self.coulomb * np.tanh(qd / self.coulomb_velocity)

    def friction_rate(self, q) -> float:
        """How fast friction alone stops the arm at ``q`` [1/s]: the largest eigenvalue of
        ``H(q)⁻¹ D`` with ``D`` the friction law's steepest slopes ``d + c / v_s``. An explicit step
        ``dt`` is stable only with ``rate · dt`` below ≈ 2.8 (RK4 on a decaying mode)."""
        slopes = self.viscous + self.coulomb / self.coulomb_velocity
        if not slopes.any():
            return 0.0
        pm = self.pmodel
        H = pin.crba(pm.pin, pm.data, np.asarray(q, float))
        H = np.triu(H) + np.triu(H, 1).T
        return float(np.max(np.linalg.eigvals(np.linalg.solve(H, np.diag(slopes))).real))

    def forward_dynamics(self, q, qd, u) -> np.ndarray:
        """``q̈`` of the plant under joint efforts ``u`` (description's springs/dampers and friction added)."""
        pm = self.pmodel
        tau = np.asarray(u, dtype=float) - self.friction(qd)
        if pm.has_passive:
            tau = tau + pm.passive_efforts(q, qd)
        return pin.aba(pm.pin, pm.data, np.asarray(q, float), np.asarray(qd, float), tau).copy()

    def inverse_dynamics(self, q, qd, qdd) -> np.ndarray:
        """The joint efforts that give the plant the acceleration ``q̈`` at ``(q, q̇)``."""
        pm = self.pmodel
        q, qd = np.asarray(q, float), np.asarray(qd, float)
        tau = pin.rnea(pm.pin, pm.data, q, qd, np.asarray(qdd, float)).copy() + self.friction(qd)
        return tau - pm.passive_efforts(q, qd) if pm.has_passive else tau

    def certain_inverse_dynamics(self, q, qd, qdd) -> np.ndarray:
        """``H q̈ + C q̇ + g − u_passive`` of the description alone (the certain model)."""
        cm = self.certain
        q, qd = np.asarray(q, float), np.asarray(qd, float)
        tau = pin.rnea(cm.pin, self._certain_data, q, qd, np.asarray(qdd, float)).copy()
        return tau - cm.passive_efforts(q, qd) if cm.has_passive else tau

    def residual(self, q, qd, qdd) -> np.ndarray:
        """``τ_res``: what the plant needs beyond the certain model for the motion ``(q, q̇, q̈)``."""
        return self.inverse_dynamics(q, qd, qdd) - self.certain_inverse_dynamics(q, qd, qdd)


def mismatch_from_values(values: dict) -> PlantMismatch:
    """A :class:`PlantMismatch` from plain values (node parameters, YAML), by field name."""
    known = set(PlantMismatch.__dataclass_fields__)
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(
            f"plant mismatch: unknown setting(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )
    typed: dict[str, Any] = {
        k: (tuple(float(x) for x in v) if isinstance(v, (list, tuple, np.ndarray)) else v)
        for k, v in values.items()
    }
    return PlantMismatch(**typed)


__all__ = ["PlantMismatch", "Plant", "mismatch_from_values"]
