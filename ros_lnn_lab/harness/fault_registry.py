"""Every fault-injection target and case list: the original ones (:mod:`.faults`), those of the
safety work (:mod:`.faults_safety`), of hours of running (:mod:`.faults_reliability`) and the
controller's own (:mod:`.faults_dac`), in one registry that imports them (none imports it)."""

from __future__ import annotations

from collections.abc import Callable

from ros_lnn_lab.harness import faults, faults_dac, faults_reliability, faults_safety
from ros_lnn_lab.harness.faults import Target

TARGETS: dict[str, Callable[[], Target]] = {
    "servo_lnn": faults.servo_lnn_target,
    "sim": faults.sim_target,
    "dac_controller": faults.dac_controller_target,
    "effort_watchdog": faults_safety.effort_watchdog_target,
    "effort_observer": faults_reliability.effort_observer_target,
}
#: The cases per target: the original ones in faults.py, those of the safety work (safety stops,
#: deletes, string bounds, paths, workspace, the watchdog) in faults_safety.py, those of hours of running
#: (the observer, absurd finite magnitudes, attitudes, the protective stop) in faults_reliability.py, the
#: controller's own (unusable joint states, law II trajectories, singular poses, sets at the edges,
#: configure failures) in faults_dac.py.
CASES: dict[str, Callable[[], list]] = {
    "servo_lnn": lambda: (
        faults.servo_lnn_cases() + faults_safety.servo_lnn_cases() + faults_reliability.servo_lnn_cases()
    ),
    "sim": lambda: faults.sim_cases() + faults_safety.sim_cases(),
    "dac_controller": lambda: (
        faults.dac_controller_cases()
        + faults_safety.dac_controller_cases()
        + faults_reliability.dac_controller_cases()
        + faults_dac.dac_controller_cases()
    ),
    "effort_watchdog": faults_safety.effort_watchdog_cases,
    "effort_observer": faults_reliability.effort_observer_cases,
}
