"""Build a :class:`MultibodyModel` from a URDF string (``robot_description``) as Pinocchio reads it.

Pinocchio's URDF parser (urdfdom, the parser ``robot_state_publisher`` uses) makes the kinematic tree:
``revolute``, ``continuous`` and ``prismatic`` joints move one body each; links hung by ``fixed`` joints
(tool frames, flanges, sensors) have their ``<inertial>`` lumped into the moving body they hang from; the
root link is the world (a fixed base). Every moving body is described in the frame of the link its joint
moves, with its CoM and inertia about the CoM from the lumped inertials. Every link frame is kept in
``model.frames[link] = (body, R_link_in_body, p_link_from_CoM)``, so an end-effector link (``tool0``) can
be located after it was lumped; limits and ``<dynamics damping>`` are read into the joints. Floating,
planar and mimic joints are refused with a message naming the joint.
"""

from __future__ import annotations

import os
import sys
import tempfile
import xml.etree.ElementTree as ET
from contextlib import contextmanager

import numpy as np

from ...errors import ConfigError
from .model import Body, Joint, MultibodyModel


def import_pinocchio(what: str):
    """Pinocchio (an optional dependency), or a ConfigError saying that ``what`` needs it."""
    try:
        import pinocchio  # type: ignore[import-untyped]
    except ImportError:
        raise ConfigError(f"{what} needs Pinocchio: pip install pin") from None
    return pinocchio


def pinocchio_model(pin, text: str, where: str = ""):
    """Pinocchio's model of the URDF ``text`` and the names of its joints (the universe left out); a URDF
    it cannot read is a ConfigError that starts with ``where``."""
    try:
        model = pin.buildModelFromXML(text)
    except (ValueError, RuntimeError) as exc:
        raise ConfigError(f"{where}not a URDF Pinocchio can read ({str(exc).splitlines()[0]})") from None
    return model, [str(model.names[i]) for i in range(1, model.njoints)]


_REVOLUTE = (
    "JointModelRX",
    "JointModelRY",
    "JointModelRZ",
    "JointModelRevoluteUnaligned",
    "JointModelRUBX",
    "JointModelRUBY",
    "JointModelRUBZ",
    "JointModelRevoluteUnboundedUnaligned",
)
_PRISMATIC = ("JointModelPX", "JointModelPY", "JointModelPZ", "JointModelPrismaticUnaligned")


@contextmanager
def stderr_captured():
    """Collect what C++ code writes to file descriptor 2 (urdfdom reports its parse errors there)."""
    sys.stderr.flush()
    saved = os.dup(2)
    captured: list[str] = []
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield captured
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            captured.append(tmp.read().decode(errors="replace"))


def _parse(text: str, source: str):
    import pinocchio as pin

    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ConfigError(f"{source}: not valid URDF XML: {exc}") from None
    if root.tag != "robot":
        raise ConfigError(f"{source}: the root element is <{root.tag}>, expected <robot>")
    for j in root.findall("joint"):
        if j.find("mimic") is not None:
            raise ConfigError(
                f"{source}: joint '{j.get('name')}' is a mimic joint; mimic joints are not supported"
            )
    pm = None
    with stderr_captured() as err:
        try:
            pm = pin.buildModelFromXML(text)
        except (ValueError, RuntimeError):
            pass
    lines = [
        ln.strip()[len("Error:") :].strip() for ln in err[0].splitlines() if ln.strip().startswith("Error:")
    ]
    if pm is None:
        raise ConfigError(
            f"{source}: not a valid URDF: {'; '.join(lines[:2]) or 'the URDF parser rejected it'}"
        )
    return pm, "; ".join(lines[:2])


def _axis(pm, jid: int) -> np.ndarray:
    """Unit axis of a one-dof joint in its own frame: its motion subspace at the neutral configuration."""
    import pinocchio as pin

    data = pm.createData()
    pin.computeJointJacobians(pm, data, pin.neutral(pm))
    S = pin.getJointJacobian(pm, data, jid, pin.LOCAL)[:, pm.joints[jid].idx_v]
    a = S[3:] if np.linalg.norm(S[3:]) > 0 else S[:3]
    return a / np.linalg.norm(a)


