"""The rigid-body dynamics of an arm from its URDF (Pinocchio), reduced to the actuated joints.

Joints of the URDF that the mapping does not actuate (a gripper's fingers, a mimic joint) are locked
at their neutral position, so their links ride on the last actuated link. Every array here is in the
mapping's joint order, whatever the URDF's order.

Inertial parameters per body are Pinocchio's ten ``π = (m, m·c_x, m·c_y, m·c_z, I_xx, I_xy, I_yy,
I_xz, I_yz, I_zz)`` (inertia about the joint frame), so that ``τ = Y(q, q̇, q̈) π`` with Pinocchio's
joint-torque regressor ``Y``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..physics.inertial_parameters import PARAMETER_NAMES as PARAMETER_NAMES  # re-exported
from ..physics.multibody.urdf import import_pinocchio, pinocchio_model


def pinocchio():
    return import_pinocchio("the arm model")


@dataclass
class ArmRigidBody:
    """A Pinocchio model of the arm with one configuration coordinate per actuated joint."""

    model: Any  # pinocchio.Model, joints in Pinocchio order
    urdf_text: str
    joints: tuple  # mapping order
    order: np.ndarray  # order[i] = Pinocchio velocity index of joints[i]
    locked: tuple  # URDF joints locked at neutral
    gravity: np.ndarray

    @classmethod
    def from_urdf(cls, urdf, joints, gravity=(0.0, 0.0, -9.81)) -> ArmRigidBody:
        """``urdf``: a path or the URDF's text; ``joints``: the actuated joints, in the mapping's order."""
        text = urdf_text(urdf)
        pin = pinocchio()
        full, names = pinocchio_model(pin, text)
        missing = [j for j in joints if j not in names]
        if missing:
            raise ConfigError(f"actuated joints not in the URDF: {missing} (the URDF has {names})")
        if len(set(joints)) != len(joints):
            raise ConfigError(f"actuated_joints lists a joint twice: {list(joints)}")
        locked = tuple(n for n in names if n not in joints)
        model = full
        if locked:
            ids = [full.getJointId(n) for n in locked]
            model = pin.buildReducedModel(full, ids, pin.neutral(full))
        for i in range(1, model.njoints):
            joint = model.joints[i]
            if joint.nq != 1 or joint.nv != 1:
                raise ConfigError(
                    f"joint {model.names[i]} ({joint.shortname()}) is not revolute or prismatic: "
                    "an arm model takes one coordinate per joint (lock it, or make it revolute)"
                )
        model.gravity.linear = np.asarray(gravity, dtype=float)
        order = np.array([model.joints[model.getJointId(j)].idx_v for j in joints])
        return cls(model, text, tuple(joints), order, locked, np.asarray(gravity, dtype=float))

    @property
    def n(self) -> int:
        return len(self.joints)

    @property
    def n_params(self) -> int:
        return 10 * self.n

    def body_parameters(self) -> np.ndarray:
        """(n · 10) inertial parameters of the bodies, body of ``joints[i]`` at ``10 i``."""
        ids = [self.model.getJointId(j) for j in self.joints]
        return np.concatenate([self.model.inertias[i].toDynamicParameters() for i in ids])

    def with_parameters(self, params: np.ndarray) -> ArmRigidBody:
        """A copy whose bodies carry ``params`` (n · 10, mapping order)."""
        pin = pinocchio()
        model = self.model.copy()
        for k, joint in enumerate(self.joints):
            model.inertias[model.getJointId(joint)] = pin.Inertia.FromDynamicParameters(
                np.asarray(params[10 * k : 10 * k + 10], dtype=float)
            )
        return ArmRigidBody(model, self.urdf_text, self.joints, self.order, self.locked, self.gravity)

    # Pinocchio's velocity order ↔ mapping order
    def _pin(self, x) -> np.ndarray:
        out = np.empty(self.n)
        out[self.order] = x
        return out

    def regressor(self, q, qd, qdd) -> np.ndarray:
        """``Y`` (N, n, 10 n) with ``τ = Y π``, rows and parameter blocks in mapping order."""
        pin = pinocchio()
        q, qd, qdd = (np.atleast_2d(np.asarray(x, dtype=float)) for x in (q, qd, qdd))
        data = self.model.createData()
        cols = np.concatenate([np.arange(10 * o, 10 * o + 10) for o in self._body_order()])
        out = np.empty((len(q), self.n, 10 * self.n))
        for k in range(len(q)):
            Y = pin.computeJointTorqueRegressor(
                self.model, data, self._pin(q[k]), self._pin(qd[k]), self._pin(qdd[k])
            )
            out[k] = Y[self.order][:, cols]
        return out

    def _body_order(self) -> np.ndarray:
        """Pinocchio body index (0-based, joint id − 1) of each mapping joint's body."""
        return np.array([self.model.getJointId(j) - 1 for j in self.joints])

    def inverse_dynamics(self, q, qd, qdd) -> np.ndarray:
        """τ (N, n) by RNEA."""
        pin = pinocchio()
        q, qd, qdd = (np.atleast_2d(np.asarray(x, dtype=float)) for x in (q, qd, qdd))
        data = self.model.createData()
        out = np.empty((len(q), self.n))
        for k in range(len(q)):
            tau = pin.rnea(self.model, data, self._pin(q[k]), self._pin(qd[k]), self._pin(qdd[k]))
            out[k] = tau[self.order]
        return out

    def mass_matrix(self, q) -> np.ndarray:
        """M(q) (n, n) for one configuration."""
        pin = pinocchio()
        data = self.model.createData()
        M = pin.crba(self.model, data, self._pin(q))
        M = np.triu(M) + np.triu(M, 1).T
        return M[np.ix_(self.order, self.order)]

    def coriolis_matrix(self, q, qd) -> np.ndarray:
        """C(q, q̇) (n, n) with Ṁ − 2C skew-symmetric (Pinocchio's Christoffel-consistent C)."""
        pin = pinocchio()
        data = self.model.createData()
        C = pin.computeCoriolisMatrix(self.model, data, self._pin(q), self._pin(qd))
        return C[np.ix_(self.order, self.order)]

    def gravity_torque(self, q) -> np.ndarray:
        pin = pinocchio()
        data = self.model.createData()
        return pin.computeGeneralizedGravity(self.model, data, self._pin(q))[self.order]

    def forward_dynamics(self, q, qd, tau) -> np.ndarray:
        """q̈ for one state under joint torque ``tau`` (ABA)."""
        pin = pinocchio()
        data = self.model.createData()
        return pin.aba(self.model, data, self._pin(q), self._pin(qd), self._pin(tau))[self.order]

    def position_limits(self) -> tuple[np.ndarray, np.ndarray]:
        lo = np.array(self.model.lowerPositionLimit)[self.order]
        hi = np.array(self.model.upperPositionLimit)[self.order]
        return lo, hi

    def velocity_limits(self) -> np.ndarray:
        return np.array(self.model.velocityLimit)[self.order]

    def effort_limits(self) -> np.ndarray:
        return np.array(self.model.effortLimit)[self.order]


def urdf_text(urdf) -> str:
    """The URDF's text: ``urdf`` itself when it is one, else the file it names (ConfigError: unreadable)."""
    if isinstance(urdf, str) and urdf.lstrip().startswith("<"):
        return urdf
    path = Path(urdf)
    if not path.is_file():
        raise ConfigError(f"{path}: no such URDF file")
    if path.stat().st_size > 16 * 2**20:
        raise ConfigError(f"{path}: larger than 16 MiB; not a URDF")
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the URDF ({exc})") from None
