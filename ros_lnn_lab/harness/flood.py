"""A ``joint_states`` flood against one node in its own process: do its services still answer, and does
its memory come back? (``ros-lnn bench flood``, issue 23.)

Three processes: the node (:class:`.faults.NodeProcess`), a flooder (``python -m
ros_lnn_lab.harness.flood``: one serialized JointState, re-stamped with the wall clock before each publish,
at ``rate_hz`` for ``duration_s``) and this one, which calls the node's ``get_parameters`` and
lifecycle ``get_state`` services in turn every ``probe_period_s`` before, during and after the flood
and reads the node's resident memory (``/proc/<pid>/status``). The flooder is a process of its own so
that its busy loop never delays the probe's clock (one GIL).
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np

from ros_lnn_lab.harness.faults import ARM_JOINTS, ARM_POSE, NodeProcess, Target, crane_state

PANDA_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
PANDA_POSE = (0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785)

#: A probe without an answer within this long counts as missed (and as this latency in the figures).
PROBE_TIMEOUT_S = 2.0


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def flood_message(kind: str) -> bytes:
    """The flood's JointState, serialized: the crane's (``servo_lnn``), the arm's (``dac_controller``) or
    a Panda's with efforts (``effort_observer``)."""
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import JointState

    if kind == "crane":
        msg = crane_state(0.1, time.time_ns())
    elif kind == "panda":
        zeros = [0.0] * len(PANDA_JOINTS)
        msg = JointState(name=list(PANDA_JOINTS), position=list(PANDA_POSE), velocity=zeros, effort=zeros)
    else:
        msg = JointState(name=list(ARM_JOINTS), position=list(ARM_POSE), velocity=[0.0] * len(ARM_JOINTS))
    return serialize_message(msg)


def effort_observer_target() -> Target:
    """``effort_observer`` with the URDF-nominal dynamics of the shipped Panda (no model to train)."""
    from ros_lnn.shipped import shipped_path

    return Target(
        "effort_observer",
        "ros_lnn.nodes.effort_observer",
        {
            "autostart": True,
            "urdf": str(shipped_path("config", "robots", "panda", "panda.urdf")),  # a file: a short argument
            "joints": list(PANDA_JOINTS),
            "robot_description_timeout_s": 0.0,
            "diagnostics_period_s": 0.1,
        },
        True,
        inputs={"joint_states": "sensor_msgs/JointState"},
        outputs={"effort_observer/external_effort": "sensor_msgs/JointState"},
        heartbeat="effort_observer/external_effort",
    )


def publish_flood(topic: str, kind: str, rate_hz: float, duration_s: float) -> tuple[int, float]:
    """Publish the flood (in this process): (messages sent, seconds it took). Paced by the wall clock
    in bursts (every message due by now goes out, then a sleep of 0.2 ms)."""
    import rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    rclpy.init(args=[])
    node = rclpy.create_node(f"flooder_{os.getpid()}")
    pub = node.create_publisher(
        JointState, topic, QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
    )
    deadline = time.monotonic() + 10.0
    while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    raw = bytearray(flood_message(kind))
    sent, start = 0, time.perf_counter()
    total = int(rate_hz * duration_s)
    while sent < total:
        due = min(total, int((time.perf_counter() - start) * rate_hz) + 1)
        while sent < due:
            sec, nanosec = divmod(time.time_ns(), 1_000_000_000)
            struct.pack_into("<iI", raw, 4, sec, nanosec)
            pub.publish(bytes(raw))
            sent += 1
        time.sleep(0.0002)
    seconds = time.perf_counter() - start
    node.destroy_node()
    rclpy.try_shutdown()
    return sent, seconds


