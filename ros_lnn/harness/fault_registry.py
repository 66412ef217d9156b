"""Every fault-injection target and case list: the original ones (:mod:`.faults`) and those of the
safety work (:mod:`.faults_safety`), in one registry that imports both (neither imports it)."""

from __future__ import annotations

from collections.abc import Callable

from . import faults, faults_safety
from .faults import Target

TARGETS: dict[str, Callable[[], Target]] = {
    "servo_lnn": faults.servo_lnn_target,
    "sim": faults.sim_target,
    "dac_controller": faults.dac_controller_target,
    "effort_watchdog": faults_safety.effort_watchdog_target,
}
#: The cases per target: the original ones in faults.py, those of issue 23 (safety stops, deletes,
#: string bounds, paths, workspace, the watchdog) in faults_safety.py.
CASES: dict[str, Callable[[], list]] = {
    "servo_lnn": lambda: faults.servo_lnn_cases() + faults_safety.servo_lnn_cases(),
    "sim": lambda: faults.sim_cases() + faults_safety.sim_cases(),
    "dac_controller": lambda: faults.dac_controller_cases() + faults_safety.dac_controller_cases(),
    "effort_watchdog": faults_safety.effort_watchdog_cases,
}
