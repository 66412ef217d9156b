"""Fault cases of issue 23 ("safe when things go wrong"), added to the suite of :mod:`.faults`:

* safety stops: the inputs stop (and, with ``use_sim_time``, ``/clock`` with them) → zero efforts
  within the timeout (dac_controller, effort_watchdog), a stale ERROR in /diagnostics (servo_lnn); a
  stop that does not come is a *missed stop*;
* the effort watchdog as the last line: wrong-sized, empty, huge and non-finite commands are counted
  and answered by zeros; its parameters cannot be set or deleted;
* parameters that cannot be broken: deleting a declared parameter, a 1 MiB string, 5 000-entry lists,
  ``latency_log`` naming a FIFO, a device, a directory or a missing directory — each must be refused
  (else an *accepted bad value*);
* targets: non-finite, beyond the arm's reach, inputs the law does not use (counted);
* joint limits (dac_controller): a joint state beyond a position limit or 1.5 × a velocity limit → the
  protective stop (a zero port, efforts that brake and hold), latched (still stopped after a good
  state), /diagnostics ERROR naming the joint, reset by deactivate + activate; limit overrides that
  cannot hold are refused;
* models too large (servo_lnn, dac_controller's learned port): a model over ``model_max_mb`` or
  ``model_max_nodes`` fails configure in one line naming the limit, before it is loaded.
"""

from __future__ import annotations

import math
import os
import time

from ros_lnn_lab.harness.faults import (
    ARM_JOINTS,
    ARM_POSE,
    AcceptedBadValue,
    Driver,
    MissedStop,
    Target,
    _refused,
    _send,
    _state_msg,
    bind,
)

MIB = "x" * (1 << 20)
WATCHDOG_TIMEOUT_S = 0.1
DAC_STATE_TIMEOUT_S = 0.5  # dac_controller_target's state_timeout_s
SERVO_INPUT_TIMEOUT_S = 1.0  # servo_lnn_target's input_timeout_s


def _zeros(values) -> bool:
    return bool(values) and not any(values)


def _stream_stops(topic: str, timeout_s: float, check=_zeros, clock: bool = False, extra: dict | None = None):
    """Stop the target's normal input (and /clock when ``clock``: the target restarted with
    ``use_sim_time`` for the case) and wait for the stop on ``topic`` within ``timeout_s`` + 0.5 s."""

    def action(driver: Driver, target: str):
        if clock:
            driver.start(target, dict(extra or {}, use_sim_time=True))
        try:
            if clock:  # 0.5 s of a running simulator: /clock at wall time, the normal stream on
                until = time.monotonic() + 0.5
                while time.monotonic() < until:
                    driver.publish_clock(driver.now_ns())
                    time.sleep(0.01)
            driver.pause_stream(target)
            since = time.monotonic()
            waited = driver.wait_output(target, topic, check, since, timeout_s + 0.5)
            if waited is None:
                raise MissedStop(
                    f"no stop on {topic} within {timeout_s + 0.5:.1f} s after the inputs stopped"
                )
        finally:
            driver.stream_on[target] = True
            if clock:
                driver.start(target)  # back to the wall clock for the next case

    return action


def _stale_error(timeout_s: float):
    def action(driver: Driver, target: str):
        driver.pause_stream(target)
        since = time.monotonic()
        try:
            while time.monotonic() < since + timeout_s + 1.0:
                status = driver.counts(target)
                if status.get("_level") == 2 and "stale" in status.get("_message", ""):
                    return
                time.sleep(0.01)
            raise MissedStop(f"no stale ERROR in /diagnostics within {timeout_s + 1.0:.1f} s")
        finally:
            driver.stream_on[target] = True

    return action


def _stop_cases(stream: str, stopped: str, topic: str, timeout_s: float, note: str) -> list:
    """The two cases of a stopped input ``stream``: alone, then with /clock (use_sim_time); each must
    give ``stopped`` on ``topic`` within ``timeout_s`` on the steady clock."""
    return [
        (f"{stream} stop: {stopped}", _stream_stops(topic, timeout_s), "ok", note),
        (
            f"/clock and {stream} stop together",
            _stream_stops(topic, timeout_s, clock=True),
            "ok",
            f"use_sim_time: {stopped} on the steady clock",
        ),
    ]


def _deleted(parameter: str):
    """``ros2 param delete``: a set of type NOT_SET; must be refused (the node reads every parameter)."""

    def action(driver: Driver, target: str):
        from rclpy.parameter import Parameter

        reply = driver.set_parameter(target, parameter, Parameter(parameter))
        assert reply is not None, f"delete {parameter}: no answer"
        if reply[0]:
            raise AcceptedBadValue(f"delete of {parameter} was accepted")
        assert "cannot be deleted" in reply[1] or "read-only" in reply[1], reply[1]

    return action


