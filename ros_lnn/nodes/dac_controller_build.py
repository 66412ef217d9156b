"""What ``dac_controller`` builds from its parameter values at configure (the control pipeline on a
multibody model, the learned port with its bound) and at activate (the fault monitor, the built-in
circle)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..control.pipeline import DacPipeline
from ..errors import ConfigError
from .dac_controller_params import gains_from_values


def make_pipeline(model, values: dict) -> DacPipeline:
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
        ee_link=values["ee_link"] or None,
        ee_attitude=bool(values["ee_attitude"]),
        obstacles=obstacles,
        obstacle_influence=float(values["obstacle_influence"]),
        obstacle_eta=float(values["obstacle_eta"]),
        effort_limits=limits,
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
    from ..control.protective_stop import ProtectiveStop

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
    from ..control.joint_limits import JointLimitGuard, joint_limits_from_model

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
    from ..inference.residual import ResidualRuntime

    path = Path(value).expanduser()
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
    from ..control.monitor import FaultMonitor

    return FaultMonitor(
        float(values["saturation_timeout_s"]),
        float(values["task_error_limit"]),
        float(values["fault_window_s"]),
    )


def built_in_circle(values: dict, t0: float):
    """Law III's built-in circle (``circle_radius`` > 0) started at ``t0``: t -> the circle's target."""
    from ..control.pipeline import circle_path

    path = circle_path(
        values["circle_center"],
        float(values["circle_radius"]),
        float(values["circle_period_s"]),
        values["circle_normal"],
        float(values["circle_phase"]),
    )
    return lambda t: path(t - t0)
