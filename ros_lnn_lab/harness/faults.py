"""Fault injection: the nodes, each in its own process, abused over DDS and through their lifecycle and
parameter services by a driver in this process; every case is judged the same way:

* the process is alive afterwards (else: crashed; the harness starts it again);
* its services answer within 1 s (get_parameters, and get_state for lifecycle nodes; else: hung);
* nothing non-finite was published on any output (every number of every message is checked);
* the case was counted: the counter it names grew in the node's /diagnostics, or the parameter set or
  lifecycle transition was refused, or (``"ok"``) the node simply went on;
* normal output resumes: the node's heartbeat output receives new messages after the case.

A :class:`Target` says how to start a node, what it listens to, what it publishes and what normal input
is; a :class:`Case` is a name, a target, an action on the :class:`Driver` and the expectation. Cases for
``servo_lnn`` and ``sim`` are in :func:`servo_lnn_cases` and :func:`sim_cases`; a node adds its own by
registering a target and a case list in :mod:`.fault_registry` (``dac_controller``: a few generic
cases here; its own belong beside its fixes). Used by test/harness/test_node_faults.py (each case once) and by
``ros-lnn bench fault`` (every case, rounds in random order, for a duration).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from rclpy.publisher import Publisher

SERVICE_TIMEOUT_S = 1.0
# How long a case's count and the resumed heartbeat are waited for. Neither is a promise about time (the
# services' answer is, above): a passing case returns the moment they come, and a loaded machine's
# /diagnostics (the counts) and streams may lag by seconds without anything being wrong.
SETTLE_TIMEOUT_S = 30.0


@dataclass
class Target:
    """A node under test: ``module`` runs it (``python -m``), ``params`` its ``-p`` overrides."""

    name: str
    module: str
    params: dict
    lifecycle: bool
    inputs: dict  # topic (relative to the namespace) -> message type name
    outputs: dict  # topic -> message type name, checked for non-finite numbers
    heartbeat: str  # the output that shows normal operation
    normal: Callable | None = None  # normal(driver, target, k) -> publish one good input (k counts)
    remaps: dict = field(default_factory=dict)  # -r FROM:=TO of the node process


@dataclass
class Case:
    name: str
    target: str
    action: Callable  # action(driver) -> None; raises AssertionError when a reply is wrong
    expect: str = "ok"  # "count:key[|key...]", "refused" (checked by the action), "ok"
    description: str = ""


@dataclass
class Verdict:
    case: str
    target: str
    passed: bool = True
    crashed: bool = False
    hung: bool = False
    non_finite: int = 0
    counted: bool = True
    resumed: bool = True
    seconds: float = 0.0
    detail: str = ""
    runs: int = 1
    missed_stop: bool = False  # a safety stop (zero efforts, stale ERROR) did not come in time
    accepted_bad: bool = False  # a value that breaks its rule was taken
    tracebacks: int = 0  # traceback lines the node printed during the case


class MissedStop(AssertionError):
    """A case's safety stop did not come within its time."""


class AcceptedBadValue(AssertionError):
    """A parameter value (or input) that must be refused was taken."""


def message_type(name: str):
    """'sensor_msgs/JointState' -> the class (ros_lnn_msgs types fall back like the nodes do)."""
    from ros_lnn.nodes import messages

    if name == "ENERGY":
        return messages.ENERGY_TYPE
    if name == "PREDICTION":
        return messages.PREDICTION_TYPE
    package, kind = name.split("/")
    module = __import__(f"{package}.msg", fromlist=[kind])
    return getattr(module, kind)


def numbers(msg) -> list:
    """Every float in a message, nested messages and sequences included."""
    found = []
    for name, kind in msg.get_fields_and_field_types().items():
        value = getattr(msg, name)
        if kind in ("double", "float"):
            found.append(value)
        elif kind.startswith(("sequence<double", "sequence<float", "double[", "float[")):
            found.extend(value)
        elif hasattr(value, "get_fields_and_field_types"):
            found.extend(numbers(value))
        elif isinstance(value, (list, tuple)) and value and hasattr(value[0], "get_fields_and_field_types"):
            for item in value:
                found.extend(numbers(item))
    return found


class NodeProcess:
    """One node in its own process, its output drained by a thread (the log is kept)."""

    def __init__(self, target: Target, namespace: str, env: dict, extra: dict | None = None):
        self.target, self.namespace = target, namespace
        params = dict(target.params, **(extra or {}))
        args = [sys.executable, "-m", target.module, "--ros-args", "-r", f"__ns:={namespace}"]
        for old, new in target.remaps.items():
            args += ["-r", f"{old}:={new}"]
        for key, value in params.items():
            args += ["-p", f"{key}:={_param_text(value)}"]
        self.proc = subprocess.Popen(
            args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.log: list[str] = []
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None  # opened with stdout=PIPE
        for line in self.proc.stdout:
            self.log.append(line.rstrip("\n"))

    @property
    def fqn(self) -> str:
        return f"{self.namespace}/{self.target.name}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int:
        import signal

        if self.alive():
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=5)
        return self.proc.returncode


def _param_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_param_text(v) for v in value) + "]"
    return str(value)