def _unconfigured_set_refused(parameter: str, value, words: str):
    """Set a configure-time parameter on an unconfigured node (where it may change): the value itself
    must be refused; the node is configured and activated again afterwards."""

    def action(driver: Driver, target: str):
        driver.pause_stream(target)
        try:
            driver.clean_up(target)
            reply = driver.set_parameter(target, parameter, value)
            assert reply is not None, f"set {parameter}: no answer"
            if reply[0]:
                driver.set_parameter(target, parameter, "")
                raise AcceptedBadValue(f"{parameter}={value!r} was accepted")
            assert words in reply[1], f"reason {reply[1]!r} lacks {words!r}"
        finally:
            state = driver.state(target)
            if state == "unconfigured":
                driver.transition(target, "configure")
            if driver.state(target) == "inactive":
                driver.transition(target, "activate")
            driver.stream_on[target] = True

    return action


def _fifo_path(driver: Driver) -> str:
    path = driver.workdir / "latency_fifo.npz"
    if not path.exists():
        os.mkfifo(path)
    return str(path)


def _latency_log_refused(kind: str):
    def action(driver: Driver, target: str):
        path = {
            "fifo": _fifo_path(driver) if kind == "fifo" else "",
            "device": "/dev/null",
            "directory": str(driver.workdir),
            "missing directory": str(driver.workdir / "nowhere" / "log.npz"),
        }[kind]
        _unconfigured_set_refused("latency_log", path, "latency_log")(driver, target)

    return action


# -- servo_lnn ------------------------------------------------------------------------------------
def servo_lnn_cases():
    deletes = [
        "marker_frames",
        "free_joint_forces",
        "frame_id",
        "model_path",
        "latency_log",
        "marker_axes",
        "marker_frame",
        "servo_joints",
        "force_scale",
    ]
    cases = [(f"delete {name}", _deleted(name), "refused", "") for name in deletes]
    cases += [
        ("frame_id of 1 MiB", _refused("frame_id", MIB, "at most 1024"), "refused", ""),
        ("marker_frame of 1 MiB", _refused("marker_frame", MIB, "at most 1024"), "refused", ""),
        ("marker_frames of 5000", _refused("marker_frames", ["f"] * 5000, "at most 4096"), "refused", ""),
        ("marker_frames entry of 1 MiB", _refused("marker_frames", [MIB], "at most 1024"), "refused", ""),
        ("latency_log a FIFO", _latency_log_refused("fifo"), "refused", "would block the exit"),
        ("latency_log /dev/null", _latency_log_refused("device"), "refused", ""),
        ("latency_log a directory", _latency_log_refused("directory"), "refused", ""),
        ("latency_log in a missing directory", _latency_log_refused("missing directory"), "refused", ""),
        (
            "model_path of 1 MiB",
            _unconfigured_set_refused("model_path", MIB, "at most 4096"),
            "refused",
            "",
        ),
        (
            "joint_states stop: stale ERROR",
            _stale_error(SERVO_INPUT_TIMEOUT_S),
            "ok",
            "diagnostics on the steady clock",
        ),
    ]
    return bind("servo_lnn", cases) + servo_lnn_model_limit_cases()


# -- sim ------------------------------------------------------------------------------------------
def sim_cases():
    cases = [(f"delete {name}", _deleted(name), "refused", "") for name in ("frame_id", "effort_timeout_s")]
    cases += [
        ("delete effort_joints", _deleted("effort_joints"), "refused", ""),
        ("frame_id of 1 MiB", _refused("frame_id", MIB, "at most 1024"), "refused", ""),
    ]
    return bind("sim", cases)


# -- dac_controller ------------------------------------------------------------------------------
def _pose(x, y=0.0, z=0.3, quat=(0.0, 0.0, 0.0, 0.0), frame="world"):
    def build(driver, i):
        from geometry_msgs.msg import PoseStamped

        msg = PoseStamped()
        msg.header.frame_id = frame
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = float(x), float(y), float(z)
        o = msg.pose.orientation
        o.w, o.x, o.y, o.z = (float(v) for v in quat)
        return msg

    return build


def _arm_msg(q=ARM_POSE, qd=(0.0,) * 5, names=ARM_JOINTS, stamp_offset_s=0.0):
    def build(driver, i):
        from sensor_msgs.msg import JointState

        from ros_lnn.nodes.stamps import ns_to_stamp

        msg = JointState(name=list(names), position=[float(v) for v in q], velocity=[float(v) for v in qd])
        msg.header.stamp = ns_to_stamp(driver.now_ns() + int(stamp_offset_s * 1e9))
        return msg

    return build


