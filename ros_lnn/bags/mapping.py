"""Which topics and joints of a bag make the dataset: the ``bag:`` section of a config YAML, with
overrides (the command line's)."""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError

#: Kinds of joint a mapping may declare (``joint_kinds``).
JOINT_KINDS = ("revolute", "continuous", "prismatic", "cyclic")

SERVO_TYPES = {
    "auto": "auto",
    "JointTrajectory": "trajectory_msgs/msg/JointTrajectory",
    "Float64MultiArray": "std_msgs/msg/Float64MultiArray",
}


@dataclass(frozen=True)
class BagMapping:
    """Every field with its default; a config's ``bag:`` section may set any of them."""

    joint_states_topic: str = "/joint_states"
    #: servo command topic ("" = none); its accelerations are used as q̈_e when present
    servo_topic: str = "/servo_commands"
    #: auto (from the bag) | JointTrajectory | Float64MultiArray (data = [q_e..., q̇_e..., q̈_e...])
    servo_type: str = "auto"
    free_joints: tuple = ()
    servo_joints: tuple = ()
    #: joint names in array order, for JointState messages whose ``name`` is empty
    joint_order: tuple = ()
    #: measured Q_e: "joint_states" (effort of the servo joints), "none", or a topic
    #: (JointState effort, or Float64MultiArray with one entry per servo joint)
    servo_effort: str = "joint_states"
    #: Q_f: "zero" (free joints unactuated), "joint_states", "none" (unknown), or a topic as above
    free_effort: str = "zero"
    #: exact values written by 'ros-lnn simulate --bag' ("" = none); used for evaluation only
    ground_truth_topic: str = "/ground_truth"
    #: header | receive (bag time); header falls back to receive, with a warning, when stamps are zero
    stamps: str = "header"
    #: a stamp step longer than gap_factor × the median step splits the recording into trials
    gap_factor: float = 5.0
    #: trials with fewer samples are dropped (reported)
    min_samples: int = 50
    #: largest |Δt − median Δt| / median Δt above which a trial is resampled to a uniform grid
    #: (cubic spline through the samples; a missing sample or rate jitter triggers it)
    jitter_tolerance: float = 0.01
    #: rate of the uniform grid when resampling (0 = the median rate)
    rate_hz: float = 0.0
    savgol_window: int = 11
    savgol_order: int = 3
    #: share of trials held out for validation (split by trial, seeded)
    val_fraction: float = 0.25
    #: by_trial: validation cut from the recordings (in-distribution); by_bag: with several bags the
    #: last one is the test recording and the one before it (three or more) the validation recording
    split: str = "by_trial"
    seed: int = 0
    #: the robot's name, written into the model's metadata
    system: str = ""
    #: per joint: revolute (rad, the default), continuous (rad, wraps: enters the network as sin/cos),
    #: prismatic (m), cyclic (the Lagrangian does not depend on it: not a network input at all)
    joint_kinds: dict = field(default_factory=dict)
    #: shorthand for joint_kinds entries "cyclic"
    cyclic_joints: tuple = ()
    #: URDF file of the robot ("" = none): its rigid-body model becomes the prior (gray box)
    robot_description: str = ""

    def __post_init__(self):
        for key in ("free_joints", "servo_joints", "joint_order", "cyclic_joints"):
            value = getattr(self, key)
            value = [value] if isinstance(value, str) else value or ()
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
                raise ConfigError(
                    f"bag.{key} = {getattr(self, key)!r}: give a joint name or a list of joint names"
                )
            object.__setattr__(self, key, tuple(value))
        if self.servo_type not in SERVO_TYPES and self.servo_type not in SERVO_TYPES.values():
            raise ConfigError(f"bag.servo_type '{self.servo_type}': choose one of {', '.join(SERVO_TYPES)}")
        if self.stamps not in ("header", "receive"):
            raise ConfigError(f"bag.stamps '{self.stamps}': choose header or receive")
        if not self.free_joints:
            raise ConfigError("bag.free_joints is empty: name the free (unactuated) joints")
        if set(self.free_joints) & set(self.servo_joints):
            raise ConfigError(
                f"joints {sorted(set(self.free_joints) & set(self.servo_joints))} are listed "
                "as both free and servo"
            )
        if not 0.0 <= self.val_fraction < 1.0:
            raise ConfigError(f"bag.val_fraction {self.val_fraction} must be in [0, 1)")
        if self.split not in ("by_trial", "by_bag"):
            raise ConfigError(f"bag.split '{self.split}': choose by_trial or by_bag")
        if not isinstance(self.joint_kinds, dict):
            raise ConfigError(f"bag.joint_kinds must map joint names to kinds, got {self.joint_kinds!r}")
        kinds = {**dict.fromkeys(self.cyclic_joints, "cyclic"), **dict(self.joint_kinds)}
        joints = set(self.free_joints) | set(self.servo_joints)
        for joint, kind in kinds.items():
            if joint not in joints:
                raise ConfigError(
                    f"bag.joint_kinds/cyclic_joints: '{joint}' is neither a free nor a servo "
                    f"joint "
                    f"({', '.join(sorted(joints))})"
                )
            if kind not in JOINT_KINDS:
                raise ConfigError(
                    f"bag.joint_kinds: '{joint}: {kind}': choose one of {', '.join(JOINT_KINDS)}"
                )
        object.__setattr__(self, "joint_kinds", kinds)

    def kind(self, joint: str) -> str:
        """The joint's kind (:data:`JOINT_KINDS`); revolute when the mapping says nothing."""
        return self.joint_kinds.get(joint, "revolute")

    def unit(self, joint: str) -> str:
        return "m" if self.kind(joint) == "prismatic" else "rad"

    @property
    def servo_msgtype(self) -> str:
        return SERVO_TYPES.get(self.servo_type, self.servo_type)

    @classmethod
    def from_dict(cls, values: dict, source: str = "mapping") -> BagMapping:
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ConfigError(
                f"{source}: unknown bag setting(s) {', '.join(unknown)} (known: {', '.join(known)})"
            )
        typed: dict[str, Any] = {}
        for key, value in values.items():
            default = known[key].default
            if default is MISSING:  # dict fields
                default = known[key].default_factory()  # type: ignore[misc,operator]
            reason = _value_problem(value, default)
            if reason:
                raise ConfigError(f"{source}: bag.{key} = {_short(value)}: {reason}")
            try:
                typed[key] = (
                    type(default)(value)
                    if isinstance(default, (int, float)) and value is not None
                    else ({} if value is None and isinstance(default, dict) else value)
                )
            except (TypeError, ValueError):
                raise ConfigError(
                    f"{source}: bag.{key} = {value!r} is not a {type(default).__name__}"
                ) from None
            if typed[key] is None and isinstance(default, str):
                typed[key] = ""
        return cls(**typed)

    @classmethod
    def from_yaml(cls, path, overrides: dict | None = None) -> BagMapping:
        """Read the ``bag:`` section of ``path`` (or the whole file when it has none)."""
        from ..files import load_yaml

        path = Path(path)
        doc = load_yaml(path, "config") or {}
        section = doc.get("bag", doc) if isinstance(doc, dict) else None
        if not isinstance(section, dict):
            raise ConfigError(f"{path}: expected a 'bag:' mapping")
        urdf = section.get("robot_description")
        if urdf and not Path(urdf).is_absolute():  # a URDF named in the config: relative to the config
            section = {**section, "robot_description": str(path.parent / urdf)}
        if "bag" not in doc and not set(section) & {f.name for f in fields(cls)}:
            raise ConfigError(
                f"{path}: no 'bag:' section (topics and joints of the recording); "
                "see config/bag_mapping_crane.yaml"
            )
        return cls.from_dict({**section, **(overrides or {})}, str(path))

    def with_overrides(self, **overrides) -> BagMapping:
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})