class Driver:
    """The harness side: one rclpy node with publishers on the targets' inputs, subscriptions on their
    outputs (default QoS: reliable, depth 10), service clients, and the normal input streams.

    ``one_at_a_time``: a target's node runs only while its cases do (started by the first, stopped when
    a case of another target comes), instead of every node running, and streaming, from the start."""

    def __init__(
        self,
        targets: list[Target],
        env: dict | None = None,
        run_id: str | None = None,
        one_at_a_time: bool = False,
    ):
        import tempfile

        import rclpy

        from ros_lnn.nodes.process import make_executor

        self.env = dict(os.environ if env is None else env)
        self.run_id = run_id or f"f{os.getpid()}"
        self.workdir = Path(tempfile.mkdtemp(prefix="ros_lnn_faults_"))  # forged models; removed by close()
        self.targets = {t.name: t for t in targets}
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context)
        self.node = rclpy.create_node(f"fault_driver_{self.run_id}", context=self.context)
        self.procs: dict[str, NodeProcess] = {}
        self.pubs: dict = {}
        self.received: dict = {}  # fully qualified topic -> count
        self.non_finite: dict = {}  # fully qualified topic -> count
        self.latest: dict = {}  # fully qualified topic -> (monotonic receive time, its numbers)
        self._clock_pub: Publisher[Any] | None = None
        self.diagnostics: dict = {}  # status name -> {key: value}
        self.lock = threading.Lock()
        self.stream_on: dict = {}
        self._stream_turn = threading.Lock()  # held by the streamer from its stream_on check to its publish
        self.k: dict = {}
        self._stop = threading.Event()
        self._executor = make_executor(self.context, "single")
        self._executor.add_node(self.node)
        self._spinner = threading.Thread(target=self._spin, daemon=True)
        self._spinner.start()
        from diagnostic_msgs.msg import DiagnosticArray

        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 50)
        for target in targets:
            self._wire(target)
        self._streamer = threading.Thread(target=self._stream, daemon=True)
        self._streamer.start()
        self.one_at_a_time = one_at_a_time
        if not one_at_a_time:
            for target in targets:
                self.start(target.name)

    # -- plumbing -----------------------------------------------------------------------------
    def namespace(self, target: str) -> str:
        return f"/{self.run_id}_{target}"

    def _spin(self) -> None:
        while not self._stop.is_set():
            try:
                self._executor.spin_once(timeout_sec=0.01)
            except Exception:  # noqa: BLE001 - the driver keeps spinning; a failing callback shows in the verdicts
                pass

    def _wire(self, target: Target) -> None:
        from rclpy.qos import QoSProfile, ReliabilityPolicy

        ns = self.namespace(target.name)
        inputs_qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        for topic, kind in target.inputs.items():
            self.pubs[(target.name, topic)] = self.node.create_publisher(
                message_type(kind), f"{ns}/{topic}", inputs_qos
            )
        for topic, kind in target.outputs.items():
            full = topic if topic.startswith("/") else f"{ns}/{topic}"
            self.received[full] = 0
            self.non_finite[full] = 0
            self.node.create_subscription(
                message_type(kind), full, lambda m, t=full: self._on_output(t, m), 10
            )
        self.stream_on[target.name] = True
        self.k[target.name] = 0

    def _on_output(self, topic: str, msg) -> None:
        values = numbers(msg)
        bad = sum(1 for v in values if not math.isfinite(v))
        with self.lock:
            self.latest[topic] = (time.monotonic(), values)
            self.received[topic] += 1
            if bad:
                self.non_finite[topic] += 1

    def _on_diagnostics(self, msg) -> None:
        with self.lock:
            for status in msg.status:
                values = {kv.key: kv.value for kv in status.values}
                values["_level"] = (
                    int.from_bytes(status.level, "little")
                    if isinstance(status.level, bytes)
                    else int(status.level)
                )
                values["_message"] = status.message
                self.diagnostics[status.name] = values

    def _stream(self) -> None:
        """Normal input at 200 Hz per target (while its stream is on)."""
        while not self._stop.is_set():
            for name, target in self.targets.items():
                with self._stream_turn:
                    if target.normal is not None and self.stream_on.get(name) and name in self.procs:
                        try:
                            target.normal(self, target, self.k[name])
                        except Exception:  # noqa: BLE001 - a publisher torn down mid-run: the next turn publishes again
                            pass
                        self.k[name] += 1
            time.sleep(0.005)

    def pause_stream(self, name: str) -> None:
        """Stop ``name``'s normal input and return once no normal message of it can still be published: a
        streamer turn that saw the stream on before the pause (a loaded machine may hold the thread there
        for tens of ms) has finished, so a message sent now is not superseded by a late normal one."""
        self.stream_on[name] = False
        with self._stream_turn:
            pass

    def publisher(self, target: str, topic: str):
        return self.pubs[(target, topic)]

    def publish(self, target: str, topic: str, msg) -> None:
        self.pubs[(target, topic)].publish(msg)

    def now_ns(self) -> int:
        return time.time_ns()

    def publish_clock(self, ns: int) -> None:
        """One /clock message (for targets started with use_sim_time)."""
        from rosgraph_msgs.msg import Clock

        from ros_lnn.nodes.stamps import ns_to_stamp

        if self._clock_pub is None:
            self._clock_pub = self.node.create_publisher(Clock, "/clock", 10)
        self._clock_pub.publish(Clock(clock=ns_to_stamp(ns)))

    def output_topic(self, name: str, topic: str) -> str:
        return topic if topic.startswith("/") else f"{self.namespace(name)}/{topic}"

    def wait_output(self, name: str, topic: str, predicate, since: float, timeout: float):
        """Seconds from ``since`` until a message on the target's ``topic`` received after ``since``
        met ``predicate(numbers)``; None when none did within ``timeout``."""
        full = self.output_topic(name, topic)
        deadline = since + timeout
        while time.monotonic() < deadline:
            with self.lock:
                entry = self.latest.get(full)
            if entry is not None and entry[0] > since and predicate(entry[1]):
                return entry[0] - since
            time.sleep(0.002)
        return None

    # -- processes ----------------------------------------------------------------------------
    def start(self, name: str, extra: dict | None = None) -> NodeProcess:
        old = self.procs.get(name)
        if old is not None:
            old.stop()
        proc = self.procs[name] = NodeProcess(self.targets[name], self.namespace(name), self.env, extra)
        target = self.targets[name]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not self.heartbeat_after(name, self.received_on(name), 0.2):
            if not proc.alive():
                raise RuntimeError(f"{name} exited at start-up:\n" + "\n".join(proc.log[-20:]))
        if not self.received_on(name):
            raise RuntimeError(
                f"{name} published nothing on {target.heartbeat} within 60 s:\n" + "\n".join(proc.log[-20:])
            )
        return proc

    def focus(self, name: str) -> None:
        """``name``'s node running and the other targets' nodes stopped."""
        for other in [n for n in self.procs if n != name]:
            self.procs.pop(other).stop()
        if name not in self.procs:
            self.start(name)

    def heartbeat_topic(self, name: str) -> str:
        topic = self.targets[name].heartbeat
        return topic if topic.startswith("/") else f"{self.namespace(name)}/{topic}"

    def received_on(self, name: str) -> int:
        with self.lock:
            return self.received[self.heartbeat_topic(name)]

    def heartbeat_after(self, name: str, before: int, timeout: float, count: int = 5) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.received_on(name) >= before + count:
                return True
            time.sleep(0.01)
        return False

    def close(self) -> None:
        self._stop.set()
        for proc in self.procs.values():
            proc.stop()
        self._streamer.join(timeout=5)
        self._spinner.join(timeout=5)
        import shutil

        import rclpy

        self._executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)
        shutil.rmtree(self.workdir, ignore_errors=True)

    # -- services -----------------------------------------------------------------------------
    def call(self, name: str, service: str, srv_type, request, timeout: float = SERVICE_TIMEOUT_S):
        """A service of the target's node; None when no answer came within ``timeout`` seconds."""
        key = (name, service)
        clients = self.__dict__.setdefault("_clients", {})
        client = clients.get(key)
        if client is None:
            client = clients[key] = self.node.create_client(srv_type, f"{self.procs[name].fqn}/{service}")
            client.wait_for_service(timeout_sec=10.0)
        future = client.call_async(request)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not future.done():
            time.sleep(0.002)
        if not future.done():
            future.cancel()
            return None
        return future.result()

    def set_parameter(self, name: str, parameter: str, value, timeout: float = SERVICE_TIMEOUT_S):
        """(successful, reason), or None without an answer."""
        from rcl_interfaces.srv import SetParameters
        from rclpy.parameter import Parameter

        if isinstance(value, Parameter):
            msg = value.to_parameter_msg()
        else:
            msg = Parameter(parameter, value=value).to_parameter_msg()
        reply = self.call(
            name, "set_parameters", SetParameters, SetParameters.Request(parameters=[msg]), timeout
        )
        return None if reply is None else (reply.results[0].successful, reply.results[0].reason)

    def transition(self, name: str, label: str, timeout: float = 5.0):
        """A lifecycle transition by label (configure, activate, deactivate, cleanup, shutdown); its
        success, or None without an answer."""
        from lifecycle_msgs.msg import Transition
        from lifecycle_msgs.srv import ChangeState

        ids = {
            "configure": Transition.TRANSITION_CONFIGURE,
            "activate": Transition.TRANSITION_ACTIVATE,
            "deactivate": Transition.TRANSITION_DEACTIVATE,
            "cleanup": Transition.TRANSITION_CLEANUP,
            "shutdown": Transition.TRANSITION_UNCONFIGURED_SHUTDOWN,
        }
        reply = self.call(
            name,
            "change_state",
            ChangeState,
            ChangeState.Request(transition=Transition(id=ids[label])),
            timeout,
        )
        return None if reply is None else reply.success

    def clean_up(self, name: str) -> None:
        """Take an active node to unconfigured (deactivate, then cleanup), asserting that each is taken."""
        assert self.transition(name, "deactivate"), "deactivate refused"
        assert self.transition(name, "cleanup"), "cleanup refused"

    def clean_up_from_any_state(self, name: str) -> None:
        """Take a node to unconfigured from whatever state it is in (deactivate if active, cleanup if
        inactive), the transitions' answers not checked: the first step of putting a node back."""
        state = self.state(name)
        if state == "active":
            self.transition(name, "deactivate")
            state = "inactive"
        if state == "inactive":
            self.transition(name, "cleanup")

    def state(self, name: str, timeout: float = SERVICE_TIMEOUT_S):
        from lifecycle_msgs.srv import GetState

        reply = self.call(name, "get_state", GetState, GetState.Request(), timeout)
        return None if reply is None else reply.current_state.label

    def responsive(self, name: str) -> bool:
        """Its parameter service (and lifecycle service) answer within SERVICE_TIMEOUT_S each."""
        from rcl_interfaces.srv import GetParameters

        if (
            self.call(name, "get_parameters", GetParameters, GetParameters.Request(names=["use_sim_time"]))
            is None
        ):
            return False
        return not self.targets[name].lifecycle or self.state(name) is not None

    def counts(self, name: str) -> dict:
        with self.lock:
            return dict(self.diagnostics.get(self.procs[name].fqn, {}))

    def wait_counted(self, name: str, keys, before: dict, timeout: float = SETTLE_TIMEOUT_S) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            now = self.counts(name)
            if any(int(now.get(k, 0)) > int(before.get(k, 0)) for k in keys):
                return True
            time.sleep(0.02)
        return False

    # -- one case -----------------------------------------------------------------------------
    def run(self, case: Case) -> Verdict:
        name = case.target
        if self.one_at_a_time:
            self.focus(name)
        verdict = Verdict(case.name, name)
        start = time.monotonic()
        with self.lock:
            bad_before = sum(self.non_finite.values())
        # counters as they stand: from a fresh /diagnostics status
        self.wait_counted(name, ["received", "steps", "processed", "forwarded"], {}, timeout=0.5)
        before = self.counts(name)
        log_before = len(self.procs[name].log)
        try:
            case.action(self)
        except MissedStop as exc:
            verdict.passed, verdict.missed_stop, verdict.detail = False, True, f"missed stop: {exc}"
        except AcceptedBadValue as exc:
            verdict.passed, verdict.accepted_bad, verdict.detail = False, True, f"accepted: {exc}"
        except AssertionError as exc:
            verdict.passed, verdict.detail = False, f"reply: {exc}"
        except Exception as exc:  # noqa: BLE001 - the harness reports, it does not stop
            verdict.passed, verdict.detail = False, f"harness: {type(exc).__name__}: {exc}"
        proc = self.procs[name]
        if case.expect.startswith("count:"):
            verdict.counted = self.wait_counted(name, case.expect[6:].split("|"), before)
        if not proc.alive():
            verdict.crashed = True
        elif not self.responsive(name):
            verdict.hung = True
        else:
            self.stream_on[name] = True
            verdict.resumed = self.heartbeat_after(name, self.received_on(name), SETTLE_TIMEOUT_S)
        time.sleep(0.05)
        with self.lock:
            verdict.non_finite = sum(self.non_finite.values()) - bad_before
        tracebacks = [line for line in proc.log if line.startswith("Traceback")]
        verdict.tracebacks = sum(line.startswith("Traceback") for line in proc.log[log_before:])
        if tracebacks:
            verdict.detail += f" {len(tracebacks)} traceback(s) in the node's output"
        verdict.passed = (
            verdict.passed
            and not verdict.crashed
            and not verdict.hung
            and not verdict.non_finite
            and verdict.counted
            and verdict.resumed
            and not tracebacks
        )
        if verdict.crashed or verdict.hung:
            verdict.detail += "\n" + "\n".join(proc.log[-15:])
            self.start(name)  # the next case gets a working node
        verdict.seconds = time.monotonic() - start
        return verdict