def model_from_urdf(
    text: str, source: str = "robot_description", gravity=(0.0, 0.0, -9.81)
) -> MultibodyModel:
    pm, complaints = _parse(text, source)
    return model_from_pinocchio(pm, source, gravity, f" (URDF parser: {complaints})" if complaints else "")


def model_from_pinocchio(pm, source: str, gravity=(0.0, 0.0, -9.81), said: str = "") -> MultibodyModel:
    """The :class:`MultibodyModel` of a fixed-base Pinocchio model as its URDF parser builds one (each
    moving body with the inertia Pinocchio carries for its joint): a URDF as read, or one whose unused
    joints were locked (``buildReducedModel``) and whose bodies carry identified inertial parameters.
    ``source`` names it in errors; ``said``: what the URDF parser complained about, appended to them."""
    njoints = pm.njoints
    if njoints < 2:
        raise ConfigError(f"{source}: no revolute, continuous or prismatic joint; nothing moves")
    # Pinocchio joint -> name of the link it moves (the BODY frame right after its JOINT frame)
    body_frame = {}
    frames = list(pm.frames)
    for i, f in enumerate(frames):
        if (
            f.type == _frame_type("JOINT")
            and i + 1 < len(frames)
            and frames[i + 1].type == _frame_type("BODY")
        ):
            body_frame[f.parentJoint] = frames[i + 1].name
    bodies, joints, levers = [], [], {0: np.zeros(3)}
    effort = getattr(pm, "upperEffortLimit", None)  # Pinocchio 4; `effortLimit` before
    effort = pm.effortLimit if effort is None else effort
    for jid in range(1, njoints):
        jm, name = pm.joints[jid], pm.names[jid]
        short = jm.shortname()
        if short in _REVOLUTE:
            kind = "revolute"
        elif short in _PRISMATIC:
            kind = "prismatic"
        else:
            raise ConfigError(
                f"{source}: joint '{name}' is {short.replace('JointModel', '')}: not supported by the "
                "multibody model (revolute, continuous, prismatic and fixed are)"
            )
        link = body_frame.get(jid, name)
        Y = pm.inertias[jid]
        inertia = np.array(Y.inertia, float)
        if not Y.mass > 0:
            raise ConfigError(
                f"{source}: link '{link}' (and the links fixed to it) has no mass; add an "
                "<inertial> with mass and inertia" + said
            )
        if np.any(np.linalg.eigvalsh(inertia) <= 0):
            raise ConfigError(
                f"{source}: link '{link}' has a singular inertia {np.diag(inertia)}; give it "
                "non-zero ixx, iyy, izz" + said
            )
        levers[jid] = np.array(Y.lever, float)
        bodies.append(Body(link, float(Y.mass), inertia))
        parent = int(pm.parents[jid])
        X = pm.jointPlacements[jid]
        v = jm.idx_v
        joints.append(
            Joint(
                name,
                kind,
                parent - 1,
                jid - 1,
                np.array(X.translation) - levers[parent],
                -levers[jid],
                rest=np.array(X.rotation),
                axis=_axis(pm, jid),
                stiffness=np.zeros(1),
                damping=float(pm.damping[v]),
                effort_limit=_limit(effort[v]),
                velocity_limit=_limit(pm.velocityLimit[v]),
            )
        )
    model = MultibodyModel(bodies, joints, gravity=gravity, name=pm.name or "robot")
    model.frames = {
        f.name: (
            f.parentJoint - 1,
            np.array(f.placement.rotation),
            np.array(f.placement.translation) - levers[f.parentJoint],
        )
        for f in frames
        if f.type == _frame_type("BODY")
    }
    model.joint_position_limits = {}
    for jid in range(1, njoints):
        if pm.joints[jid].nq == 1:  # continuous joints (cos, sin) have no position limits
            iq = pm.joints[jid].idx_q
            lo, hi = float(pm.lowerPositionLimit[iq]), float(pm.upperPositionLimit[iq])
            if np.isfinite(lo) and np.isfinite(hi) and hi < 1e300:
                model.joint_position_limits[pm.names[jid]] = (lo, hi)
    return model


def _limit(value) -> float:
    """A URDF limit as Pinocchio stores it; its 'unlimited' (inf or the largest double) as inf."""
    value = float(value)
    return value if np.isfinite(value) and value < 1e300 else np.inf


def _frame_type(name: str):
    import pinocchio as pin

    return getattr(pin.FrameType, name)
