"""What ``dac_controller`` builds from its parameter values at configure (the certain model, the control
pipeline on it, the learned port with its bound) and at activate (the fault monitor, the built-in
circle).

The certain model (:func:`controller_model`): ``model_path`` an arm model (``.onnx`` from ``ros-lnn
train --urdf``, its ``ros_lnn_arm`` metadata): its identified rigid body, on the kinematics of the
robot's description checked against the model's URDF, with its friction and residual as the
compensated term; a URDF or YAML file: that description; empty: the robot's description (parameter
or topic), else the shipped demo arm (which file ``model_path`` names:
:func:`.model_params.resolve_model_path`). ``robot_description`` set as a parameter is the model of a URDF
controller even with ``model_path`` set (as before the topic was read)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from ...control.pipeline import DacPipeline
from ...errors import ConfigError
from ...shipped import demo_arm_path
from ..model_params import model_file, resolve_model_path
from .parameters import gains_from_values

#: ``() -> (URDF text, where it came from)``: the robot's description (parameter, else topic), or ("", "").
DescriptionSource = Callable[[], tuple[str, str]]


def controller_model(values: dict, description: DescriptionSource, logger, limits=None):
    """``(certain multibody model, compensation or None, what it is)`` from the parameter values."""
    from ...physics.multibody.build import load_model
    from ...physics.multibody.urdf import model_from_urdf

    gravity = [float(g) for g in values["gravity"]]
    path = values["model_path"]
    if path and Path(path).suffix.lower() == ".onnx":
        return arm_controller_model(values, description, logger, limits)
    if values["robot_description"]:
        text, source = values["robot_description"], "parameter robot_description"
    elif path:
        model = load_model(model_file(values))
        model.gravity = np.asarray(gravity, float)
        return model, None, f"model {path}"
    else:
        text, source = description()
        if not text:
            logger.warning(
                "no robot_description (parameter or topic) and no model_path: the shipped demo arm "
                "config/dac_chain.urdf"
            )
            model = load_model(demo_arm_path())
            model.gravity = np.asarray(gravity, float)
            return model, None, "the shipped demo arm"
    return model_from_urdf(text, source, gravity=gravity), None, f"robot_description from the {source}"


def arm_controller_model(values: dict, description: DescriptionSource, logger, limits=None):
    """An arm model's certain model and compensated term; the robot's description, when there is one,
    must agree with the model's URDF (one ConfigError line naming what differs)."""
    from ...arm.compensation import ArmCompensation, certain_model
    from ...arm.description import description_mismatch
    from ...arm.model import ArmModel

    path = model_file(values)
    model = ArmModel(path, limits=limits)
    names = list(values["joint_names"])
    if names and names != list(model.joints):
        raise ConfigError(
            f"parameter joint_names {names} differ from the joints of the arm model {path.name} "
            f"{list(model.joints)} (the controller runs on them, in that order)"
        )
    text, source = description()
    if text:
        reason = description_mismatch(text, model.meta["urdf"], model.joints)
        if reason:
            raise ConfigError(
                f"robot_description ({source}) does not match the arm model {path.name}: {reason}"
            )
        logger.info(f"robot_description from the {source} agrees with the arm model {path.name}")
        source = f"; kinematics and limits from the {source}"
    else:
        logger.warning(
            f"no robot_description (parameter or topic): the URDF in {path.name} gives the kinematics "
            "and limits"
        )
    gravity = np.asarray([float(g) for g in values["gravity"]])
    if not np.allclose(gravity, model.rigid.gravity):
        logger.warning(
            f"parameter gravity {gravity.tolist()} differs from the arm model's "
            f"{model.rigid.gravity.tolist()}"
        )
    described = model.describe() + (source if text else f"; kinematics and limits from {path.name}")
    return certain_model(model, text or None, gravity), ArmCompensation(model), described


def end_effector_link(model, values: dict) -> str | None:
    """``ee_link``; a joint law, which uses the end effector only for its marker, takes the last body's
    CoM where the model has no such link (the default tool0 on an arm model of a Panda)."""
    from ...control.joint_laws import JOINT_LAWS

    link = values["ee_link"] or None
    if link and values["law"] in JOINT_LAWS and link not in getattr(model, "frames", {}):
        return None
    return link


