"""An identified arm model in a controller (:mod:`ros_lnn.control`): its rigid body as the certain model,
its friction and learned residual as the compensated term.

* :func:`certain_model`: the multibody model the control laws run on — the kinematics of the robot's
  description (or of the URDF the model carries), reduced to the model's joints as the model was (the
  other joints locked at neutral, their links lumped), every body carrying the identified inertial
  parameters. A body that is not physically consistent is refused: the laws need a positive mass
  matrix. The description's ``<dynamics damping>`` is dropped: the model's friction replaces it.
* :class:`ArmCompensation`: ``torque(q, q̇) = τ_f + r(q, q̇)`` in the model's joint order, called
  once per control step (:class:`ros_lnn.control.effort.Compensation`). It is the one place the
  controller asks the model for anything beyond its rigid body: the friction memory of a model that
  has one (:mod:`ros_lnn.arm.presliding`, the state of its stop operators) is advanced here, sample by
  sample (:meth:`ros_lnn.arm.model.ArmModel.step_non_rigid`), and started afresh — neutral — in
  :meth:`ArmCompensation.reset` (the controller calls it at activation).
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..physics.inertial_parameters import consistent
from ..physics.multibody.model import MultibodyModel
from ..physics.multibody.urdf import model_from_pinocchio
from .model import ArmModel
from .rigid_body import ArmRigidBody


class ArmCompensation:
    """Friction + learned residual of ``model`` (:class:`ArmModel`) at a joint state (model order)."""

    def __init__(self, model: ArmModel):
        self.model = model
        self.joints = model.joints
        self.state: np.ndarray | None = None  # the friction memory's state before the next sample

    def reset(self) -> None:
        """Start afresh: the friction memory neutral (no memory torque until the arm moves)."""
        self.state = None

    def torque(self, q, qd) -> np.ndarray:
        """``τ_f + r(q, q̇)`` (n,) at one state, the friction memory advanced by it; one ONNX Runtime call."""
        tau, self.state = self.model.step_non_rigid(q, qd, self.state)
        return tau


def certain_model(model: ArmModel, description: str | None = None, gravity=None) -> MultibodyModel:
    """The control laws' certain model of ``model``: ``description`` (a URDF's text that agrees with the
    model's, :func:`ros_lnn.arm.description.description_mismatch`; None: the URDF in the model) reduced to
    the model's joints, with the identified bodies; ``gravity`` (default the model's)."""
    pi = model.rigid.body_parameters()
    for k, joint in enumerate(model.joints):
        if not consistent(pi[10 * k : 10 * k + 10]):
            raise ConfigError(
                f"arm model {model.path.name}: the identified body of {joint} is not physically consistent "
                "(no positive mass matrix for the control laws); train it with physically_consistent: true"
            )
    g = model.rigid.gravity if gravity is None else np.asarray(gravity, dtype=float)
    rigid = model.rigid
    if description is not None:
        rigid = ArmRigidBody.from_urdf(description, model.joints, g).with_parameters(pi)
    pm = rigid.model.copy()
    pm.damping = np.zeros(pm.nv)  # the model's friction replaces the description's joint damping
    return model_from_pinocchio(pm, f"arm model {model.path.name}", gravity=g)
