"""Build a :class:`MultibodyModel` from a URDF string (``robot_description``) with ``xml.etree``.

Supported: ``revolute`` and ``continuous`` joints (one body each), ``fixed`` joints (the child link's
inertia is lumped into its parent body — tool frames, flanges, sensors), a fixed base (the root link is
the world). Body frames are the frames of the links that start a body; the body's CoM and inertia
about the CoM are computed from every lumped ``<inertial>`` (origin xyz/rpy included). Every link frame
is kept in ``model.frames[link] = (body, R_link_in_body, p_link_from_CoM)``, so an end-effector link
(``tool0``) can be located even after it was lumped. Limits are read into the joints.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np

from ..errors import ConfigError
from .multibody import Body, Joint, MultibodyModel
from .multibody_quaternion import rpy_to_matrix


def _floats(el, attr, default, where, size=3):
    text = el.get(attr) if el is not None else None
    if text is None:
        return np.array(default, dtype=float)
    try:
        vals = np.array([float(x) for x in text.split()])
    except ValueError:
        raise ConfigError(f"{where}: attribute {attr}='{text}' is not {size} numbers") from None
    if vals.size != size:
        raise ConfigError(f"{where}: attribute {attr}='{text}' is not {size} numbers")
    return vals


def _origin(el, where):
    o = el.find("origin") if el is not None else None
    return rpy_to_matrix(_floats(o, "rpy", [0, 0, 0], where)), _floats(o, "xyz", [0, 0, 0], where)


def _inertial(link, source):
    name = link.get("name")
    el = link.find("inertial")
    if el is None:
        return None
    where = f"{source}: link '{name}' <inertial>"
    try:
        mass = float(el.find("mass").get("value"))
        i = el.find("inertia")
        ixx, ixy, ixz, iyy, iyz, izz = (float(i.get(k, 0.0)) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"))
    except (AttributeError, TypeError, ValueError):
        raise ConfigError(f"{where}: needs <mass value=…> and <inertia ixx=… …>") from None
    R, p = _origin(el, where)
    inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    return mass, p, R @ inertia @ R.T  # CoM and inertia in link coordinates


def model_from_urdf(text: str, source: str = "robot_description", gravity=(0.0, 0.0, -9.81)) -> MultibodyModel:
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ConfigError(f"{source}: not valid URDF XML: {exc}") from None
    if root.tag != "robot":
        raise ConfigError(f"{source}: the root element is <{root.tag}>, expected <robot>")
    links = {lk.get("name"): lk for lk in root.findall("link")}
    joints = root.findall("joint")
    children = {j.find("child").get("link") for j in joints if j.find("child") is not None}
    roots = [n for n in links if n not in children]
    if len(roots) != 1:
        raise ConfigError(f"{source}: expected one root link, found {roots}; the description must be a tree")
    by_parent: dict[str, list] = {}
    for j in joints:
        try:
            by_parent.setdefault(j.find("parent").get("link"), []).append(j)
        except AttributeError:
            raise ConfigError(f"{source}: joint '{j.get('name')}' lacks <parent>/<child>") from None

    frames = {roots[0]: (-1, np.eye(3), np.zeros(3))}  # link -> (body, R in body, p in body link-origin frame)
    lumps: list[list] = []  # per body: [(mass, com, inertia)] in body coordinates
    body_links: list[str] = []
    pending = []  # (name, kind, parent body, anchor (body coords, before CoM shift), rest, axis, joint element)
    stack = [roots[0]]
    while stack:
        link = stack.pop(0)
        b_p, R_p, p_p = frames[link]
        for j in by_parent.get(link, []):
            name, kind = j.get("name"), j.get("type")
            where = f"{source}: joint '{name}'"
            child = j.find("child").get("link")
            if child not in links:
                raise ConfigError(f"{where}: child link '{child}' is not defined")
            R_o, p_o = _origin(j, where)
            R_j, p_j = R_p @ R_o, p_p + R_p @ p_o
            if kind == "fixed":
                frames[child] = (b_p, R_j, p_j)
            elif kind in ("revolute", "continuous"):
                frames[child] = (len(body_links), np.eye(3), np.zeros(3))
                body_links.append(child)
                lumps.append([])
                axis = _floats(j.find("axis"), "xyz", [1, 0, 0], where + " <axis>")
                if np.linalg.norm(axis) == 0:
                    raise ConfigError(f"{where}: <axis xyz> is zero; give the rotation axis")
                pending.append((name, b_p, p_j, R_j, axis, j))
            else:
                raise ConfigError(f"{where}: type '{kind}' is not supported by the multibody model "
                                  "(revolute, continuous and fixed are)")
            stack.append(child)
        ine = _inertial(links[link], source)
        if ine is not None and b_p >= 0:
            m, c, inertia = ine
            lumps[b_p].append((m, p_p + R_p @ c, R_p @ inertia @ R_p.T))
    if not body_links:
        raise ConfigError(f"{source}: no revolute/continuous joint; nothing moves")

    bodies, coms = [], []
    for b, link in enumerate(body_links):
        parts = lumps[b]
        mass = sum(m for m, _, _ in parts)
        if not parts or mass <= 0:
            raise ConfigError(f"{source}: link '{link}' (and the links fixed to it) has no mass; add an "
                              "<inertial> with mass and inertia")
        com = sum(m * c for m, c, _ in parts) / mass
        inertia = sum(I + m * ((c - com) @ (c - com) * np.eye(3) - np.outer(c - com, c - com)) for m, c, I in parts)
        if np.any(np.linalg.eigvalsh(inertia) <= 0):
            raise ConfigError(f"{source}: link '{link}' has a singular inertia {np.diag(inertia)}; give it "
                              "non-zero ixx, iyy, izz")
        bodies.append(Body(link, mass, inertia))
        coms.append(com)
    model_joints = []
    for name, b_p, p_j, R_j, axis, j in pending:
        b_c = frames[j.find("child").get("link")][0]
        lim, dyn = j.find("limit"), j.find("dynamics")
        effort = float(lim.get("effort", np.inf)) if lim is not None else np.inf
        velocity = float(lim.get("velocity", np.inf)) if lim is not None else np.inf
        damping = float(dyn.get("damping", 0.0)) if dyn is not None else 0.0
        anchor_p = p_j - (coms[b_p] if b_p >= 0 else 0.0)
        model_joints.append(Joint(name, "revolute", b_p, b_c, anchor_p, -coms[b_c], rest=R_j, axis=axis,
                                  stiffness=np.zeros(1), damping=damping, effort_limit=effort,
                                  velocity_limit=velocity))
    model = MultibodyModel(bodies, model_joints, gravity=gravity, name=root.get("name", "robot"))
    model.frames = {name: (b, R, p - (coms[b] if b >= 0 else 0.0)) for name, (b, R, p) in frames.items()}
    model.joint_position_limits = {
        j.get("name"): (float(j.find("limit").get("lower", -np.inf)), float(j.find("limit").get("upper", np.inf)))
        for j in joints if j.get("type") == "revolute" and j.find("limit") is not None}
    return model