def _send_quiet(topic: str, build, repeat: int = 3, until_counted: str = ""):
    """``_send`` with the normal stream paused: dac_controller keeps the newest joint state only
    (input_queue_depth 1), so a bad state sent between normal ones may be superseded before it is read.
    ``until_counted``: stop sending once that count rose — a best-effort input may lose a message, and
    the case checks that what arrives is counted, not that DDS never drops."""

    def action(driver: Driver, target: str):
        driver.pause_stream(target)
        try:
            time.sleep(0.02)
            before = driver.counts(target)
            for i in range(repeat):
                driver.publish(target, topic, build(driver, i))
                if until_counted and driver.wait_counted(target, [until_counted], before, timeout=1.0):
                    return
                time.sleep(0.01)
        finally:
            driver.stream_on[target] = True

    return action


def _law_iii_trajectory(driver, i):
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    return JointTrajectory(
        joint_names=list(ARM_JOINTS), points=[JointTrajectoryPoint(positions=list(ARM_POSE))]
    )


def dac_controller_cases():
    nan, inf = math.nan, math.inf
    target = "dac_controller/ee_target"
    cases = [
        ("ee_target NaN", _send(target, _pose(nan)), "count:bad_target", ""),
        ("ee_target inf", _send(target, _pose(0.3, inf)), "count:bad_target", ""),
        ("ee_target x 1e300", _send(target, _pose(1e300)), "count:bad_target", "beyond the reach"),
        ("ee_target 5 m away", _send(target, _pose(5.0)), "count:bad_target", "beyond the reach"),
        ("ee_target z -1e300", _send(target, _pose(0.3, 0.0, -1e300)), "count:bad_target", ""),
        (
            "ee_target quaternion 1e308",
            _send(target, _pose(0.3, quat=(1e308, 1e308, 0.0, 0.0))),
            "count:bad_target",
            "",
        ),
        ("ee_target unknown frame", _send(target, _pose(0.3, frame="camera")), "count:bad_target", ""),
        ("ee_target within reach", _send(target, _pose(0.3, 0.1, 0.5)), "ok", "taken"),
        (
            "joint_trajectory under law III",
            _send("dac_controller/joint_trajectory", _law_iii_trajectory, repeat=3),
            "count:unused_input",
            "counted, logged once",
        ),
        (
            "joint_states NaN",
            _send_quiet("joint_states", _arm_msg(q=(nan, 0, 0, 0, 0))),
            "count:bad_joint_state",
            "",
        ),
        (
            "joint_states inf velocity",
            _send_quiet("joint_states", _arm_msg(qd=(0, inf, 0, 0, 0))),
            "count:bad_joint_state",
            "",
        ),
        (
            "joint_states missing a joint (a part: held for merging, no effort from it)",
            _send_quiet("joint_states", _arm_msg(q=ARM_POSE[:4], qd=(0,) * 4, names=ARM_JOINTS[:4])),
            "count:partial",
            "",
        ),
        (
            "joint_states duplicated name",
            _send_quiet("joint_states", _arm_msg(names=ARM_JOINTS[:4] + ("joint1",))),
            "count:duplicate_names",
            "",
        ),
        (
            "joint_states stamped 10 s ago",
            _send_quiet("joint_states", _arm_msg(stamp_offset_s=-10.0)),
            "count:old_stamp",
            "",
        ),
        (
            "joint_states stamped +1 h",
            _send_quiet("joint_states", _arm_msg(stamp_offset_s=3600.0)),
            "count:future_stamp",
            "",
        ),
        (
            "joint_states flood 2000",
            _send("joint_states", _arm_msg(), repeat=2000),
            "ok",
            "",
        ),
        (
            "crane joint_states to the arm",  # none of its joints: another device's, ignored and counted
            _send_quiet("joint_states", lambda d, i: _state_msg(d, i)),
            "count:other_joints",
            "",
        ),
        *_stop_cases(
            "joint_states",
            "zero efforts",
            "dac_controller/joint_effort_command",
            DAC_STATE_TIMEOUT_S,
            "stale-state watchdog on the steady clock",
        ),
        ("gravity deleted", _deleted("gravity"), "refused", ""),
        ("residual_limit deleted", _deleted("residual_limit"), "refused", ""),
        ("kd_linear deleted", _deleted("kd_linear"), "refused", ""),
        ("frame_id deleted", _deleted("frame_id"), "refused", ""),
        ("joint_names deleted", _deleted("joint_names"), "refused", ""),
        ("obstacles deleted", _deleted("obstacles"), "refused", ""),
        ("residual_limit of 5000", _refused("residual_limit", [1.0] * 5000, "4096"), "refused", ""),
        ("kd_linear 1e7", _refused("kd_linear", 1e7, "<= 1e+06"), "refused", ""),
        ("kd_linear -1", _refused("kd_linear", -1.0, "> 0"), "refused", ""),
        ("task_damping NaN", _refused("task_damping", nan, "finite"), "refused", ""),
        (
            "fault_reaction while active",
            _refused("fault_reaction", "warn", "read at configure"),
            "refused",
            "",
        ),
    ]
    return bind("dac_controller", cases) + dac_controller_limit_cases()