# -- targets -----------------------------------------------------------------------------------
CRANE_JOINTS = ("pendulum_joint", "cart_joint")


def crane_state(t: float, stamp_ns: int, names=CRANE_JOINTS, efforts=True):
    from sensor_msgs.msg import JointState

    from ros_lnn.nodes.stamps import ns_to_stamp

    q = [0.3 * math.sin(1.3 * t) + 0.1, 0.2 * math.sin(4.4 * t)]
    qd = [0.39 * math.cos(1.3 * t), 0.88 * math.cos(4.4 * t)]
    msg = JointState(name=list(names), position=q[: len(names)], velocity=qd[: len(names)])
    if efforts:
        msg.effort = [0.0] * len(names)
    msg.header.stamp = ns_to_stamp(stamp_ns)
    msg.header.frame_id = "base"
    return msg


def _crane_normal(driver: Driver, target: Target, k: int) -> None:
    driver.publish(target.name, "joint_states", crane_state(k * 0.005, driver.now_ns()))


ARM_JOINTS = ("joint1", "joint2", "joint3", "joint4", "joint5")
ARM_POSE = (0.1, -0.7, 1.3, 0.5, 0.3)


def _arm_normal(driver: Driver, target: Target, k: int) -> None:
    from sensor_msgs.msg import JointState

    from ros_lnn.nodes.stamps import ns_to_stamp

    msg = JointState(name=list(ARM_JOINTS), position=list(ARM_POSE), velocity=[0.0] * 5)
    msg.header.stamp = ns_to_stamp(driver.now_ns())
    driver.publish(target.name, "joint_states", msg)


