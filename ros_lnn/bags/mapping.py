"""Which topics and joints of a bag make the dataset: the ``bag:`` section of a config YAML, with
overrides (the command line's)."""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

from ..errors import ConfigError

SERVO_TYPES = {"auto": "auto", "JointTrajectory": "trajectory_msgs/msg/JointTrajectory",
               "Float64MultiArray": "std_msgs/msg/Float64MultiArray"}


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
    seed: int = 0
    system: str = ""

    def __post_init__(self):
        for key in ("free_joints", "servo_joints", "joint_order"):
            value = getattr(self, key)
            value = [value] if isinstance(value, str) else value or ()
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
                raise ConfigError(f"bag.{key} = {getattr(self, key)!r}: give a joint name or a list of joint names")
            object.__setattr__(self, key, tuple(value))
        if self.servo_type not in SERVO_TYPES and self.servo_type not in SERVO_TYPES.values():
            raise ConfigError(f"bag.servo_type '{self.servo_type}': choose one of {', '.join(SERVO_TYPES)}")
        if self.stamps not in ("header", "receive"):
            raise ConfigError(f"bag.stamps '{self.stamps}': choose header or receive")
        if not self.free_joints:
            raise ConfigError("bag.free_joints is empty: name the free (unactuated) joints")
        if set(self.free_joints) & set(self.servo_joints):
            raise ConfigError(f"joints {sorted(set(self.free_joints) & set(self.servo_joints))} are listed "
                              "as both free and servo")
        if not 0.0 <= self.val_fraction < 1.0:
            raise ConfigError(f"bag.val_fraction {self.val_fraction} must be in [0, 1)")

    @property
    def servo_msgtype(self) -> str:
        return SERVO_TYPES.get(self.servo_type, self.servo_type)

    @classmethod
    def from_dict(cls, values: dict, source: str = "mapping") -> "BagMapping":
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ConfigError(f"{source}: unknown bag setting(s) {', '.join(unknown)} "
                              f"(known: {', '.join(known)})")
        typed = {}
        for key, value in values.items():
            default = known[key].default
            try:
                typed[key] = type(default)(value) if isinstance(default, (int, float)) and value is not None \
                    else value
            except (TypeError, ValueError):
                raise ConfigError(f"{source}: bag.{key} = {value!r} is not a {type(default).__name__}") from None
            if typed[key] is None and isinstance(default, str):
                typed[key] = ""
        return cls(**typed)

    @classmethod
    def from_yaml(cls, path, overrides: dict | None = None) -> "BagMapping":
        """Read the ``bag:`` section of ``path`` (or the whole file when it has none)."""
        import yaml

        path = Path(path)
        try:
            doc = yaml.safe_load(path.read_text()) or {}
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the config ({exc.strerror})") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
        section = doc.get("bag", doc) if isinstance(doc, dict) else None
        if not isinstance(section, dict):
            raise ConfigError(f"{path}: expected a 'bag:' mapping")
        if "bag" not in doc and not set(section) & {f.name for f in fields(cls)}:
            raise ConfigError(f"{path}: no 'bag:' section (topics and joints of the recording); "
                              "see config/bag_mapping_crane.yaml")
        return cls.from_dict({**section, **(overrides or {})}, str(path))

    def with_overrides(self, **overrides) -> "BagMapping":
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})


CRANE = dict(free_joints=("pendulum_joint",), servo_joints=("cart_joint",), system="crane")


#: Mapping settings the command line may override (``ros-lnn train --free-joints ...``).
OVERRIDABLE = ("joint_states_topic", "servo_topic", "servo_type", "free_joints", "servo_joints", "servo_effort",
               "savgol_window", "savgol_order", "val_fraction")


def mapping_from_options(config=None, overrides: dict | None = None) -> BagMapping:
    """The mapping of ``config`` (a YAML path; default: the crane) with ``overrides`` applied."""
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    if config:
        return BagMapping.from_yaml(config, overrides)
    return BagMapping.from_dict({**CRANE, **overrides}, "command line")


__all__ = ["BagMapping", "mapping_from_options", "CRANE", "OVERRIDABLE", "SERVO_TYPES"]
