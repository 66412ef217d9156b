"""Does the robot's description (``robot_description``: the URDF ``robot_state_publisher`` publishes)
agree with the URDF an arm model was identified on?

An arm model's inertial parameters belong to the kinematics it was fitted with: on a robot whose
description has other joints, or joints placed or turned otherwise, the model is wrong however well it
was trained. :func:`description_mismatch` compares the two on the model's joints: each must be in the
description, of the same kind, and every joint frame must sit where the model's does — positions
within ``tolerance_m``, orientations within ``tolerance_rad`` — at the zero configuration and at random
configurations within the joint limits (so that axes and placements are compared, not one pose).
Links and joints the model does not use (a gripper the description adds) do not matter.
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..physics.multibody.urdf import pinocchio_model, stderr_captured
from .rigid_body import ArmRigidBody, pinocchio

#: Configurations compared besides zero.
CONFIGURATIONS = 8


def description_mismatch(
    description: str, model_urdf: str, joints, tolerance_m: float = 1e-4, tolerance_rad: float = 1e-4
) -> str:
    """'' when ``description`` (a URDF's text) agrees with ``model_urdf`` on ``joints``; otherwise the
    first difference, in words (joint names, kind, or kinematics)."""
    pin = pinocchio()
    try:
        with stderr_captured():  # urdfdom writes its complaints to stderr; the reason comes back here
            _, names = pinocchio_model(pin, description)
    except ConfigError as exc:
        return str(exc)
    missing = [j for j in joints if j not in names]
    if missing:
        return f"it has no joint(s) {missing} of the model (its joints: {names})"
    robot = ArmRigidBody.from_urdf(description, joints)
    model = ArmRigidBody.from_urdf(model_urdf, joints)
    for j in joints:
        kinds = [arm.model.joints[arm.model.getJointId(j)].shortname() for arm in (robot, model)]
        if kinds[0] != kinds[1]:
            short = [k.replace("JointModel", "") for k in kinds]
            return f"joint {j} is {short[0]} there, {short[1]} in the model (kinematics)"
    lo, hi = model.position_limits()
    lo, hi = (
        np.where(np.isfinite(lo) & (lo > -1e3), lo, -np.pi),
        np.where(np.isfinite(hi) & (hi < 1e3), hi, np.pi),
    )
    rng = np.random.default_rng(0)
    states = [np.zeros(len(joints))] + [rng.uniform(lo, hi) for _ in range(CONFIGURATIONS)]
    data = [arm.model.createData() for arm in (robot, model)]
    for q in states:
        frames = []
        for arm, d in zip((robot, model), data):
            qp = np.empty(arm.n)
            qp[arm.order] = q
            pin.forwardKinematics(arm.model, d, qp)
            frames.append([d.oMi[arm.model.getJointId(j)] for j in joints])
        for j, a, b in zip(joints, *frames):
            offset = float(np.linalg.norm(a.translation - b.translation))
            turn = float(np.linalg.norm(pin.log3(a.rotation.T @ b.rotation)))
            if offset > tolerance_m or turn > tolerance_rad:
                return (
                    f"joint {j}'s frame is {offset:.4g} m and {turn:.4g} rad from the model's at "
                    f"q = {np.round(q, 3).tolist()} (kinematics)"
                )
    return ""


def child_links(urdf: str) -> dict[str, str]:
    """Joint name -> the link it moves, from a URDF's text ({} where it cannot be read)."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(urdf)
    except ET.ParseError:
        return {}
    return {
        str(j.get("name")): str(child.get("link"))
        for j in root.findall("joint")
        if (child := j.find("child")) is not None
    }