def servo_lnn_target(model_path: str = "") -> Target:
    params: dict[str, object] = {
        "autostart": True,
        "diagnostics_period_s": 0.1,
        "marker_rate_hz": 10.0,
        "max_input_age_s": 1.0,
        "input_timeout_s": 1.0,
    }
    if model_path:
        params["model_path"] = model_path
    return Target(
        "servo_lnn",
        "ros_lnn.nodes.servo_lnn",
        params,
        lifecycle=True,
        inputs={
            "joint_states": "sensor_msgs/JointState",
            "servo_commands": "trajectory_msgs/JointTrajectory",
        },
        outputs={
            "servo_lnn/driving_force": "sensor_msgs/JointState",
            "servo_lnn/prediction": "PREDICTION",
            "servo_lnn/energy": "ENERGY",
            "servo_lnn/markers": "visualization_msgs/MarkerArray",
            "servo_lnn/predicted_trajectory": "trajectory_msgs/JointTrajectory",
        },
        heartbeat="servo_lnn/driving_force",
        normal=_crane_normal,
    )


def sim_target() -> Target:
    return Target(
        "sim",
        "ros_lnn.nodes.sim",
        {"rate_hz": 200.0, "diagnostics_period_s": 0.1, "plan_rate_hz": 10.0},
        False,
        inputs={
            "servo_commands": "trajectory_msgs/JointTrajectory",
            "effort_commands": "std_msgs/Float64MultiArray",
        },
        outputs={
            "joint_states": "sensor_msgs/JointState",
            "sim/ground_truth/driving_force": "sensor_msgs/JointState",
            "sim/ground_truth/prediction": "PREDICTION",
            "sim/ground_truth/energy": "ENERGY",
            "sim/servo_plan": "trajectory_msgs/JointTrajectory",
        },
        heartbeat="joint_states",
    )


