"""The parameters the nodes that read joint states share (``servo_lnn``, ``effort_observer``,
``dac_controller``; the simulators share the diagnostics period): one definition each, so that the
same name has the same range and meaning in every node."""

from __future__ import annotations

from .joint_state_reader import MERGE_WINDOW_DEFAULT_S, MERGE_WINDOW_TEXT
from .params import CONFIGURE, Param

MERGE_WINDOW_PARAMETER = Param(
    "joint_state_merge_window_s",
    MERGE_WINDOW_DEFAULT_S,
    MERGE_WINDOW_TEXT,
    CONFIGURE,
    ge=0.0,
    le=1.0,
)

#: ``input_timeout_s`` of the estimators (servo_lnn, effort_observer).
INPUT_TIMEOUT_PARAMETER = Param(
    "input_timeout_s",
    1.0,
    "no joint_states for this long: /diagnostics ERROR (stale)",
    ge=0.01,
    le=3600.0,
)

#: ``max_command_points`` of the nodes that read servo trajectories (servo_lnn, sim).
MAX_COMMAND_POINTS_PARAMETER = Param(
    "max_command_points",
    2000,
    "a servo trajectory with more points is refused before it is read (bounds the work one message can "
    "cause)",
    ge=1,
    le=1000000,
)

#: The description of a ``diagnostics_period_s`` whose counts cover a window of periods.
DIAGNOSTICS_PERIOD_TEXT = "period of /diagnostics (its counts cover the last 5 periods)"


def input_queue_parameter(default: int, description: str) -> Param:
    """``input_queue_depth``: the joint_states subscription's depth, read at configure."""
    return Param("input_queue_depth", default, description, CONFIGURE, ge=1, le=100000)


def diagnostics_period_parameter(mode: str, description: str = DIAGNOSTICS_PERIOD_TEXT) -> Param:
    """``diagnostics_period_s`` [s], 0.01 to 3600, 1 by default; ``mode``: when it is read."""
    return Param("diagnostics_period_s", 1.0, description, mode, ge=0.01, le=3600.0)
