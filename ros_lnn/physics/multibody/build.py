"""Build a :class:`MultibodyModel` from a parameter dictionary / YAML file, or as a uniform chain.

YAML layout (``config/dac_chain.yaml`` is an example)::

    name: chain5
    gravity: [0, 0, 0]
    spring_law: paper            # or 'potential' (conservative form of eq 19)
    bodies:
      - {name: b1, mass: 1.0, inertia: [0.002, 0.03, 0.03]}   # diagonal, or a 3x3 list
    joints:
      - {name: j1, type: spherical, parent: b1, child: b2,     # parent 'world' for a fixed base
         parent_anchor: [0.25, 0, 0], child_anchor: [-0.25, 0, 0],
         stiffness: [2, 2, 2], damping: 0.0, rest_rpy: [0, 0, 0], axis: [0, 0, 1]}
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...errors import ConfigError
from .model import Body, Joint, MultibodyModel
from .quaternion import rpy_to_matrix


def cylinder_inertia(mass: float, length: float, radius: float) -> np.ndarray:
    """Solid cylinder along its x axis, about its centre of mass."""
    ix = 0.5 * mass * radius**2
    it = mass * (3 * radius**2 + length**2) / 12.0
    return np.diag([ix, it, it])


def make_chain(
    n: int,
    *,
    length=0.5,
    mass=1.0,
    radius=0.05,
    joint="spherical",
    base="free",
    stiffness=(2.0, 2.0, 2.0),
    damping=0.0,
    axes=None,
    gravity=(0.0, 0.0, 0.0),
    spring_law="paper",
    masses=None,
    lengths=None,
    base_position=(0.0, 0.0, 0.0),
) -> MultibodyModel:
    """A serial chain of ``n`` cylinders laid along x, joined end to end.

    ``joint`` is 'spherical' (torsional springs, the paper's chain) or 'revolute' (axes from ``axes``,
    default z for every joint); ``base`` 'free' (floating, the paper) or 'fixed' (body 1 hinged to the
    world at ``base_position`` by a joint of the same kind).
    """
    masses = np.broadcast_to(np.asarray(mass if masses is None else masses, float), (n,))
    lengths = np.broadcast_to(np.asarray(length if lengths is None else lengths, float), (n,))
    bodies = [
        Body(f"b{i + 1}", float(masses[i]), cylinder_inertia(masses[i], lengths[i], radius)) for i in range(n)
    ]
    n_j = n - 1 + (base == "fixed")
    axes = [np.array([0.0, 0.0, 1.0])] * n_j if axes is None else [np.asarray(a, float) for a in axes]
    stiff = np.asarray(stiffness, float)
    joints = []
    if base == "fixed":
        joints.append(
            Joint(
                "j1",
                joint,
                -1,
                0,
                np.asarray(base_position, float),
                np.array([-lengths[0] / 2, 0, 0]),
                axis=axes[0],
                stiffness=stiff if joint == "spherical" else stiff.ravel()[:1],
                damping=damping,
            )
        )
    elif base != "free":
        raise ConfigError(f"make_chain: base '{base}' is not 'free' or 'fixed'")
    for i in range(n - 1):
        k = len(joints)
        joints.append(
            Joint(
                f"j{k + 1}",
                joint,
                i,
                i + 1,
                np.array([lengths[i] / 2, 0, 0]),
                np.array([-lengths[i + 1] / 2, 0, 0]),
                axis=axes[k],
                stiffness=stiff if joint == "spherical" else stiff.ravel()[:1],
                damping=damping,
            )
        )
    return MultibodyModel(bodies, joints, gravity=gravity, spring_law=spring_law, name=f"chain{n}")


def _vec(value, where, size=3):
    arr = np.asarray(value, dtype=float).ravel()
    if arr.size != size or not np.all(np.isfinite(arr)):
        raise ConfigError(f"{where}: expected {size} finite numbers, got {value!r}")
    return arr


def model_from_dict(cfg: dict, source: str = "<dict>") -> MultibodyModel:
    """Model from the YAML layout above; errors name ``source`` and the entry at fault."""
    if not isinstance(cfg, dict) or "bodies" not in cfg:
        raise ConfigError(f"{source}: needs a 'bodies' list (and 'joints')")
    bodies = []
    for k, b in enumerate(cfg["bodies"]):
        where = f"{source}: bodies[{k}]"
        try:
            inertia = np.asarray(b["inertia"], float)
            inertia = np.diag(inertia) if inertia.shape == (3,) else inertia.reshape(3, 3)
            bodies.append(Body(str(b["name"]), float(b["mass"]), inertia))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: needs name, mass and inertia (3 or 3x3 numbers): {exc}") from None
    names = [b.name for b in bodies]
    joints = []
    for k, j in enumerate(cfg.get("joints", [])):
        where = f"{source}: joints[{k}] ('{j.get('name', '?')}')"
        try:
            parent = -1 if j["parent"] == "world" else names.index(j["parent"])
            child = names.index(j["child"])
        except (KeyError, ValueError):
            raise ConfigError(
                f"{where}: parent/child must name a body (or parent 'world'); bodies: {names}"
            ) from None
        kind = j.get("type", "spherical")
        stiff = np.asarray(j.get("stiffness", 0.0), float).ravel()
        joints.append(
            Joint(
                str(j.get("name", f"j{k + 1}")),
                kind,
                parent,
                child,
                _vec(j.get("parent_anchor", [0, 0, 0]), where + " parent_anchor"),
                _vec(j.get("child_anchor", [0, 0, 0]), where + " child_anchor"),
                rest=rpy_to_matrix(_vec(j.get("rest_rpy", [0, 0, 0]), where + " rest_rpy")),
                axis=_vec(j.get("axis", [0, 0, 1]), where + " axis"),
                stiffness=np.broadcast_to(stiff, (3,)).copy() if kind == "spherical" else stiff[:1],
                damping=float(j.get("damping", 0.0)),
                effort_limit=float(j.get("effort_limit", np.inf)),
                velocity_limit=float(j.get("velocity_limit", np.inf)),
            )
        )
    return MultibodyModel(
        bodies,
        joints,
        gravity=_vec(cfg.get("gravity", [0, 0, -9.81]), source + " gravity"),
        spring_law=cfg.get("spring_law", "paper"),
        name=str(cfg.get("name", "multibody")),
    )


def load_model(path) -> MultibodyModel:
    """Model from a YAML file (the layout above) or a URDF file (``.urdf``)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such model file; give a YAML chain description or a URDF")
    text = path.read_text()
    if path.suffix.lower() in (".urdf", ".xml"):
        from .urdf import model_from_urdf

        return model_from_urdf(text, source=str(path))
    import yaml

    try:
        cfg = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    return model_from_dict(cfg, source=str(path))