def dac_controller_target() -> Target:
    return Target(
        "dac_controller",
        "ros_lnn.nodes.dac_controller",
        # the shipped arm: no robot_description is published, configure need not wait for one
        {
            "autostart": True,
            "diagnostics_period_s": 0.1,
            "state_timeout_s": 0.5,
            "robot_description_timeout_s": 0.0,
        },
        True,
        inputs={
            "joint_states": "sensor_msgs/JointState",
            "dac_controller/ee_target": "geometry_msgs/PoseStamped",
            "dac_controller/joint_trajectory": "trajectory_msgs/JointTrajectory",
        },
        outputs={
            "dac_controller/port_command": "std_msgs/Float64MultiArray",
            "dac_controller/joint_effort_command": "std_msgs/Float64MultiArray",
            "dac_controller/markers": "visualization_msgs/MarkerArray",
        },
        heartbeat="dac_controller/joint_effort_command",
        normal=_arm_normal,
    )


# -- case builders ---------------------------------------------------------------------------------
def _send(topic: str, build: Callable, repeat: int = 1, pause: float = 0.0):
    def action(driver: Driver, target: str):
        for i in range(repeat):
            driver.publish(target, topic, build(driver, i))
            if pause:
                time.sleep(pause)

    return action


def _wide_state(n: int, prefix: str):
    """A joint state of ``n`` joints: the crane's two and ``n - 2`` more named ``prefix<k>``."""
    names = CRANE_JOINTS + tuple(f"{prefix}{k}" for k in range(n - 2))
    return _send("joint_states", lambda d, i: _state_msg(d, i, q=[0.1] * n, qd=[0.0] * n, names=names))


def _refused(parameter: str, value, words: str = ""):
    def action(driver: Driver, target: str):
        reply = driver.set_parameter(target, parameter, value)
        assert reply is not None, f"set_parameters({parameter}) got no answer within {SERVICE_TIMEOUT_S} s"
        if reply[0]:
            raise AcceptedBadValue(f"{parameter}={_short(value)} was accepted")
        assert words in reply[1], f"reason {reply[1]!r} lacks {words!r}"

    return action