class Prober:
    """Calls a node's get_parameters and get_state in turn from a thread of its own, recording
    (monotonic time, latency s, answered) per call, and keeps the node's newest /diagnostics values."""

    def __init__(self, fqn: str, context, period_s: float = 0.02):
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from lifecycle_msgs.srv import GetState
        from rcl_interfaces.srv import GetParameters
        from rclpy.executors import SingleThreadedExecutor

        self.fqn, self.period_s = fqn, period_s
        self.node = rclpy.create_node(f"flood_probe_{os.getpid()}", context=context)
        self.clients: list[tuple[Any, Any]] = [
            (
                self.node.create_client(GetParameters, f"{fqn}/get_parameters"),
                GetParameters.Request(names=["use_sim_time"]),
            ),
            (self.node.create_client(GetState, f"{fqn}/get_state"), GetState.Request()),
        ]
        self.calls: list[tuple[float, float, bool]] = []
        self.diagnostics: dict = {}
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 50)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self._stop = threading.Event()
        self._probing = threading.Event()
        self._spinner = threading.Thread(target=self._spin, daemon=True)
        self._spinner.start()
        self._thread = threading.Thread(target=self._probe, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set():
            self.executor.spin_once(timeout_sec=0.01)

    def _on_diagnostics(self, msg) -> None:
        for status in msg.status:
            if status.name == self.fqn:
                self.diagnostics = {kv.key: kv.value for kv in status.values}

    def wait_ready(self, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        for client, _ in self.clients:
            if not client.wait_for_service(timeout_sec=max(0.1, deadline - time.monotonic())):
                return False
        return True

    def state(self) -> str | None:
        """The node's lifecycle state label (None without an answer)."""
        client, request = self.clients[1]
        future = client.call_async(request)
        deadline = time.monotonic() + PROBE_TIMEOUT_S
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.01)
        reply = future.result() if future.done() else None
        return None if reply is None else reply.current_state.label

    def call(self, k: int) -> tuple[float, bool]:
        client, request = self.clients[k % 2]
        done = threading.Event()
        start = time.perf_counter()
        future = client.call_async(request)
        future.add_done_callback(lambda _: done.set())
        answered = done.wait(PROBE_TIMEOUT_S)
        latency = time.perf_counter() - start
        if not answered:
            future.cancel()
        return latency, answered

    def _probe(self) -> None:
        k = 0
        while not self._stop.is_set():
            if not self._probing.is_set():
                self._probing.wait(0.05)
                continue
            latency, answered = self.call(k)
            self.calls.append((time.monotonic(), latency, answered))
            k += 1
            time.sleep(max(0.0, self.period_s - latency))

    def start(self) -> None:
        self._probing.set()

    def between(self, t0: float, t1: float) -> dict:
        """Latency figures of the calls started in [t0, t1)."""
        rows = [(lat, ok) for t, lat, ok in self.calls if t0 <= t - lat < t1]
        lat = np.array([lat for lat, _ in rows]) * 1e3
        return {
            "calls": len(rows),
            "missed": sum(not ok for _, ok in rows),
            "p50_ms": float(np.percentile(lat, 50)) if lat.size else float("nan"),
            "p99_ms": float(np.percentile(lat, 99)) if lat.size else float("nan"),
            "max_ms": float(lat.max()) if lat.size else float("nan"),
        }

    def close(self) -> None:
        self._stop.set()
        self._probing.set()
        self._thread.join(timeout=5)
        self._spinner.join(timeout=5)
        self.executor.shutdown()
        self.node.destroy_node()


def _flood(topic: str, kind: str, rate_hz: float, duration_s: float, env: dict, pid: int):
    """Run the flooder process to its end: (sent, seconds, the node's peak RSS meanwhile)."""
    flooder = subprocess.Popen(
        [sys.executable, "-m", "ros_lnn_lab.harness.flood", topic, kind, str(rate_hz), str(duration_s)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    peak = rss_bytes(pid)
    while flooder.poll() is None:
        peak = max(peak, rss_bytes(pid))
        time.sleep(0.25)
    out = (flooder.stdout.read() if flooder.stdout else "").strip().splitlines()
    try:
        sent, seconds = int(out[-1].split()[0]), float(out[-1].split()[1])
    except (IndexError, ValueError):
        raise RuntimeError("the flooder failed: " + " | ".join(out[-5:])) from None
    return sent, seconds, peak


def measure_flood(
    target: Target,
    kind: str,
    *,
    rate_hz: float = 20000.0,
    duration_s: float = 30.0,
    settle_s: float = 5.0,
    env: dict | None = None,
    extra: dict | None = None,
    log=print,
) -> dict:
    """One node under a ``joint_states`` flood: service latency (idle, during, after), resident memory
    (before, peak, after ``settle_s``), what the node received and processed."""
    import rclpy

    env = dict(os.environ if env is None else env)
    namespace = f"/flood{os.getpid()}"
    proc = NodeProcess(target, namespace, env, extra)
    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    prober = Prober(proc.fqn, context)
    result: dict = {"node": target.name, "executor": "unknown"}
    try:
        if not prober.wait_ready():
            raise RuntimeError(f"{target.name} did not come up: " + " | ".join(proc.log[-5:]))
        deadline = time.monotonic() + 60.0
        while prober.state() != "active":
            if time.monotonic() > deadline or not proc.alive():
                raise RuntimeError(f"{target.name} did not activate: " + " | ".join(proc.log[-5:]))
            time.sleep(0.2)
        pid = proc.proc.pid
        prober.start()
        # a short flood first: what a node allocates once (the model's arenas, its windows of
        # rates and latencies at full length) is in the start figure, what a flood keeps is not
        _flood(f"{namespace}/joint_states", kind, rate_hz, min(3.0, duration_s), env, pid)
        time.sleep(settle_s)
        t_idle = time.monotonic()
        time.sleep(2.0)
        rss_start = rss_bytes(pid)
        before = dict(prober.diagnostics)
        t_flood = time.monotonic()
        sent, seconds, rss_peak = _flood(f"{namespace}/joint_states", kind, rate_hz, duration_s, env, pid)
        t_end = time.monotonic()
        during = dict(prober.diagnostics)
        time.sleep(settle_s)
        rss_after = rss_bytes(pid)
        after = dict(prober.diagnostics)
        t_done = time.monotonic()

        def delta(key: str, a: dict, b: dict) -> int:
            try:
                return int(b.get(key, 0)) - int(a.get(key, 0))
            except ValueError:
                return 0

        result.update(
            {
                "rate_hz": rate_hz,
                "duration_s": duration_s,
                "sent": sent,
                "sent_rate_hz": sent / seconds if seconds else 0.0,
                "received": delta("received", before, after),
                "processed": delta("processed", before, after),
                "received_by_flood_end": delta("received", before, during),
                "idle": prober.between(t_idle, t_flood),
                "flood": prober.between(max(t_flood, t_end - seconds), t_end),
                "after": prober.between(t_end, t_done),
                "rss_start_mib": rss_start / 2**20,
                "rss_peak_mib": rss_peak / 2**20,
                "rss_after_mib": rss_after / 2**20,
                "alive": proc.alive(),
            }
        )
        result["executor"] = executor_of(proc.log)
        result["rss_after_ratio"] = rss_after / rss_start if rss_start else float("nan")
        result["passed"] = bool(
            result["flood"]["p99_ms"] <= 100.0
            and not result["flood"]["missed"]
            and result["rss_after_ratio"] <= 1.10
            and result["alive"]
        )
    finally:
        prober.close()
        rclpy.try_shutdown(context=context)
        proc.stop()
    return result


def executor_of(log) -> str:
    """The executor a node process ran, as its ``executor: ...`` log line says (:mod:`ros_lnn.nodes.process`);
    "unknown" without one."""
    for line in log:
        found = re.search(r"\]: executor: (.+)$", line)
        if found:
            return found.group(1).strip()
    return "unknown"


def main(argv=None) -> int:
    """The flooder process: ``python -m ros_lnn_lab.harness.flood TOPIC crane|arm|panda RATE_HZ DURATION_S``;
    prints ``<sent> <seconds>``."""
    topic, kind, rate, duration = (argv if argv is not None else sys.argv[1:])[:4]
    sent, seconds = publish_flood(topic, kind, float(rate), float(duration))
    print(sent, f"{seconds:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
