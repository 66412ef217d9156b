"""``dac_controller``'s reactions to faults, joint limits and its models' failures (the node's glue around
:mod:`ros_lnn.control.monitor` and :mod:`ros_lnn.control.joint_limits`): counted, logged once, and the
configured ``fault_reaction``; the published port with the compensated and learned parts."""

from __future__ import annotations

import time
from typing import Any

from ..diagnostics import warn_throttled

#: Fault reactions that stop the arm until the node is deactivated and activated again.
LATCHED_REACTIONS = ("brake", "zero")
STOP_TEXT = {
    "brake": "protective stop (braking to rest, holding against gravity)",
    "zero": "zero efforts",
}


class FaultReactions:
    """Mixed into :class:`~ros_lnn.nodes.dac_controller.DacControllerNode` (uses its pipeline, counts,
    logger, ``_reaction``, ``_monitor`` and ``_zero_commands``)."""

    pipeline: Any
    counts: Any
    fault: str
    limit_violation: str
    soft_limited_joints: str
    _fault_time: float
    _soft_limit_time: float
    _reaction: str
    _monitor: Any
    _zero_commands: Any
    _model_fault_time: float
    _model_fault_logged: bool
    _residual_fault_time: float
    get_logger: Any

    def limit_stop_text(self) -> str:
        """What a joint limit violation does (limit_reaction)."""
        assert self.pipeline is not None
        return STOP_TEXT["brake" if self.pipeline.brakes_on_violation else "zero"]

    def _trip(self, cause: str, q) -> None:
        """A fault: counted, one error line, /diagnostics ERROR with the cause, and fault_reaction."""
        assert self.pipeline is not None  # called from _on_joint_state
        self.counts["fault"] += 1
        self.fault, self._fault_time = cause, time.monotonic()
        action = {
            "brake": f"{STOP_TEXT['brake']} until the node is deactivated and activated again",
            "zero": f"{STOP_TEXT['zero']} until the node is deactivated and activated again",
            "hold": "holding the current pose",
            "warn": "control goes on (fault_reaction warn)",
        }[self._reaction]
        self.get_logger().error(f"fault: {cause}: {action}")
        if self._reaction == "hold":
            self.pipeline.hold(q)
            self._monitor.reset()

    def _stopped(self, q, qd):
        """Port and efforts of a latched fault: a zero port; the protective stop's efforts (brake) or
        zeros."""
        assert self.pipeline is not None  # called from _on_joint_state
        port, effort = self._zero_commands
        if self._reaction == "brake":
            effort = self.pipeline.stop_efforts(q, qd)
        return port, effort

    def _joint_limits(self, result, port, effort):
        """A limit violation: a zero port and the efforts the library gave (the protective stop's, or
        zeros; latched there), counted and logged once; soft limits that acted: counted (diagnostics
        WARN)."""
        if result.violation:
            if not self.limit_violation:
                self.limit_violation = result.violation
                self.counts["limit_violation"] += 1
                self.get_logger().error(
                    f"joint limit violation: {result.violation}: {self.limit_stop_text()} until the "
                    "node is deactivated and activated again"
                )
            return self._zero_commands[0], result.effort
        if result.soft_limited.any():
            assert self.pipeline is not None  # called from _on_joint_state
            self.counts["limit_soft"] += 1
            self._soft_limit_time = time.monotonic()
            names = self.pipeline.joint_names
            self.soft_limited_joints = ", ".join(n for n, hit in zip(names, result.soft_limited) if hit)
        return port, effort

    def _model_fault(self):
        """The arm model's friction and residual gave a non-finite torque (the efforts are already zero):
        counted, one error line per activation, zero port."""
        self.counts["model_non_finite"] += 1
        self._model_fault_time = time.monotonic()
        if not self._model_fault_logged:
            self._model_fault_logged = True
            self.get_logger().error(
                "the arm model gave a non-finite friction or residual torque: zero efforts sent "
                "(counted as model_non_finite; logged once per activation)"
            )
        return self._zero_commands[0]

    def _learned_port(self, out, port, state: str):
        """The published port with the compensated and learned parts ``E (τ_f + r + τ̂_res)`` (so that
        ``Gᵀ port = u`` before the limits); a non-finite τ̂_res was dropped (model-only command):
        counted and warned."""
        if state == "non_finite":
            self.counts["residual_non_finite"] += 1
            self._residual_fault_time = time.monotonic()
            warn_throttled(
                self,
                "residual_non_finite",
                "learned port gave a non-finite correction: model-only efforts sent",
            )
            if out.efforts.compensation_part is None:
                return port
        if state == "clipped":
            self.counts["residual_clipped"] += 1
        from ...physics.multibody.pin import effort_port

        assert self.pipeline is not None  # called from _on_joint_state
        extra = out.efforts.residual_part
        if out.efforts.compensation_part is not None:
            extra = extra + out.efforts.compensation_part
        return port + effort_port(out.data, self.pipeline.model_order(extra))
