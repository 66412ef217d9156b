"""dac_controller's own fault cases (they were a second, in-process rig in
test/nodes/test_dac_node_faults.py; issue 16): joint states the controller cannot use, trajectories
under law II, singular configurations, parameter sets at the edges and configure failures. Each runs
through the :class:`~ros_lnn_lab.harness.faults.Driver` like every other case: the node alive in its own
process, its services answering, every output finite, the case counted (or refused with its reason),
normal output resuming.

A case that needs the controller configured otherwise (``law: pose``; ``ee_attitude`` with no task
damping) cleans it up, sets the parameters, configures and activates it, checks its count inside the
action (configure starts the counters afresh), and puts the defaults back.
"""

from __future__ import annotations

import math
import time

from ros_lnn_lab.harness.faults import (
    ARM_JOINTS,
    ARM_POSE,
    AcceptedBadValue,
    Driver,
    _send,
    bind,
)
from ros_lnn_lab.harness.faults_safety import _arm_msg, _pose, _send_quiet

NAN, INF = math.nan, math.inf
EFFORTS = "dac_controller/joint_effort_command"


def _arm_trajectory(names=ARM_JOINTS, points=((0.5, ARM_POSE, None), (1.0, ARM_POSE, None))):
    """A joint_trajectory of ``(time_from_start, positions, velocities or None)`` points."""

    def build(driver, i):
        from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

        from ros_lnn.nodes.stamps import seconds_to_duration

        msg = JointTrajectory(joint_names=list(names))
        for t, q, v in points:
            point = JointTrajectoryPoint(positions=[float(x) for x in q])
            if v is not None:
                point.velocities = [float(x) for x in v]
            point.time_from_start = seconds_to_duration(t)
            msg.points.append(point)
        return msg

    return build


def _defaults(names) -> dict:
    from ros_lnn.nodes.dac_controller.parameters import PARAMETERS

    return {name: PARAMETERS.params[name].default for name in names}


def _configured_with(params: dict, inject, counter: str, output_after: bool = False):
    """The node configured with ``params``; ``inject(driver, target)`` must be counted in ``counter``
    (else an accepted bad value), with ``output_after`` an effort command published after it; then the
    defaults of ``params`` back, configured and active."""

    def action(driver: Driver, target: str):
        driver.pause_stream(target)
        try:
            driver.clean_up(target)
            for name, value in params.items():
                reply = driver.set_parameter(target, name, value)
                assert reply is not None and reply[0], (
                    f"{name}={value!r} not taken while unconfigured: {reply}"
                )
            assert driver.transition(target, "configure"), f"configure with {params} refused"
            assert driver.transition(target, "activate"), "activate refused"
            time.sleep(0.05)
            before = driver.counts(target)
            since = time.monotonic()
            inject(driver, target)
            if not driver.wait_counted(target, [counter], before, timeout=10.0):
                raise AcceptedBadValue(f"not counted in {counter} with {params}")
            if output_after and driver.wait_output(target, EFFORTS, bool, since, 10.0) is None:
                raise AssertionError("no effort command after the case")
        finally:
            driver.pause_stream(target)
            driver.clean_up_from_any_state(target)
            for name, value in _defaults(params).items():
                driver.set_parameter(target, name, value)
            assert driver.transition(target, "configure"), "the node did not configure again"
            assert driver.transition(target, "activate"), "activate refused"
            driver.stream_on[target] = True

    return action


def _under_law_pose(build):
    """A trajectory on ~/joint_trajectory under law II (pose): counted as bad_trajectory."""

    def inject(driver: Driver, target: str):
        driver.publish(target, "dac_controller/joint_trajectory", build(driver, 0))

    return _configured_with({"law": "pose"}, inject, "bad_trajectory")


def _then_state(*builds):
    """Publish each ``(topic, build)`` in turn, 0.2 s apart (a target, then the joint state it acts on)."""

    def inject(driver: Driver, target: str):
        for k, (topic, build) in enumerate(builds):
            if k:
                time.sleep(0.2)
            driver.publish(target, topic, build(driver, 0))

    return inject


