"""The multibody model of the DAC paper (seed 004) and the arm on Pinocchio, one module per part:

* :mod:`.model`: the coordinate-free Newton–Euler model (bodies, joints, the KKT forward dynamics);
  its names are re-exported here (``from ros_lnn.physics.multibody import MultibodyModel, update``);
* :mod:`.quaternion`: rotations; :mod:`.kinematics`: the maximal-coordinate kinematics;
* :mod:`.build`: a model from YAML or a URDF file; :mod:`.urdf`: from a URDF string;
* :mod:`.sim`: the free-floating simulator (RK4, Baumgarte stabilisation);
* :mod:`.pin`: the same quantities on Pinocchio; :mod:`.pin_sim`: its joint-coordinate simulator;
  :mod:`.pin_plant`: a simulated arm that differs from its description.
"""

from .model import (
    JOINT_KINDS,
    SPRING_LAWS,
    Body,
    Joint,
    MultibodyData,
    MultibodyModel,
    apply_mass,
    apply_mass_inverse,
    constraint_jacobian_rate,
    constraint_violation,
    energy,
    forward_dynamics,
    generalized_force,
    gravity_port,
    joint_mismatch,
    kkt_matrix,
    mass_matrix,
    momentum,
    pose_only,
    require_maximal_coordinates,
    revolute_angles,
    update,
)

__all__ = [
    "JOINT_KINDS",
    "SPRING_LAWS",
    "Body",
    "Joint",
    "MultibodyData",
    "MultibodyModel",
    "apply_mass",
    "apply_mass_inverse",
    "constraint_jacobian_rate",
    "constraint_violation",
    "energy",
    "forward_dynamics",
    "generalized_force",
    "gravity_port",
    "joint_mismatch",
    "kkt_matrix",
    "mass_matrix",
    "momentum",
    "pose_only",
    "require_maximal_coordinates",
    "revolute_angles",
    "update",
]
