"""Lifecycle helpers shared by the lifecycle nodes (servo_lnn, dac_controller, effort_observer)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rclpy.subscription import Subscription
    from rclpy.timer import Timer


def configure_and_activate(node, configured) -> bool:
    """Lifecycle configure, then activate; False (the error already logged) when ``configured()`` says
    the configure step failed."""
    node.trigger_configure()
    if not configured():
        return False
    node.trigger_activate()
    return True


def activate_io(node, open_io: Callable[[], None]) -> bool:
    """The activate transition's work: ``open_io()`` opens the subscriptions and timers and resets the
    per-run state. True (logged "activated") when it did; False when it raised: what it opened is
    dropped and the reason reported (the node stays inactive). It runs under the node's input lock
    (where it has one): an intake thread started by ``open_io`` takes its first batch only after the
    per-run state was reset, not while it is (a stream already flowing at a respawn)."""
    import contextlib

    from .diagnostics import report_error

    try:
        with getattr(node, "input_lock", None) or contextlib.nullcontext():
            open_io()
    except Exception as exc:  # noqa: BLE001 - an activation that fails leaves the node inactive, with the reason
        node._drop_io()
        report_error(node, "activate", exc)
        return False
    node.get_logger().info("activated")
    return True


def subscribe_joint_states(
    node, queue_depth: int, batch_period_s: float = 0.0, batch_limit: int | None = None
) -> None:
    """``joint_states`` as serialized bytes into ``node._on_joint_states`` (a list of them, in order),
    kept in ``node._subs``: on an intake thread of its own when ``node.input_intake`` (the node
    process's default executor, :mod:`.process`), its wake-ups under ``node.input_lock``, at most one
    per ``batch_period_s`` and ``batch_limit`` messages (default: the queue's depth) at a time; else
    through the executor, one message at a time (:mod:`.intake`)."""
    from sensor_msgs.msg import JointState

    from .intake import subscribe
    from .qos import input_qos

    sub, intake = subscribe(
        node,
        JointState,
        "joint_states",
        input_qos(queue_depth),
        node._on_joint_states,
        node.input_lock,
        getattr(node, "input_intake", False),
        batch_period_s,
        batch_limit,
    )
    node._subs.append(sub)
    if intake is not None:
        node._intakes = (*node._intakes, intake)


def restart_input(node) -> None:
    """A new run of the input path: the reader's state, the last input and the diagnostics window."""
    node.reader.reset()
    node.last_input = None
    node.window.start(node.counts)


class LifecycleTeardown:
    """Teardown shared by the lifecycle nodes (put it before ``LifecycleNode`` in the bases).

    Subscriptions and timers live in ``self._subs`` / ``self._timers`` and go on :meth:`_drop_io`
    (deactivate, cleanup, error, and when the node is destroyed), the intake threads of
    ``self._intakes`` stopped first; the attributes named in ``_io_attributes`` (timers also kept by
    name) are reset to None with them. Cleanup and shutdown also destroy the lifecycle publishers in
    ``self._pubs`` and drop what configure built, the attribute named ``_configured_attribute``."""

    _configured_attribute = ""
    _io_attributes: tuple = ()
    _subs: list[Subscription[Any]]
    _timers: list[Timer]
    _intakes: tuple = ()  # the joint_states intake threads (subscribe_joint_states)

    if TYPE_CHECKING:  # provided by rclpy's Node, which follows this mixin in the bases

        def destroy_subscription(self, subscription: Subscription[Any]) -> bool: ...

        def destroy_timer(self, timer: Timer) -> bool: ...

    def _drop_io(self) -> None:
        for intake in self._intakes:
            intake.stop()
        self._intakes = ()
        for sub in self._subs:
            self.destroy_subscription(sub)
        for timer in self._timers:
            self.destroy_timer(timer)
        self._subs, self._timers = [], []
        for name in self._io_attributes:
            setattr(self, name, None)

    def destroy_node(self):
        if getattr(self, "_subs", None) is not None:
            self._drop_io()  # an intake thread never outlives its subscription
        return super().destroy_node()  # type: ignore[misc]

    def on_cleanup(self, state):
        from rclpy.lifecycle import TransitionCallbackReturn

        self._drop_io()
        for pub in self._pubs.values():
            self.destroy_lifecycle_publisher(pub)
        self._pubs = {}
        if self._configured_attribute:
            setattr(self, self._configured_attribute, None)
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state):
        return self.on_cleanup(state)

    def on_error(self, state):
        from rclpy.lifecycle import TransitionCallbackReturn

        self._drop_io()
        return TransitionCallbackReturn.SUCCESS


def _install_guard() -> None:
    from . import compat

    compat.refuse_invalid_transitions(LifecycleTeardown)


_install_guard()