def _get_parameter(driver: Driver, target: str, name: str):
    from rcl_interfaces.srv import GetParameters
    from rclpy.parameter import parameter_value_to_python

    reply = driver.call(target, "get_parameters", GetParameters, GetParameters.Request(names=[name]))
    assert reply is not None, f"get_parameters({name}): no answer"
    return parameter_value_to_python(reply.values[0])


def _same(before, after) -> bool:
    nan = isinstance(before, float) and math.isnan(before)
    return after == before or (nan and isinstance(after, float) and math.isnan(after))


def _refused_and_kept(parameter: str, value):
    """A set at the edge: refused, its one-line reason naming the parameter, the value as it was."""

    def action(driver: Driver, target: str):
        before = _get_parameter(driver, target, parameter)
        reply = driver.set_parameter(target, parameter, value)
        assert reply is not None, f"set_parameters({parameter}) got no answer"
        if reply[0]:
            raise AcceptedBadValue(f"{parameter}={value!r} was accepted")
        assert parameter in reply[1] and "\n" not in reply[1], f"reason {reply[1]!r}"
        after = _get_parameter(driver, target, parameter)
        if not _same(before, after):
            raise AcceptedBadValue(f"{parameter} changed from {before!r} to {after!r}")

    return action


def _configure_fails(driver: Driver, target: str, words: str) -> None:
    """configure must fail, one logged line saying ``words``."""
    log_before = len(driver.procs[target].log)
    assert driver.transition(target, "configure") is False, f"configure took it ({words} expected)"
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        if any(
            "configure failed" in line and words in line for line in driver.procs[target].log[log_before:]
        ):
            return
        time.sleep(0.02)
    raise AssertionError(f"no 'configure failed: ... {words}' line in the node's output")


def _lifecycle_abuse_and_configure_failures():
    """Deactivate twice, clean up; a broken URDF and a forged residual model each fail configure saying
    why; with both put right the node configures and runs again."""

    def action(driver: Driver, target: str):
        from ros_lnn.shipped import demo_arm_path

        driver.pause_stream(target)
        try:
            assert driver.transition(target, "deactivate"), "deactivate refused"
            assert driver.transition(target, "deactivate") is not None, "deactivate twice: no answer"
            assert driver.transition(target, "cleanup"), "cleanup refused"
            driver.set_parameter(target, "robot_description", "<robot name='x'><link name='a'")
            _configure_fails(driver, target, "not valid URDF")
            forged = driver.workdir / "forged_residual.onnx"
            forged.write_bytes(b"not an onnx file")
            driver.set_parameter(target, "robot_description", demo_arm_path().read_text())
            driver.set_parameter(target, "residual_model", str(forged))
            _configure_fails(driver, target, "not a readable ONNX model")
        finally:
            driver.clean_up_from_any_state(target)
            driver.set_parameter(target, "residual_model", "")
            driver.set_parameter(target, "robot_description", "")
            assert driver.transition(target, "configure"), "the node did not configure again"
            assert driver.transition(target, "activate"), "activate refused"
            driver.stream_on[target] = True

    return action


#: Sets at the edges while active: each refused in one line naming the parameter, the value kept.
EDGE_SETS = [
    ("kd_linear", NAN),
    ("kd_linear", INF),
    ("kd_linear", 1e308),
    ("kd_linear", -1.0),
    ("lambda_position", 0.0),
    ("lambda_attitude", INF),
    ("task_damping", NAN),
    ("obstacle_gain", -2.0),
    ("force_scale", 1e308),
    ("residual_limit", [-1.0]),
    ("residual_limit", [NAN]),
    ("law", "pose"),
    ("watchdog_period_s", 0.0),
    ("marker_period_s", INF),
    ("diagnostics_period_s", 1e-15),
    ("robot_description", "<robot/>"),
    ("input_queue_depth", 0),
    ("state_timeout_s", -1.0),
]


