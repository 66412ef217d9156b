"""A test process's view of the ROS graph: nodes under test and a probe node spun by one executor in
a background thread, with helpers to publish and to wait for messages over real DDS."""

from __future__ import annotations

import threading
import time

import rclpy
from rclpy.executors import SingleThreadedExecutor


class Harness:
    def __init__(self, *nodes, context=None):
        self.context = context
        self.probe = rclpy.create_node(f"probe_{id(self)}", context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.nodes = list(nodes) + [self.probe]
        for node in self.nodes:
            self.executor.add_node(node)
        self.lock = threading.Lock()
        self._stop = False
        self.errors: list = []
        self._calls: list = []  # (fn, done event, result box) run by the executor thread between spins
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self):
        while not self._stop:
            try:
                self.executor.spin_once(timeout_sec=0.005)
            except Exception as exc:  # noqa: BLE001 - surface callback errors in the test, keep spinning
                self.errors.append(exc)
            with self.lock:
                calls, self._calls = self._calls, []
            for fn, done, box in calls:
                try:
                    box["value"] = fn()
                except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                    box["error"] = exc
                done.set()

    def call(self, fn, timeout: float = 60.0):
        """``fn()`` on the executor thread, between two spins, and its result. Lifecycle transitions go
        through here: they destroy and create publishers, subscriptions and timers, which must not happen
        while the executor thread waits on them or runs their callbacks (rclpy raises InvalidHandle)."""
        if threading.current_thread() is self.thread:
            return fn()
        done, box = threading.Event(), {}
        with self.lock:
            self._calls.append((fn, done, box))
        if not done.wait(timeout):
            raise AssertionError(f"the executor thread did not run {fn} within {timeout} s")
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def add(self, node):
        self.executor.add_node(node)
        self.nodes.insert(0, node)

    def collect(self, msg_type, topic, qos):
        """Subscribe on the probe; returns the list the messages land in."""
        box = []

        def cb(msg):
            with self.lock:
                box.append(msg)

        self.probe.create_subscription(msg_type, topic, cb, qos)
        return box

    def publisher(self, msg_type, topic, qos, wait_for_subscribers: int = 1, timeout: float = 60.0):
        pub = self.probe.create_publisher(msg_type, topic, qos)
        self.wait(
            lambda: pub.get_subscription_count() >= wait_for_subscribers, timeout, f"no subscriber on {topic}"
        )
        return pub

    def wait(self, predicate, timeout: float = 60.0, what: str = "condition"):
        """Poll ``predicate`` (the executor thread spins) until it holds. The default is generous: a
        passing run returns as soon as the condition holds, a loaded CI runner may take seconds."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.check()
            if predicate():
                return
            time.sleep(0.005)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}")

    def check(self):
        assert not self.errors, f"callbacks raised: {self.errors!r}"

    def close(self):
        self._stop = True
        self.thread.join(timeout=5)
        for node in self.nodes:
            self.executor.remove_node(node)
            node.destroy_node()
        self.executor.shutdown()
