"""A node's joint_states on a thread of its own, every queued message taken at each wake-up.

rclpy's SingleThreadedExecutor rebuilds its wait set from every entity of the node at each wake-up —
parameter and lifecycle services, timers, QoS event handlers (ros2/rclpy#1389) — and takes one message
per subscription per turn: at 1 kHz that was two thirds of the estimator process's CPU. The
EventsExecutor costs less but keeps one unbounded FIFO of events, so under an input flood service
requests wait behind the backlog and its memory grows.

:class:`Intake` keeps the services on the SingleThreadedExecutor and moves the hot subscription out of
its wait set (it is created in :class:`IntakeGroup`, a callback group no executor that honours
callback groups runs). A thread waits on a wait set of its own — that subscription and a guard
condition to stop it — and at each wake-up takes every message queued (at most ``limit``, by default
the subscription's keep-last depth, the bound on what a flood can queue) and hands them, in order, in
one list to ``callback`` under ``lock``, the lock the node's timers and commands take
(:class:`InputLock`: the intake defers to them, and stays out of it at least ``YIELD_S`` after each
batch). With a ``period_s``, the thread takes what queued at most once per period (it sleeps out the
rest of the period after a batch; a message after a quiet spell is taken at once): at 1 kHz a node
whose cost is mostly per call (one ONNX Runtime call per batch) then handles a few samples per
wake-up, at the price of at most one period of latency. Services and parameters are answered by the
executor thread meanwhile (the intake thread releases the GIL while it waits and sleeps; an intake
process hands the GIL over every 1 ms: :mod:`.process`).

rclpy's EventsExecutor does not honour callback groups: a node spun by it keeps a plain subscription
(:func:`subscribe`). The wait set is rclpy's own (``_rclpy.WaitSet``, the one its executors build),
the same on Jazzy and Kilted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from rclpy.callback_groups import CallbackGroup

#: Wait at most this long before checking whether the intake was stopped (it is also woken at once).
WAIT_NS = 200_000_000
#: After each batch the thread stays out of the node's lock at least this long (s).
YIELD_S = 0.0005


class InputLock:
    """The lock between a node's joint_states intake thread and its other callbacks (timers, commands:
    :func:`.diagnostics.guarded` takes it), re-entrant. The intake defers to them: before it takes the
    lock for a batch it waits (at most ``DEFER_S``) while a callback waits for the lock, so a thread
    that comes back for the lock at once under a flood cannot starve them — Python's locks are not
    fair."""

    DEFER_S = 0.05

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._state = threading.Condition(threading.Lock())
        self._waiting = 0  # callbacks waiting for the lock

    def __enter__(self) -> InputLock:
        if self._lock.acquire(blocking=False):
            return self
        with self._state:
            self._waiting += 1
        try:
            self._lock.acquire()
        finally:
            with self._state:
                self._waiting -= 1
                self._state.notify_all()
        return self

    def __exit__(self, *exc) -> None:
        self._lock.release()

    def for_intake(self) -> threading.RLock:
        """The lock, once no callback waits for it (or after ``DEFER_S``), for ``with``."""
        with self._state:
            if self._waiting:
                self._state.wait_for(lambda: not self._waiting, self.DEFER_S)
        return self._lock


class IntakeGroup(CallbackGroup):
    """A callback group no executor serves: its entities are taken by an :class:`Intake`."""

    def can_execute(self, entity) -> bool:
        return False

    def beginning_execution(self, entity) -> bool:
        return False

    def ending_execution(self, entity) -> None:
        pass


class Intake:
    """``node``'s subscription ``sub`` (created in an :class:`IntakeGroup`) served by a thread of its
    own: ``callback(messages)`` with every message queued at a wake-up (serialized bytes for a raw
    subscription), at most ``limit`` at a time, under ``lock``. ``on_error(exc)`` gets what the loop
    itself meets (the callback must handle its own)."""

    def __init__(
        self, node, sub, callback: Callable[[list], None], lock, limit: int, on_error=None, period_s=0.0
    ):
        from rclpy.guard_condition import GuardCondition

        self.node, self.sub, self.callback, self.lock = node, sub, callback, lock
        self.limit = max(1, int(limit))
        self.period_s = max(0.0, float(period_s))
        self.on_error = on_error
        self.wakeups = 0  # returns from the wait
        self.batches = 0  # wake-ups that took at least one message
        self.taken = 0
        self._stop = threading.Event()
        self._wake = GuardCondition(None, None, context=node.context)
        self._thread = threading.Thread(target=self._run, name=f"intake {sub.topic_name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

        context = self.node.context
        wait_set = _rclpy.WaitSet(1, 1, 0, 0, 0, 0, context.handle)
        sub, handle, wake = self.sub, self.sub.handle, self._wake.handle
        msg_type, raw = sub.msg_type, sub.raw
        while not self._stop.is_set():
            try:
                with handle, wake, context.handle:
                    wait_set.clear_entities()
                    wait_set.add_subscription(handle)
                    wait_set.add_guard_condition(wake)
                    wait_set.wait(WAIT_NS)
                    self.wakeups += 1
                    if self._stop.is_set():
                        return
                    messages: list[Any] = []
                    while len(messages) < self.limit:
                        taken = handle.take_message(msg_type, raw)
                        if taken is None:
                            break
                        messages.append(taken[0])
            except Exception as exc:  # noqa: BLE001 - a destroyed handle or a shut-down context ends the loop
                if not self._stop.is_set() and self.on_error is not None and context.ok():
                    self.on_error(exc)
                return
            if messages:
                started = time.monotonic()
                self.batches += 1
                self.taken += len(messages)
                lock = self.lock.for_intake() if isinstance(self.lock, InputLock) else self.lock
                with lock:
                    self.callback(messages)
                # out of the lock for at least YIELD_S: Python's locks are not fair, and a thread that
                # takes the lock again at once (a full queue under a flood) could starve the executor's
                # timers that wait for it, and the services queued behind them
                rest = max(started + self.period_s - time.monotonic(), YIELD_S)
                if self._stop.wait(rest):
                    return

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the thread (it finishes the batch it is in) and wait for it; the subscription is the
        node's to destroy afterwards."""
        self._stop.set()
        try:
            self._wake.trigger()
        except Exception:  # noqa: BLE001 - a context already shut down wakes the wait set itself
            pass
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)
        self._wake.destroy()


def subscribe(
    node,
    msg_type,
    topic: str,
    qos,
    callback: Callable[[list], None],
    lock,
    intake: bool,
    period_s: float = 0.0,
    limit: int | None = None,
):
    """A raw subscription of ``topic`` whose messages go to ``callback(messages)`` in order: on an
    :class:`Intake` thread (``intake``; at most once per ``period_s``, at most ``limit`` messages at a
    time, default the subscription's depth), else through the executor one at a time. Returns (the
    subscription, the intake or None); the caller destroys the subscription after stopping the
    intake."""
    if not intake:
        sub = node.create_subscription(msg_type, topic, lambda raw: callback([raw]), qos, raw=True)
        return sub, None
    sub = node.create_subscription(
        msg_type, topic, lambda raw: None, qos, raw=True, callback_group=IntakeGroup()
    )
    from .diagnostics import report_error

    return sub, Intake(
        node,
        sub,
        callback,
        lock,
        min(qos.depth, limit or qos.depth),
        lambda exc: report_error(node, "intake", exc),
        period_s,
    )