def make_pipeline(model, values: dict, compensation=None) -> DacPipeline:
    """The law, gains, obstacles and effort limits of ``values`` on ``model``."""
    numbers = [float(v) for v in values["obstacles"]]
    if len(numbers) % 4:
        raise ConfigError(
            f"parameter obstacles has {len(numbers)} numbers; give x, y, z, radius per obstacle"
        )
    obstacles = [(numbers[i : i + 3], numbers[i + 3]) for i in range(0, len(numbers), 4)]
    names = values["joint_names"] or None
    limits = [float(v) for v in values["effort_limits"]] or None
    if limits is None:  # every joint that takes an effort (revolute, prismatic), in the pipeline's order
        names_eff = names or [j.name for j in model.joints if j.kind in ("revolute", "prismatic")]
        urdf = {j.name: j.effort_limit for j in model.joints}
        default = float(values["default_effort_limit"])
        limits = [urdf[j] if np.isfinite(urdf.get(j, np.inf)) else default for j in names_eff]
    pipeline = DacPipeline(
        model,
        law=values["law"],
        gains=gains_from_values(values),
        joint_names=names,
        ee_link=end_effector_link(model, values),
        ee_attitude=bool(values["ee_attitude"]),
        obstacles=obstacles,
        obstacle_influence=float(values["obstacle_influence"]),
        obstacle_eta=float(values["obstacle_eta"]),
        effort_limits=limits,
        compensation=compensation,
        joint_kp=values["joint_kp"],
        joint_kd=values["joint_kd"],
    )
    if values["enforce_joint_limits"]:
        pipeline.set_joint_limits(joint_limit_guard(model, pipeline, values))
    pipeline.set_protective_stop(
        protective_stop(pipeline, values), on_limit_violation=values["limit_reaction"] == "brake"
    )
    return pipeline


def protective_stop(pipeline: DacPipeline, values: dict):
    """The stop of ``limit_reaction`` / ``fault_reaction`` ``brake``: every joint braked at
    ``stop_rate`` to rest, kept inside the soft limits where the joint limits are enforced."""
    from ...control.protective_stop import ProtectiveStop

    guard = pipeline.joint_limits
    if guard is None:
        return ProtectiveStop(pipeline.efforts.limits, float(values["stop_rate"]))
    return ProtectiveStop(
        pipeline.efforts.limits,
        float(values["stop_rate"]),
        guard.soft_lower,
        guard.soft_upper,
        guard.limits.velocity,
    )


def joint_limit_guard(model, pipeline: DacPipeline, values: dict):
    """The position and velocity limits of ``pipeline``'s joints: the URDF's, or ``position_limits`` /
    ``velocity_limits``, with the soft-limit gains and violation tolerances of ``values``."""
    from ...control.joint_limits import JointLimitGuard, joint_limits_from_model

    limits = joint_limits_from_model(
        model, pipeline.joint_names, values["position_limits"], values["velocity_limits"]
    )
    return JointLimitGuard(
        limits,
        pipeline.efforts.limits,
        margin=float(values["limit_margin"]),
        k_position=float(values["limit_k_position"]),
        k_velocity=float(values["limit_damping"]) * pipeline.efforts.limits,
        velocity_tolerance=float(values["limit_velocity_tolerance"]),
        position_tolerance=float(values["limit_position_tolerance"]),
    )


def load_residual(value: str, pipeline: DacPipeline, logger, limits=None):
    """The learned port ``residual_model`` (ONNX Runtime); ModelError (configure fails, one line) when
    its joints differ."""
    from ...inference.residual import ResidualRuntime

    path = resolve_model_path(value)
    runtime = ResidualRuntime(path, pipeline.joint_names, limits=limits)
    trained_on = runtime.certain_model.get("name")
    if trained_on and trained_on != pipeline.model.name:
        logger.warning(
            f"residual_model {path.name} was trained against the certain model "
            f"'{trained_on}', this controller runs '{pipeline.model.name}'"
        )
    return runtime


def residual_limit(value, pipeline: DacPipeline, residual) -> np.ndarray:
    """``residual_limit`` per joint (empty: 1.5 × the training data's largest |τ_res|, else a quarter
    of the effort limits): a learned part is not trusted beyond what it was trained on."""
    values = [float(v) for v in value]
    n = len(pipeline.joint_names)
    if not values:
        seen = residual.trained_max if residual is not None else None
        return 1.5 * seen if seen is not None else 0.25 * pipeline.efforts.limits
    if len(values) not in (1, n):
        raise ConfigError(
            f"parameter residual_limit has {len(values)} values; give one, or one per joint "
            f"{pipeline.joint_names}"
        )
    return np.broadcast_to(np.asarray(values), (n,)).copy()


def fault_monitor(values: dict):
    """The fault monitor of ``saturation_timeout_s``, ``task_error_limit`` and ``fault_window_s``."""
    from ...control.monitor import FaultMonitor

    return FaultMonitor(
        float(values["saturation_timeout_s"]),
        float(values["task_error_limit"]),
        float(values["fault_window_s"]),
    )


def built_in_circle(values: dict, t0: float):
    """Law III's built-in circle (``circle_radius`` > 0) started at ``t0``: t -> the circle's target."""
    from ...control.pipeline import circle_path

    path = circle_path(
        values["circle_center"],
        float(values["circle_radius"]),
        float(values["circle_period_s"]),
        values["circle_normal"],
        float(values["circle_phase"]),
    )
    return lambda t: path(t - t0)