def _short(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _value_problem(value, default) -> str:
    """Why a YAML value cannot stand for a setting with this default ('' when it can)."""
    if value is None:
        return ""
    if isinstance(default, str):
        return "" if isinstance(value, str) else "must be a text value"
    if isinstance(default, bool):
        return "" if isinstance(value, bool) else "must be true or false"
    if isinstance(default, (int, float)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be a {'whole ' if isinstance(default, int) else ''}number"
        if not math.isfinite(value):
            return "must be finite"
        if isinstance(default, int) and value != int(value):
            return "must be a whole number"
        return ""
    if isinstance(default, dict):
        return "" if isinstance(value, dict) else "must be a mapping"
    if isinstance(default, tuple):
        if isinstance(value, str):
            return ""
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            return "give a joint name or a list of joint names"
    return ""


CRANE = dict(free_joints=("pendulum_joint",), servo_joints=("cart_joint",), system="crane")


def mapping_from_options(config=None, overrides: dict | None = None) -> BagMapping:
    """The mapping of ``config`` (a YAML path; default: the crane) with ``overrides`` applied."""
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    if config:
        return BagMapping.from_yaml(config, overrides)
    return BagMapping.from_dict({**CRANE, **overrides}, "command line")


__all__ = ["BagMapping", "mapping_from_options", "CRANE", "SERVO_TYPES", "JOINT_KINDS"]
