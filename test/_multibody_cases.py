"""Multibody cases shared by the physics and control tests (test_multibody_pin.py,
test_multibody_validation.py, test_control_*.py): the models held against each other, the maximal-coordinate
state at joint coordinates, a prismatic URDF, and a world turned by a rotation (frame invariance)."""

from pathlib import Path

import numpy as np

from ros_lnn.physics.multibody import Body, Joint, MultibodyModel, update
from ros_lnn.physics.multibody.build import load_model, make_chain
from ros_lnn.physics.multibody.kinematics import forward_kinematics, twist_map
from ros_lnn.physics.multibody.quaternion import quat_mul, quat_to_matrix, rot_axis

CONFIG = Path(__file__).resolve().parents[1] / "config"


def _tree():
    """A branching tree: a yaw base and two arms on it, one of them six joints long through a fixed
    flange (tilted rest attitude) and ending in a fixed tool body; unaligned axes, springs and dampers."""
    rng = np.random.default_rng(42)

    def inertia():
        A = rng.normal(size=(3, 3)) * 0.05
        return A @ A.T + 0.01 * np.eye(3)

    bodies = [Body(f"b{i}", float(0.5 + rng.random()), inertia()) for i in range(10)]
    joints = [
        Joint(
            "yaw",
            "revolute",
            -1,
            0,
            np.array([0.0, 0.0, 0.1]),
            np.array([0.0, 0.0, -0.05]),
            axis=np.array([0, 0, 1.0]),
            stiffness=np.array([0.8]),
            damping=0.1,
        ),
        Joint(
            "left",
            "revolute",
            0,
            1,
            np.array([0.05, 0.1, 0.05]),
            np.array([-0.1, 0.0, 0.0]),
            rest=rot_axis([1.0, 0.2, 0.0], 0.4),
            axis=np.array([0.0, 0.6, 0.8]),
            damping=0.05,
        ),
        Joint(
            "left2",
            "revolute",
            1,
            2,
            np.array([0.1, 0.0, 0.0]),
            np.array([-0.08, 0.01, 0.0]),
            axis=np.array([0.3, 1.0, 0.0]),
            stiffness=np.array([0.5]),
        ),
        Joint(
            "flange",
            "fixed",
            2,
            3,
            np.array([0.08, 0.0, 0.0]),
            np.array([-0.02, 0.0, 0.0]),
            rest=rot_axis([0.0, 0.0, 1.0], 0.7),
        ),
        Joint(
            "right",
            "revolute",
            0,
            4,
            np.array([0.05, -0.1, 0.05]),
            np.array([-0.1, 0.0, 0.0]),
            axis=np.array([0, 1.0, 0]),
        ),
        Joint(
            "right2",
            "revolute",
            4,
            5,
            np.array([0.1, 0.0, 0.0]),
            np.array([-0.1, 0.0, 0.0]),
            rest=rot_axis([0.0, 1.0, 0.0], -0.3),
            axis=np.array([1.0, 0, 0]),
        ),
        Joint(
            "wrist1",
            "revolute",
            3,
            6,
            np.array([0.03, 0.0, 0.0]),
            np.array([-0.04, 0.0, 0.0]),
            axis=np.array([1.0, 0.0, 0.0]),
            damping=0.02,
        ),
        Joint(
            "wrist2",
            "revolute",
            6,
            7,
            np.array([0.04, 0.0, 0.0]),
            np.array([-0.03, 0.0, 0.01]),
            axis=np.array([0.0, 0.0, 1.0]),
            stiffness=np.array([0.3]),
        ),
        Joint(
            "wrist3",
            "revolute",
            7,
            8,
            np.array([0.03, 0.0, 0.0]),
            np.array([-0.02, 0.0, 0.0]),
            rest=rot_axis([1.0, 1.0, 0.0], 0.2),
            axis=np.array([0.2, 1.0, 0.1]),
        ),
        Joint(
            "tool",
            "fixed",
            8,
            9,
            np.array([0.02, 0.0, 0.0]),
            np.array([-0.03, 0.01, 0.0]),
            rest=rot_axis([0.0, 1.0, 0.0], 0.9),
        ),
    ]
    return MultibodyModel(bodies, joints, gravity=(0.3, -0.2, -9.81), name="tree")


MODELS = {
    "urdf_arm": lambda: load_model(CONFIG / "dac_chain.urdf"),
    "chain_unaligned_springs": lambda: make_chain(
        6,
        joint="revolute",
        base="fixed",
        stiffness=[0.7],
        damping=0.2,
        axes=[[0, 0, 1], [0.3, 1, 0.2], [0, 1, 0], [1, 0, 0.1], [0, 1, 0], [1, 0.2, 0]],
        gravity=(0, 0, -9.81),
        length=0.12,
        mass=0.6,
    ),
    "tree_fixed_flange": _tree,
}


def _numpy_state(model, q, qd, order=None):
    """The maximal-coordinate state at joint coordinates given in Pinocchio's (depth-first) ``order``
    of the description's coordinates, and G with its columns in that order."""
    order = np.arange(len(q)) if order is None else order
    q_desc, qd_desc = np.empty(len(q)), np.empty(len(q))
    q_desc[order], qd_desc[order] = q, qd
    r, quat = forward_kinematics(model, q_desc)
    G = twist_map(model, update(model, r, quat, np.zeros(6 * model.n_bodies)))
    return update(model, r, quat, G @ qd_desc), G[:, order]


RP_URDF = """<robot name="rp">
  <link name="base"/>
  <link name="turret"><inertial><origin xyz="0 0 0.1"/><mass value="2.0"/>
    <inertia ixx="0.02" iyy="0.02" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="slider"><inertial><origin xyz="0.1 0 0"/><mass value="0.5"/>
    <inertia ixx="0.001" iyy="0.004" izz="0.004" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="tip"><inertial><mass value="0.2"/>
    <inertia ixx="0.0001" iyy="0.0001" izz="0.0001" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="spin" type="continuous"><parent link="base"/><child link="turret"/><axis xyz="0 0 1"/>
    <dynamics damping="0.05"/></joint>
  <joint name="reach" type="prismatic"><parent link="turret"/><child link="slider"/>
    <origin xyz="0 0 0.2" rpy="0 0.3 0"/>
    <axis xyz="1 0 0"/><limit lower="0" upper="0.5" effort="20" velocity="1"/></joint>
  <joint name="tip_joint" type="fixed"><parent link="slider"/><child link="tip"/>
    <origin xyz="0.2 0 0"/></joint>
</robot>"""


def _random_rotation(rng):
    q = rng.normal(size=4)
    return quat_to_matrix(q / np.linalg.norm(q)), q / np.linalg.norm(q)


def rotated_model(model: MultibodyModel, Q):
    """The same mechanism with the world (gravity, world anchors, base attitude) turned by Q."""
    joints = [
        Joint(
            j.name,
            j.kind,
            j.parent,
            j.child,
            Q @ j.anchor_parent if j.parent < 0 else j.anchor_parent,
            j.anchor_child,
            Q @ j.rest if j.parent < 0 else j.rest,
            j.axis,
            j.stiffness,
            j.damping,
        )
        for j in model.joints
    ]
    return MultibodyModel(model.bodies, joints, Q @ model.gravity, model.spring_law, model.name)


def rotate_state(Q, qQ, r, quat, vec6n):
    n = r.shape[0]
    return (r @ Q.T, quat_mul(np.broadcast_to(qQ, quat.shape), quat), (vec6n.reshape(2 * n, 3) @ Q.T).ravel())