def _short(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _accepted_then_restored(parameter: str, value, restore):
    def action(driver: Driver, target: str):
        reply = driver.set_parameter(target, parameter, value)
        assert reply is not None and reply[0], f"{parameter}={value!r}: {reply}"
        time.sleep(0.3)
        reply = driver.set_parameter(target, parameter, restore)
        assert reply is not None and reply[0], f"restoring {parameter}: {reply}"

    return action


def _state_msg(driver, i, q=None, qd=None, names=CRANE_JOINTS, stamp=None, efforts=None):
    msg = crane_state(0.0, driver.now_ns() if stamp is None else stamp(driver, i), names=names, efforts=False)
    if q is not None:
        msg.position = list(q)
    if qd is not None:
        msg.velocity = list(qd)
    if efforts is not None:
        msg.effort = list(efforts)
    return msg


def _trajectory(points, joints=("cart_joint",), positions=None, accelerations=True, times=None):
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from ros_lnn.nodes.stamps import seconds_to_duration

    msg = JointTrajectory(joint_names=list(joints))
    n = len(joints)
    for i in range(points):
        p = JointTrajectoryPoint(
            positions=[0.01 * i] * n if positions is None else positions(i), velocities=[0.0] * n
        )
        if accelerations:
            p.accelerations = [0.0] * n
        p.time_from_start = seconds_to_duration(0.001 * i if times is None else times(i))
        msg.points.append(p)
    return msg


def _invalid_trajectory(name: str, points: int, note: str = "", **shape):
    """The case of a servo command (``_trajectory(points, **shape)``) the node must count as invalid."""
    return (
        name,
        _send("servo_commands", lambda d, i: _trajectory(points, **shape)),
        "count:invalid_command",
        note,
    )


def _with_model(text: str | None = None, build=None, label: str = ""):
    """Configure servo_lnn with a forged model (its metadata replaced by ``text``, or the file written by
    ``build(path)``): the configure transition must fail within its time, then the shipped model again."""

    def action(driver: Driver, target: str):
        from ros_lnn.inference.runtime import default_model_path

        path = driver.workdir / f"{label or 'forged'}.onnx"
        if build is not None:
            build(path)
        else:
            assert text is not None  # the forged metadata, when no build is given
            _forge_metadata(default_model_path(), path, text)
        driver.pause_stream(target)
        try:
            driver.clean_up(target)
            reply = driver.set_parameter(target, "model_path", str(path))
            assert reply is not None and reply[0], f"model_path not taken while unconfigured: {reply}"
            assert driver.transition(target, "configure") is False, "a forged model was configured"
            assert driver.state(target) == "unconfigured"
        finally:  # back to the shipped model, active, whatever happened
            driver.clean_up_from_any_state(target)
            reply = driver.set_parameter(target, "model_path", "")
            assert reply is not None and reply[0], f"model_path not restored: {reply}"
            assert driver.transition(target, "configure"), "the shipped model did not configure again"
            assert driver.transition(target, "activate"), "activate refused"
            driver.stream_on[target] = True
        deadline = time.monotonic() + SETTLE_TIMEOUT_S  # the node's output, read by a thread here
        while time.monotonic() < deadline:
            logged = [
                line for line in driver.procs[target].log if "configure failed" in line and str(path) in line
            ]
            if logged:
                break
            time.sleep(0.02)
        assert logged, "no one-line configure error naming the file"

    return action


def _forge_metadata(source: Path, path: Path, text: str) -> None:
    """A copy of an ONNX file whose ``ros_lnn`` metadata is ``text``: the ModelProto's top-level fields
    are walked as protobuf records and its metadata_props (field 14) replaced, so no onnx package is
    needed where the nodes run."""
    raw = source.read_bytes()
    kept, at = bytearray(), 0
    while at < len(raw):
        start = at
        key, at = _varint(raw, at)
        wire = key & 7
        if wire == 0:
            _, at = _varint(raw, at)
        elif wire == 2:
            size, at = _varint(raw, at)
            at += size
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        else:
            raise ValueError(f"{source}: protobuf wire type {wire} at byte {start}")
        if key >> 3 != 14:
            kept += raw[start:at]
    entry = _record(1, b"ros_lnn") + _record(2, text.encode())
    path.write_bytes(bytes(kept) + _record(14, entry))


def _varint(raw: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = raw[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if byte < 0x80:
            return value, at


def _record(field_number: int, payload: bytes) -> bytes:
    def varint(value: int) -> bytes:
        out = bytearray()
        while True:
            out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
            value >>= 7
            if not value:
                return bytes(out)

    return varint(field_number << 3 | 2) + varint(len(payload)) + payload


def _lifecycle(*steps):
    """Transitions in order, each (label, expected success)."""

    def action(driver: Driver, target: str):
        driver.pause_stream(target)
        try:
            for label, expected in steps:
                got = driver.transition(target, label)
                assert got is not None, f"{label}: no answer"
                assert got == expected, f"{label}: success {got}, expected {expected}"
        finally:
            if driver.state(target) == "inactive":
                driver.transition(target, "activate")
            driver.stream_on[target] = True

    return action


def bind(target: str, cases: list) -> list[Case]:
    """(name, action(driver, target), expect, description) tuples -> Cases of one target."""
    return [
        Case(name, target, (lambda d, a=action: a(d, target)), expect, text)
        for name, action, expect, text in cases
    ]


def servo_lnn_cases() -> list[Case]:
    nan, inf = math.nan, math.inf
    old = lambda d, i: d.now_ns() - 3600 * 10**9  # noqa: E731
    future = lambda d, i: d.now_ns() + 3600 * 10**9  # noqa: E731
    meta = (
        '{"family": "servo_lnn", "free_joints": ["pendulum_joint"], "servo_joints": ["cart_joint"], '
        '"coordinate_units": ["rad", "m"]'
    )
    cases = [
        (
            "NaN position",
            _send("joint_states", lambda d, i: _state_msg(d, i, q=[nan, 0.1], qd=[0, 0])),
            "count:non_finite",
            "a NaN in a model joint's position",
        ),
        (
            "inf velocity",
            _send("joint_states", lambda d, i: _state_msg(d, i, q=[0.1, 0.1], qd=[0, inf])),
            "count:non_finite",
            "",
        ),
        (
            "-inf free effort",
            _send(
                "joint_states",
                lambda d, i: _state_msg(d, i, q=[0.1, 0.1], qd=[0, 0], efforts=[-inf, 0.0]),
                repeat=5,
            ),
            "ok",
            "a non-finite effort: the parameter's Q_f is used",
        ),
        (
            "huge position 1e300",
            _send("joint_states", lambda d, i: _state_msg(d, i, q=[1e300, 0.1], qd=[0, 0]), repeat=5),
            "ok",
            "finite, however large: outputs finite or skipped",
        ),
        (
            "huge velocity 1e200",
            _send("joint_states", lambda d, i: _state_msg(d, i, q=[0.1, 0.1], qd=[1e200, 1e200]), repeat=5),
            "count:non_finite_output|non_finite|warming_up|received",
            "",
        ),
        (
            "missing joint",
            _send("joint_states", lambda d, i: _state_msg(d, i, q=[0.1], qd=[0.0], names=("cart_joint",))),
            "count:missing_joint",
            "",
        ),
        (
            "duplicated joint name",
            _send(
                "joint_states",
                lambda d, i: _state_msg(
                    d,
                    i,
                    q=[0.1, 0.2, 0.3],
                    qd=[0, 0, 0],
                    names=("pendulum_joint", "cart_joint", "cart_joint"),
                ),
            ),
            "count:duplicate_joint",
            "counted and refused, not 'last copy wins'",
        ),
        (
            "short arrays",
            _send("joint_states", lambda d, i: _state_msg(d, i, q=[0.1, 0.2], qd=[0.0])),
            "count:bad_size",
            "",
        ),
        (
            "empty joint state",
            _send("joint_states", lambda d, i: _state_msg(d, i, q=[], qd=[], names=())),
            "count:missing_joint|bad_size",
            "",
        ),
        (
            "stale stamp (-1 h)",
            _send("joint_states", lambda d, i: _state_msg(d, i, q=[0.1, 0.1], qd=[0, 0], stamp=old)),
            "count:stale",
            "",
        ),
        (
            "future stamp (+1 h)",
            _send("joint_states", lambda d, i: _state_msg(d, i, q=[0.1, 0.1], qd=[0, 0], stamp=future)),
            "count:future",
            "must not freeze the node",
        ),
        (
            "future stamp, age check off",
            _future_without_age_check(),
            "count:stream_restarts",
            "a +1 h stamp reaches the estimator; the stream restarts after RESTART_AFTER stamps",
        ),
        (
            "zero stamp",
            _send(
                "joint_states",
                lambda d, i: _state_msg(d, i, q=[0.1, 0.1], qd=[0, 0], stamp=lambda d, i: 0),
                repeat=3,
            ),
            "ok",
            "a zero stamp is read as now",
        ),
        (
            "repeated stamp",
            _send(
                "joint_states",
                lambda d, i: _state_msg(
                    d, i, q=[0.1, 0.1], qd=[0, 0], stamp=lambda d, i: d.now_ns() - 5 * 10**8
                ),
                repeat=2,
            ),
            "count:out_of_order",
            "",
        ),
        (
            "200 joints",
            _wide_state(200, "j"),
            "ok",
            "",
        ),
        (
            "oversized joint state",
            _wide_state(5000, "joint_"),
            "count:bad_size",
            "refused before parsing",
        ),
        (
            "flood 5000 at once",
            _send("joint_states", lambda d, i: _state_msg(d, i, q=[0.1, 0.1], qd=[0, 0]), repeat=5000),
            "ok",
            "",
        ),
        (
            "positions only",
            _send("joint_states", lambda d, i: _state_msg(d, i, qd=[]), repeat=20, pause=0.002),
            "count:velocity_estimated",
            "",
        ),
        (
            "10 kB frame_id",
            _send("joint_states", lambda d, i: _frame(_state_msg(d, i), "f" * 10000), repeat=3),
            "ok",
            "",
        ),
        _invalid_trajectory("NaN in a trajectory", 3, positions=lambda k: [nan]),
        _invalid_trajectory("trajectory times not increasing", 3, times=lambda k: 0.1),
        _invalid_trajectory("trajectory with a duplicated joint", 2, joints=("cart_joint", "cart_joint")),
        _invalid_trajectory("trajectory without the servo joint", 2, joints=("elbow",)),
        _invalid_trajectory(
            "trajectory of 100 000 points", 100_000, note="refused before it is read: no stall"
        ),
        _invalid_trajectory("trajectory point sizes differ", 3, positions=lambda k: [0.1] * (k + 1)),
        (
            "huge trajectory 1e300",
            _send(
                "servo_commands",
                lambda d, i: _trajectory(3, positions=lambda k: [1e300 * (k + 1)], times=lambda k: 0.2 * k),
            ),
            "count:invalid_command",
            "finite but absurd: refused at receipt",
        ),
        ("empty trajectory", _send("servo_commands", lambda d, i: _trajectory(0)), "ok", "cancels the plan"),
        ("marker_rate_hz 1e-15", _refused("marker_rate_hz", 1e-15, ">= 0.1"), "refused", ""),
        ("marker_rate_hz NaN", _refused("marker_rate_hz", nan, "finite"), "refused", ""),
        ("marker_rate_hz inf", _refused("marker_rate_hz", inf, "finite"), "refused", ""),
        ("rollout_dt_s 0", _refused("rollout_dt_s", 0.0, ">= 0.0001"), "refused", ""),
        ("rollout_dt_s 1e-7", _refused("rollout_dt_s", 1e-7, ">= 0.0001"), "refused", ""),
        ("force_scale 1e308", _refused("force_scale", 1e308, "<= 100"), "refused", ""),
        ("command_timeout_s -1", _refused("command_timeout_s", -1.0, ">= 0"), "refused", ""),
        ("max_input_age_s NaN", _refused("max_input_age_s", nan, "finite"), "refused", ""),
        (
            "latency_log while active",
            _refused("latency_log", "elsewhere.npz", "read at configure"),
            "refused",
            "no remote choice of where the node writes",
        ),
        ("model_path while active", _refused("model_path", "other.onnx", "read at configure"), "refused", ""),
        ("qdd_filter_window 2", _refused("qdd_filter_window", 2, "read at configure"), "refused", ""),
        (
            "free_joint_forces of 2",
            _refused("free_joint_forces", [1.0, 2.0], "pendulum_joint"),
            "refused",
            "",
        ),
        ("free_joint_forces NaN", _refused("free_joint_forces", [nan], "finite"), "refused", ""),
        ("marker_axes 'w'", _refused("marker_axes", ["w"], "one of"), "refused", ""),
        ("a string for a number", _refused("force_scale", "big", "number"), "refused", ""),
        ("rollouts too much work", _refused("rollout_horizon_s", 9.0, "steps"), "refused", ""),
        ("marker_rate_hz 1000", _accepted_then_restored("marker_rate_hz", 1000.0, 10.0), "ok", "the edge"),
        ("rollouts on", _accepted_then_restored("rollout_horizon_s", 0.5, 0.0), "ok", ""),
        ("activate while active", _lifecycle(("activate", False)), "ok", "refused by the state machine"),
        ("configure while active", _lifecycle(("configure", False)), "ok", ""),
        (
            "deactivate, activate while streaming",
            _lifecycle(("deactivate", True), ("activate", True)),
            "ok",
            "",
        ),
        ("cleanup while active", _lifecycle(("cleanup", False)), "ok", ""),
        (
            "cleanup, configure, activate",
            _lifecycle(("deactivate", True), ("cleanup", True), ("configure", True), ("activate", True)),
            "ok",
            "",
        ),
        *(
            (f"model metadata {what}", _with_model(text, label=label), "refused", "")
            for what, text, label in (
                ("a JSON list", "[1, 2]", "list"),
                ("a number", "42", "number"),
                ("null", "null", "null"),
                ("not JSON", "{not json", "garbage"),
                (
                    "family a number",
                    '{"family": 3, "free_joints": [], "servo_joints": [], "coordinate_units": []}',
                    "family",
                ),
                ("joints a string", meta.replace('["pendulum_joint"]', '"pendulum_joint"') + "}", "joints"),
                (
                    "joints unlike the graph",
                    meta.replace('["cart_joint"]', '["cart_joint", "x"]') + "}",
                    "graph",
                ),
                ("joints repeated", meta.replace("cart_joint", "pendulum_joint") + "}", "repeated"),
                ("of another family", meta.replace('"servo_lnn"', '"lnn"') + "}", "family_lnn"),
            )
        ),
        (
            "model file corrupt",
            _with_model(build=lambda p: p.write_bytes(b"\x08\x07garbage" * 40), label="corrupt"),
            "refused",
            "",
        ),
        (
            "model file missing",
            _with_model(build=lambda p: p.unlink(missing_ok=True), label="missing"),
            "refused",
            "",
        ),
    ]
    return bind("servo_lnn", cases)


def _frame(msg, frame: str):
    msg.header.frame_id = frame
    return msg


def _future_without_age_check():
    def action(driver: Driver, target: str):
        reply = driver.set_parameter(target, "max_input_age_s", 0.0)
        assert reply is not None and reply[0], f"max_input_age_s 0: {reply}"
        try:
            driver.publish(
                target,
                "joint_states",
                _state_msg(driver, 0, q=[0.1, 0.1], qd=[0, 0], stamp=lambda d, i: d.now_ns() + 3600 * 10**9),
            )
            time.sleep(0.3)  # the normal stream runs on, restarts after RESTART_AFTER stamps
        finally:
            reply = driver.set_parameter(target, "max_input_age_s", 1.0)
            assert reply is not None and reply[0], f"max_input_age_s restored: {reply}"

    return action


def sim_cases() -> list[Case]:
    from std_msgs.msg import Float64MultiArray

    nan, inf = math.nan, math.inf
    array = lambda values: lambda d, i: Float64MultiArray(data=list(values))  # noqa: E731
    cases = [
        _invalid_trajectory("NaN in a trajectory", 3, positions=lambda k: [nan]),
        _invalid_trajectory("trajectory with a duplicated joint", 2, joints=("cart_joint", "cart_joint")),
        _invalid_trajectory("trajectory of 100 000 points", 100_000, note="refused before it is read"),
        _invalid_trajectory("trajectory times not increasing", 3, times=lambda k: 0.0),
        (
            "huge trajectory 1e300",
            _send(
                "servo_commands",
                lambda d, i: _trajectory(3, positions=lambda k: [1e300 * (k + 1)], times=lambda k: 0.05 * k),
            ),
            "count:invalid_command",
            "finite but absurd: refused at receipt (it was followed, the servo held at 1e300 for good)",
        ),
        ("NaN effort", _send("effort_commands", array([nan])), "count:invalid_command", ""),
        (
            "effort of the wrong size",
            _send("effort_commands", array([1.0, 2.0])),
            "count:invalid_command",
            "",
        ),
        ("huge effort 1e300", _send("effort_commands", array([1e300])), "count:non_finite_state", ""),
        ("effort inf", _send("effort_commands", array([inf])), "count:invalid_command", ""),
        (
            "oversized effort array",
            _send("effort_commands", array([1.0] * 100_000)),
            "count:invalid_command",
            "",
        ),
        ("effort_timeout_s NaN", _refused("effort_timeout_s", nan, "finite"), "refused", ""),
        ("effort_timeout_s -1", _refused("effort_timeout_s", -1.0, ">= 0"), "refused", ""),
        ("plan_dt_s 0", _refused("plan_dt_s", 0.0, ">= 0.001"), "refused", ""),
        ("plan_horizon_s 1e9", _refused("plan_horizon_s", 1e9, "<= 60"), "refused", ""),
        ("servo_bandwidth inf", _refused("servo_bandwidth", inf, "finite"), "refused", ""),
        ("rate_hz while running", _refused("rate_hz", 5000.0, "read when the node starts"), "refused", ""),
        ("real_time_factor 0", _refused("real_time_factor", 0.0, "read when the node starts"), "refused", ""),
        ("a list for a number", _refused("effort_timeout_s", [1.0], "number"), "refused", ""),
    ]
    return bind("sim", cases)


def dac_controller_cases() -> list[Case]:
    """Generic cases through the shared infrastructure; the controller's own (singular poses, stamps,
    trajectories with inf velocities, duplicated names) belong beside its fixes."""
    nan = math.nan
    cases = [
        (
            "state_timeout_s while active",
            _refused("state_timeout_s", 0.2, "read at configure"),
            "refused",
            "",
        ),
        ("force_scale NaN", _refused("force_scale", nan, "finite"), "refused", ""),
        ("activate while active", _lifecycle(("activate", False)), "ok", ""),
        (
            "deactivate, activate while streaming",
            _lifecycle(("deactivate", True), ("activate", True)),
            "ok",
            "",
        ),
    ]
    return bind("dac_controller", cases)


@dataclass
class Summary:
    verdicts: list = field(default_factory=list)

    def line(self) -> str:
        cases = {(v.target, v.case) for v in self.verdicts}
        crashed = sum(v.crashed for v in self.verdicts)
        hung = sum(v.hung for v in self.verdicts)
        bad = sum(v.non_finite for v in self.verdicts)
        return f"fault cases: {len(cases)} tried, {crashed} crashed, {hung} hung, {bad} non-finite outputs"

    def safety_line(self) -> str:
        missed = sum(v.missed_stop for v in self.verdicts)
        accepted = sum(v.accepted_bad for v in self.verdicts)
        tracebacks = sum(v.tracebacks for v in self.verdicts)
        return f"safety: {missed} missed stops, {accepted} accepted bad values, {tracebacks} tracebacks"


def run_cases(
    driver: Driver,
    cases: list[Case],
    rounds: int = 1,
    duration_s: float = 0.0,
    seed: int = 0,
    report: Callable | None = None,
) -> Summary:
    """Every case ``rounds`` times (or until ``duration_s`` has passed, in rounds), in a random order per
    round after the first."""
    rng = np.random.default_rng(seed)
    summary = Summary()
    start, done = time.monotonic(), 0
    while done < rounds or (duration_s and time.monotonic() - start < duration_s):
        order = list(cases) if done == 0 else [cases[i] for i in rng.permutation(len(cases))]
        for case in order:
            verdict = driver.run(case)
            summary.verdicts.append(verdict)
            if report is not None:
                report(verdict)
        done += 1
    return summary
