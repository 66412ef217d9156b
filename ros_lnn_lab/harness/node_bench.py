"""The node benchmarks' driver (``ros-lnn bench node``, ``--observer``): a node under test in its own
process, and this process's rclpy node that publishes to it and records the stamps of its outputs.

:func:`bench_env` is the environment the node process gets, :func:`launch_node` starts it,
:class:`BenchDriver` is the driving side (its own context, an events executor spun in a thread, the
received ``(stamp, receipt)`` pairs) and closes both.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any


def bench_env() -> dict:
    """This process's environment for the node process: discovery on this machine, and a ROS domain
    of its own unless one is set (then set here too, so that the driver shares it)."""
    env = dict(os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    if "ROS_DOMAIN_ID" not in os.environ:
        env["ROS_DOMAIN_ID"] = os.environ["ROS_DOMAIN_ID"] = str(100 + os.getpid() % 100)
    return env


def launch_node(
    module: str, ns: str, params: Sequence[str], env: dict, remaps: Sequence[str] = ()
) -> subprocess.Popen:
    """``python -m module`` in namespace ``ns`` with the ``-p`` parameters ``params`` (``name:=value``) and
    the ``-r`` remappings ``remaps`` (``from:=to``), log level warn, stdout and stderr piped together."""
    cmd = [sys.executable, "-m", module, "--ros-args", "-r", f"__ns:={ns}"]
    for remap in remaps:
        cmd += ["-r", remap]
    for param in params:
        cmd += ["-p", param]
    cmd += ["--log-level", "warn"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def deep_rx_qos():
    """A deep reliable queue, so that outputs are not lost in the driver's own receive queue."""
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1000, reliability=ReliabilityPolicy.RELIABLE)


class BenchDriver:
    """The driving rclpy node (its own context) for the node process ``proc``."""

    def __init__(self, name: str, ns: str, proc: subprocess.Popen):
        import rclpy

        self.proc = proc
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context)
        self.node = rclpy.create_node(name, namespace=ns, context=self.context)
        self.received: list = []  # (input stamp ns, receipt ns) per output
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._executor: Any = None
        self._spinner: threading.Thread | None = None

    def on_stamped(self, raw: bytes) -> None:
        """A raw subscription's callback: the output's header stamp and its receipt time."""
        # raw CDR: the header's stamp (int32 sec, uint32 nanosec) follows the 4-byte encapsulation
        now = time.time_ns()
        sec, nsec = struct.unpack_from("<iI", raw, 4)
        with self.lock:
            self.received.append((sec * 1_000_000_000 + nsec, now))

    def spin(self) -> None:
        """Spin the node in a thread, on an events executor (the driver's own receive path, kept cheap)."""
        from ros_lnn.nodes.process import make_executor

        self._executor = make_executor(self.context, "events")
        self._executor.add_node(self.node)

        def spin():
            while not self._stop.is_set():
                self._executor.spin_once(timeout_sec=0.01)

        self._spinner = threading.Thread(target=spin, daemon=True)
        self._spinner.start()

    def wait_matched(self, pub, output_topic: str, timeout_s: float, what: str) -> None:
        """Until ``pub`` has a subscriber and ``output_topic`` a publisher (or ``timeout_s``); raises
        RuntimeError with its output if the node process ``what`` exits meanwhile."""
        deadline = time.monotonic() + timeout_s
        while (
            pub.get_subscription_count() == 0 or self.node.count_publishers(output_topic) == 0
        ) and time.monotonic() < deadline:
            if self.proc.poll() is not None:
                assert self.proc.stdout is not None  # started with stdout=PIPE
                raise RuntimeError(f"{what} exited: {self.proc.stdout.read().decode(errors='replace')}")
            time.sleep(0.05)

    def close(self) -> str:
        """Stop spinning, stop the node process (SIGINT, killed after 30 s), close the driver; the node
        process's output."""
        import rclpy

        self._stop.set()
        if self._spinner is not None:
            self._spinner.join(timeout=5)
        self.proc.send_signal(signal.SIGINT)
        try:
            output = self.proc.communicate(timeout=30)[0].decode(errors="replace")
        except subprocess.TimeoutExpired:
            self.proc.kill()
            output = self.proc.communicate()[0].decode(errors="replace")
        if self._executor is not None:
            self._executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)
        return output