def dac_controller_cases():
    state, target = "joint_states", "dac_controller/ee_target"
    q0, joints = ARM_POSE, ARM_JOINTS

    def empty(driver, i):
        from sensor_msgs.msg import JointState

        return JointState()

    def without_velocities(driver, i):
        from sensor_msgs.msg import JointState

        from ros_lnn.nodes.stamps import ns_to_stamp

        msg = JointState(name=list(joints), position=list(q0))
        msg.header.stamp = ns_to_stamp(driver.now_ns())
        return msg

    def quiet(build, counter):
        return _send_quiet(state, build, until_counted=counter)

    trajectory = _arm_trajectory
    cases = [
        (
            "joint_states 1e308",
            quiet(_arm_msg(q=(1e308,) * 5), "bad_joint_state"),
            "count:bad_joint_state",
            "",
        ),
        (
            "joint_states arrays shorter than the names",
            quiet(_arm_msg(q=q0[:4], qd=(0.0,) * 4), "bad_joint_state"),
            "count:bad_joint_state",
            "",
        ),
        (
            "joint_states missing a joint, one of another device",
            quiet(_arm_msg(names=joints[:4] + ("other",)), "partial"),
            "count:partial",
            "held for joint_state_merge_window_s, dropped without a partner",
        ),
        ("joint_states empty", quiet(empty, "bad_joint_state"), "count:bad_joint_state", ""),
        (
            "joint_states without velocities",
            quiet(without_velocities, "bad_joint_state"),
            "count:bad_joint_state",
            "",
        ),
        (
            "ee_target 100 m away",
            _send(target, _pose(100.0, 0.0, 0.0)),
            "count:bad_target",
            "beyond the arm's reach (issue 23)",
        ),
        (
            "joint_trajectory inf velocity (law II)",
            _under_law_pose(trajectory(points=((0.5, q0, [INF] * 5), (1.0, q0, [0.0] * 5)))),
            "ok",
            "",
        ),
        (
            "joint_trajectory NaN velocity (law II)",
            _under_law_pose(trajectory(points=((0.5, q0, [NAN] * 5), (1.0, q0, [0.0] * 5)))),
            "ok",
            "",
        ),
        (
            "joint_trajectory times not increasing (law II)",
            _under_law_pose(trajectory(points=((1.0, q0, None), (0.5, q0, None)))),
            "ok",
            "",
        ),
        (
            "joint_trajectory missing a joint (law II)",
            _under_law_pose(trajectory(names=joints[:4] + ("x",))),
            "ok",
            "",
        ),
        (
            "joint_trajectory duplicated name (law II)",
            _under_law_pose(trajectory(names=joints + ("joint2",), points=((0.5, q0 + (0.0,), None),))),
            "ok",
            "",
        ),
        (
            "joint_trajectory of 20 000 points (law II)",
            _under_law_pose(trajectory(points=[(0.001 * k, q0, None) for k in range(1, 20_001)])),
            "ok",
            "",
        ),
        (
            "joint_trajectory NaN position (law II)",
            _under_law_pose(trajectory(points=((0.5, [NAN] * 5, None),))),
            "ok",
            "",
        ),
        (
            "home pose, attitude task without damping",
            _configured_with(
                {"ee_attitude": True, "task_damping": 0.0},
                _then_state(
                    (target, _pose(0.5, 0.1, 0.2, (1.0, 0.0, 0.0, 0.0))),
                    (state, _arm_msg(q=(0.0,) * 5)),
                ),
                "singular_damped",
                output_after=True,
            ),
            "ok",
            "singular: damped, not fatal",
        ),
        (
            "home pose, position task",
            quiet(_arm_msg(q=(0.0,) * 5), "processed"),
            "count:processed",
            "singular for the attitude only: processed",
        ),
        *(
            (f"{name}={value!r} refused, kept", _refused_and_kept(name, value), "refused", "")
            for name, value in EDGE_SETS
        ),
        ("lifecycle abuse, configure failures say why", _lifecycle_abuse_and_configure_failures(), "ok", ""),
    ]
    return bind("dac_controller", cases)


__all__ = ["EDGE_SETS", "dac_controller_cases"]
