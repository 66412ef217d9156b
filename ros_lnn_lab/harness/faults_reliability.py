"""Fault cases of a robot that runs for hours, added to the suite of :mod:`.faults` and
:mod:`.faults_safety`:

* effort_observer as a target: non-finite, missing and malformed joint states, floods, a stopped
  stream (stale ERROR), parameters it must refuse (live, at configure, deletes, a 1 MiB path);
* absurd magnitudes that are finite: ``free_joint_forces`` of 1e300 (every estimator output went
  non-finite and was dropped), ``effort_gains`` of 1e300, a controller ``stop_rate`` beyond its rule;
* an ``~/ee_target`` whose quaternion is (0, 0, 0, 0) or not of unit length while ``ee_attitude``
  tracks it: ``bad_target``;
* the protective stop's parameters: refused when they cannot hold, the edge of the gains taken.
"""

from __future__ import annotations

import math

from ros_lnn_lab.harness.faults import (
    ARM_JOINTS,
    ARM_POSE,
    AcceptedBadValue,
    Driver,
    Target,
    _accepted_then_restored,
    _lifecycle,
    _refused,
    _send,
    bind,
)
from ros_lnn_lab.harness.faults_safety import MIB, _deleted, _pose, _stale_error, _unconfigured_set_refused

OBSERVER_INPUT_TIMEOUT_S = 1.0


def _arm_state(q=ARM_POSE, qd=(0.0,) * 5, effort=(0.5,) * 5, names=ARM_JOINTS):
    def build(driver, i):
        from sensor_msgs.msg import JointState

        from ros_lnn.nodes.stamps import ns_to_stamp

        msg = JointState(
            name=list(names),
            position=[float(v) for v in q],
            velocity=[float(v) for v in qd],
            effort=[float(v) for v in effort],
        )
        msg.header.stamp = ns_to_stamp(driver.now_ns())
        return msg

    return build


def _wide(n: int):
    """A joint state of ``n`` joints none of which the arm has (over the reader's 64 KiB bound)."""
    return _arm_state(q=(0.1,) * n, qd=(0.0,) * n, effort=(0.0,) * n, names=tuple(f"j{k}" for k in range(n)))


def _observer_normal(driver: Driver, target: Target, k: int) -> None:
    driver.publish(target.name, "joint_states", _arm_state()(driver, k))


def effort_observer_target() -> Target:
    from ros_lnn.shipped import shipped_path

    return Target(
        "effort_observer",
        "ros_lnn.nodes.effort_observer",
        {
            "autostart": True,
            "urdf": str(shipped_path("config", "dac_chain.urdf")),
            "joints": list(ARM_JOINTS),
            "diagnostics_period_s": 0.1,
            "input_timeout_s": OBSERVER_INPUT_TIMEOUT_S,
        },
        True,
        inputs={"joint_states": "sensor_msgs/JointState"},
        outputs={
            "effort_observer/external_effort": "sensor_msgs/JointState",
            "effort_observer/model_effort": "sensor_msgs/JointState",
        },
        heartbeat="effort_observer/external_effort",
        normal=_observer_normal,
    )


