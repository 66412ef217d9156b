"""``dac_controller``'s /diagnostics: its values (rate, latency, counts, the law's last output) and
the level, from a latched fault (ERROR) down to tracking (OK)."""

from __future__ import annotations

import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

from ..diagnostics import diagnostic_status, status_name
from .faults import LATCHED_REACTIONS, STOP_TEXT

#: What the learned port did, counted per joint state (``residual_state`` of the effort command).
RESIDUAL_COUNTS = ("residual_clipped", "residual_non_finite")
REJECT_REASONS = (
    "bad_joint_state",
    "bad_target",
    "bad_trajectory",
    "non_finite_output",
    "stale_state",
    "stale_target",
    "duplicate_names",
    "old_stamp",
    "future_stamp",
    "step_error",
    "clock_not_started",
    "unused_input",
    "missing_joint",
)


def controller_values(node) -> dict:
    """The values of the controller's status: rate and latency, lifetime counts, the last output."""
    values = dict(node.stats.summary())
    values.update(node.counts)
    out = node.last_output
    if out is not None:
        values.update(
            lyapunov=out.result.lyapunov,
            saturation_ratio=out.efforts.saturation_ratio,
            task_error=float(np.linalg.norm(out.result.task_error)),
            obstacle_potential=out.result.obstacle_potential,
        )
    values["stale"] = node.stale
    values["fault_cause"] = node.fault
    values["limit_violation_cause"] = node.limit_violation
    values["soft_limited_joints"] = node.soft_limited_joints
    values["residual_model"] = node.residual.path.name if node.residual is not None else ""
    values["model"] = getattr(node, "described", "")
    return values


def controller_level(node) -> tuple[int, str]:
    """The level and message of the controller's state, worst first."""
    period = float(node.values["diagnostics_period_s"])
    now = time.monotonic()
    recent = now - node._fault_time < max(5.0, 5 * period)
    if node.limit_violation:
        return DiagnosticStatus.ERROR, (
            f"joint limit violation: {node.limit_violation} ({node.limit_stop_text()}, latched: "
            "deactivate and activate to reset)"
        )
    latched = node._reaction in LATCHED_REACTIONS
    if node.fault and (latched or recent):
        how = f" ({STOP_TEXT[node._reaction]}, latched: deactivate and activate to reset)" if latched else ""
        return DiagnosticStatus.ERROR, f"fault: {node.fault}{how}"
    if node.stale:
        return DiagnosticStatus.ERROR, "joint_states stale: zero efforts"
    if node.last_output is None:
        return DiagnosticStatus.WARN, "waiting for joint_states"
    if now - node._singular_time < max(2.0, period):
        return DiagnosticStatus.WARN, "singular task configuration: damped task inverse"
    if now - node._model_fault_time < max(2.0, period):
        return DiagnosticStatus.WARN, "arm model friction/residual non-finite: zero efforts"
    if now - node._residual_fault_time < max(2.0, period):
        return DiagnosticStatus.WARN, "learned port non-finite: model-only efforts"
    if now - node._soft_limit_time < max(2.0, period):
        return DiagnosticStatus.WARN, f"soft joint limits braking: {node.soft_limited_joints}"
    if node.last_output.efforts.saturated.any():
        return DiagnosticStatus.WARN, "effort limits reached"
    return DiagnosticStatus.OK, "tracking"


def controller_diagnostics(node) -> DiagnosticArray:
    """The node's /diagnostics message: its level, made WARN by rejections within the count window."""
    values = node.diagnostics_values()
    level, message = controller_level(node)
    window = node.window.update(node.counts)
    values.update({f"window_{k}": v for k, v in window.items()})
    rejected = {k: window[k] for k in REJECT_REASONS + ("internal_error",) if window.get(k)}
    if rejected and level == DiagnosticStatus.OK:
        level = DiagnosticStatus.WARN
        message = f"rejected in the last {window['window_s']:.0f} s: " + ", ".join(
            f"{k} {v}" for k, v in rejected.items()
        )
    msg = DiagnosticArray()
    msg.header.stamp = node.get_clock().now().to_msg()
    assert node.pipeline is not None  # the diagnostics timer lives from activate to deactivate
    msg.status = [diagnostic_status(status_name(node), node.pipeline.model.name, level, message, values)]
    return msg