def _limit_violation(q=ARM_POSE, qd=(0.0,) * 5, words: str = ""):
    """A joint state beyond a limit: the protective stop — a zero port (the law no longer commands) —
    and an ERROR naming ``words`` (else a missed stop), still stopped after a good state (latched), and
    normal output again after deactivate + activate."""

    def action(driver: Driver, target: str):
        topic = "dac_controller/port_command"
        driver.pause_stream(target)
        try:
            time.sleep(0.02)
            since = time.monotonic()
            for i in range(3):
                driver.publish(target, "joint_states", _arm_msg(q=q, qd=qd)(driver, i))
                time.sleep(0.01)
            if driver.wait_output(target, topic, _zeros, since, 2.0) is None:
                raise MissedStop("no protective stop (zero port) after a joint state beyond a limit")
            deadline = time.monotonic() + 3.0
            while True:
                status = driver.counts(target)
                message = status.get("_message", "")
                if status.get("_level") == 2 and "joint limit violation" in message and words in message:
                    break
                if time.monotonic() > deadline:
                    raise MissedStop(f"no /diagnostics ERROR naming {words!r} (last: {message!r})")
                time.sleep(0.01)
            since = time.monotonic()
            driver.publish(target, "joint_states", _arm_msg()(driver, 0))
            if driver.wait_output(target, topic, lambda v: bool(v), since, 2.0) is None:
                raise AssertionError("no answer to a good joint state")
            if driver.wait_output(target, topic, lambda v: bool(v) and any(v), since, 0.3) is not None:
                raise AcceptedBadValue("the law commanded again before a reset: the stop was not latched")
        finally:
            assert driver.transition(target, "deactivate"), "deactivate refused"
            assert driver.transition(target, "activate"), "activate refused"
            driver.stream_on[target] = True

    return action


def _model_over_limit(model_parameter: str, limit: str, value, model: str = ""):
    """Set ``limit`` and ``model_parameter`` (the shipped crane model unless ``model``) on the cleaned-up
    node: configure must fail, in one logged line naming the limit; then both restored, active again."""

    def action(driver: Driver, target: str):
        from ros_lnn.inference.runtime import default_model_path
        from ros_lnn.nodes.model_params import MODEL_LIMIT_PARAMETERS

        default = {p.name: p.default for p in MODEL_LIMIT_PARAMETERS}[limit]
        path = model or str(default_model_path())
        before = len(driver.procs[target].log)
        driver.pause_stream(target)
        try:
            driver.clean_up(target)
            for name, v in ((limit, value), (model_parameter, path)):
                reply = driver.set_parameter(target, name, v)
                assert reply is not None and reply[0], f"{name} not taken while unconfigured: {reply}"
            if driver.transition(target, "configure"):
                raise AcceptedBadValue(f"a model over {limit}={value} was configured")
        finally:
            driver.clean_up_from_any_state(target)
            driver.set_parameter(target, model_parameter, "")
            driver.set_parameter(target, limit, default)
            assert driver.transition(target, "configure"), "the node did not configure again"
            assert driver.transition(target, "activate"), "activate refused"
            driver.stream_on[target] = True
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            log = driver.procs[target].log[before:]
            if any("configure failed" in line and limit in line for line in log):
                return
            time.sleep(0.02)
        raise AssertionError(f"no one-line configure error naming {limit}")

    return action


def dac_controller_limit_cases():
    beyond = list(ARM_POSE)
    beyond[2] = 3.2  # joint3's URDF limit is 3.1
    return bind(
        "dac_controller",
        [
            (
                "joint_states beyond a position limit",
                _limit_violation(q=beyond, words="joint3 position"),
                "count:limit_violation",
                "protective stop, latched until re-activation",
            ),
            (
                "joint_states at 1.5x a velocity limit",
                _limit_violation(qd=(0.0, 9.0, 0.0, 0.0, 0.0), words="joint2 velocity"),
                "count:limit_violation",
                "URDF velocity 6 rad/s; violation beyond 1.2x",
            ),
            (
                "position_limits lower > upper",
                _unconfigured_set_refused("position_limits", [1.0, 0.0] * 5, "lower < upper"),
                "refused",
                "",
            ),
            (
                "learned port over model_max_nodes",
                _model_over_limit("residual_model", "model_max_nodes", 10),
                "refused",
                "refused before ONNX Runtime loads it",
            ),
        ],
    )