def effort_observer_cases():
    nan, inf = math.nan, math.inf
    cases = [
        ("NaN position", _send("joint_states", _arm_state(q=(nan,) + ARM_POSE[1:])), "count:non_finite", ""),
        ("inf effort", _send("joint_states", _arm_state(effort=(0, 0, inf, 0, 0))), "count:non_finite", ""),
        ("effort 1e300", _send("joint_states", _arm_state(effort=(1e300,) * 5), repeat=5), "ok", "finite"),
        ("no efforts", _send("joint_states", _arm_state(effort=())), "count:no_effort", ""),
        ("no velocities", _send("joint_states", _arm_state(qd=())), "count:no_velocity", ""),
        (
            "duplicated joint name",
            _send("joint_states", _arm_state(names=ARM_JOINTS[:4] + ("joint1",))),
            "count:duplicate_joint",
            "",
        ),
        ("5000 joints", _send("joint_states", _wide(5000)), "count:bad_size", "refused before parsing"),
        ("flood 2000", _send("joint_states", _arm_state(), repeat=2000), "ok", ""),
        (
            "joint_states stop: stale ERROR",
            _stale_error(OBSERVER_INPUT_TIMEOUT_S),
            "ok",
            "diagnostics on their timer",
        ),
        ("collision_hold_s NaN", _refused("collision_hold_s", nan, "finite"), "refused", ""),
        ("input_timeout_s 0", _refused("input_timeout_s", 0.0, ">= 0.01"), "refused", ""),
        ("gains while active", _refused("gains", [10.0], "read at configure"), "refused", ""),
        ("delete urdf", _deleted("urdf"), "refused", ""),
        (
            "effort_gains 1e300",
            _unconfigured_set_refused("effort_gains", [1e300] * 5, "<= 1e+06"),
            "refused",
            "every torque would be inf: the observer silent",
        ),
        ("urdf of 1 MiB", _unconfigured_set_refused("urdf", MIB, "at most 4096"), "refused", ""),
        (
            "deactivate, activate while streaming",
            _lifecycle(("deactivate", True), ("activate", True)),
            "ok",
            "starts its integration again",
        ),
    ]
    return bind("effort_observer", cases)


# -- servo_lnn: finite, absurd ----------------------------------------------------------------------
def servo_lnn_cases():
    cases = [
        (
            "free_joint_forces 1e300",
            _refused("free_joint_forces", [1e300], "<= 1e+06"),
            "refused",
            "every output was non-finite and dropped",
        ),
        ("free_joint_forces -1e300", _refused("free_joint_forces", [-1e300], ">= -1e+06"), "refused", ""),
        (
            "free_joint_forces 1e6",
            _accepted_then_restored("free_joint_forces", [1e6], []),
            "ok",
            "the edge: outputs finite",
        ),
    ]
    return bind("servo_lnn", cases)


# -- dac_controller: targets a tracked attitude cannot take, the protective stop's parameters --------
def _attitude_target(quat):
    """The node configured with ee_attitude (cleanup, set, configure, activate): a target with
    ``quat`` (w, x, y, z) must be counted as bad_target (else an accepted bad value); then back."""

    def action(driver: Driver, target: str):
        driver.pause_stream(target)
        try:
            driver.clean_up(target)
            reply = driver.set_parameter(target, "ee_attitude", True)
            assert reply is not None and reply[0], f"ee_attitude not taken while unconfigured: {reply}"
            assert driver.transition(target, "configure") and driver.transition(target, "activate")
            driver.stream_on[target] = True
            before = driver.counts(target)
            driver.publish(target, "dac_controller/ee_target", _pose(0.3, 0.1, 0.5, quat)(driver, 0))
            if not driver.wait_counted(target, ["bad_target"], before, timeout=10.0):
                raise AcceptedBadValue(f"a target with the quaternion {quat} was taken with ee_attitude")
        finally:
            driver.pause_stream(target)
            driver.clean_up_from_any_state(target)
            driver.set_parameter(target, "ee_attitude", False)
            assert driver.transition(target, "configure"), "the node did not configure again"
            assert driver.transition(target, "activate"), "activate refused"
            driver.stream_on[target] = True

    return action


def dac_controller_cases():
    cases = [
        ("ee_target quaternion 0 (ee_attitude)", _attitude_target((0.0, 0.0, 0.0, 0.0)), "ok", "bad_target"),
        ("ee_target quaternion of norm 0.5 (ee_attitude)", _attitude_target((0.5, 0.0, 0.0, 0.0)), "ok", ""),
        ("ee_target quaternion 1e-12 (ee_attitude)", _attitude_target((1e-12, 0.0, 0.0, 0.0)), "ok", ""),
        ("kd_linear 1e6 live", _accepted_then_restored("kd_linear", 1e6, 20.0), "ok", "the edge"),
        ("stop_rate while active", _refused("stop_rate", 100.0, "read at configure"), "refused", ""),
        ("stop_rate 1e9", _unconfigured_set_refused("stop_rate", 1e9, "<= 1000"), "refused", ""),
        (
            "limit_reaction coast",
            _unconfigured_set_refused("limit_reaction", "coast", "one of"),
            "refused",
            "",
        ),
    ]
    return bind("dac_controller", cases)