def servo_lnn_model_limit_cases():
    return bind(
        "servo_lnn",
        [
            (
                "model over model_max_mb",
                _model_over_limit("model_path", "model_max_mb", 0.01),
                "refused",
                "the shipped 76 kB model against a 10 kB limit",
            ),
            (
                "model over model_max_nodes",
                _model_over_limit("model_path", "model_max_nodes", 10),
                "refused",
                "",
            ),
        ],
    )


# -- effort_watchdog -------------------------------------------------------------------------------
def _command(values):
    def build(driver, i):
        from std_msgs.msg import Float64MultiArray

        return Float64MultiArray(data=[float(v) for v in values])

    return build


def _bad_command(values):
    """One bad command for the watchdog (best-effort input), resent while it is not counted."""
    return _send_quiet("commands_in", _command(values), until_counted="dropped")


def _watchdog_normal(driver: Driver, target: Target, k: int) -> None:
    from std_msgs.msg import Float64MultiArray

    driver.publish(target.name, "commands_in", Float64MultiArray(data=[0.1 * math.sin(0.01 * k)] * 5))


def effort_watchdog_target() -> Target:
    return Target(
        "effort_watchdog",
        "ros_lnn.nodes.effort_watchdog",
        {
            "joints": list(ARM_JOINTS),
            "timeout_s": WATCHDOG_TIMEOUT_S,
            "period_s": 0.02,
            "diagnostics_period_s": 0.1,
        },
        False,
        inputs={"commands_in": "std_msgs/Float64MultiArray"},
        outputs={"commands_out": "std_msgs/Float64MultiArray"},
        heartbeat="commands_out",
        normal=_watchdog_normal,
    )


def _immediate_zeros(values):
    """A bad command is answered by zeros of the right size (5). The watchdog runs with a timeout far
    beyond the wait for the case, so the zeros can only be the answer to the bad command, however slow
    the machine (how fast the answer comes is ``ros-lnn bench``'s business, not a pass/fail here)."""

    def action(driver: Driver, target: str):
        driver.start(target, {"timeout_s": 10.0})
        try:
            driver.pause_stream(target)
            time.sleep(0.1)  # commands in flight are forwarded before the bad one
            since = time.monotonic()
            driver.publish(target, "commands_in", _command(values)(driver, 0))
            zeros_of_5 = lambda v: len(v) == 5 and not any(v)  # noqa: E731
            waited = driver.wait_output(target, "commands_out", zeros_of_5, since, 5.0)
            if waited is None:
                raise MissedStop("no zeros of the right size after a bad command")
        finally:
            driver.stream_on[target] = True
            driver.start(target)  # back to the case's timeout for the next case

    return action


def effort_watchdog_cases():
    nan, inf = math.nan, math.inf
    cases = [
        ("empty command", _bad_command([]), "count:dropped", ""),
        ("3 values for 5 joints", _bad_command([1.0, 2.0, 3.0]), "count:dropped", ""),
        ("6 values for 5 joints", _bad_command([1.0] * 6), "count:dropped", ""),
        ("NaN in a command", _bad_command([0, nan, 0, 0, 0]), "count:dropped", ""),
        ("inf in a command", _bad_command([0, 0, -inf, 0, 0]), "count:dropped", ""),
        ("1000 values for 5 joints", _bad_command([0.0] * 1000), "count:dropped", ""),
        ("a bad command answered by zeros", _immediate_zeros([1.0, 2.0, 3.0]), "ok", "zeros of size 5"),
        ("a NaN command answered by zeros", _immediate_zeros([nan] * 5), "ok", ""),
        *_stop_cases("commands", "zeros", "commands_out", WATCHDOG_TIMEOUT_S, "on the steady clock"),
        ("delete joints", _deleted("joints"), "refused", ""),
        ("delete timeout_s", _deleted("timeout_s"), "refused", ""),
        ("timeout_s live", _refused("timeout_s", 5.0, "read when the node starts"), "refused", ""),
        ("period_s 0 live", _refused("period_s", 0.0, "read when the node starts"), "refused", ""),
        ("joints live", _refused("joints", ["a"], "read when the node starts"), "refused", ""),
    ]
    return bind("effort_watchdog", cases)
