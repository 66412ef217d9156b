"""Feature detection across ROS 2 distributions, each missing API with a logged fallback.

Tested on Kilted (rclpy 9) and Jazzy (rclpy 7.1); the fallbacks are tested there with the API hidden.

* ``rclpy.experimental.EventsExecutor`` (Kilted; Jazzy's recent rclpy 7.1 releases): missing → the
  SingleThreadedExecutor, at about 1.7x the CPU per sample (docs/benchmarks.md).
* ``Node.add_post_set_parameters_callback`` (rclpy >= Iron; not Humble): missing → the node's own check
  runs from an on-set-parameters callback and, when it accepts, the callback at the next executor turn.
* autostart: a node whose configure step fails stays unconfigured and keeps spinning, so it can be
  configured again through its lifecycle services once the parameter at fault is fixed.
* a lifecycle transition that does not exist in the current state (Jazzy's rclpy raises out of the
  change_state service and the process ends; Kilted's refuses): refused, one error line
  (:func:`refuse_invalid_transitions`; the fault-injection suite asks for such transitions).
"""

from __future__ import annotations

import logging
import os

LOGGER_NAME = "ros_lnn.compat"
_reported: set = set()


def log_fallback(feature: str, message: str, logger=None) -> None:
    """One warning per process and feature, through the node's logger when one is given."""
    if feature in _reported:
        return
    _reported.add(feature)
    if logger is None:
        try:
            from rclpy.logging import get_logger

            logger = get_logger(LOGGER_NAME)
        except ImportError:  # rclpy absent: the standard logging module still says it
            logger = logging.getLogger(LOGGER_NAME)
    logger.warning(message)


def events_executor_class():
    """rclpy's EventsExecutor class, or None where this rclpy has none."""
    try:
        from rclpy.experimental import EventsExecutor
    except ImportError:
        return None
    return EventsExecutor


def make_executor(context=None, kind: str | None = None, logger=None):
    """The executor of a node process: ``kind`` (or ROS_LNN_EXECUTOR) "events" gives rclpy's
    EventsExecutor, "single" the SingleThreadedExecutor; "events" falls back to the latter, with one
    warning, where this rclpy lacks the EventsExecutor."""
    from rclpy.executors import SingleThreadedExecutor

    kind = kind or os.environ.get("ROS_LNN_EXECUTOR", "single")
    if kind == "events":
        events = events_executor_class()
        if events is not None:
            return events(context=context)
        log_fallback(
            "EventsExecutor",
            "this rclpy has no rclpy.experimental.EventsExecutor: running on the "
            "SingleThreadedExecutor (about 1.7x the CPU per sample; ROS_LNN_EXECUTOR=single "
            "silences this)",
            logger,
        )
    return SingleThreadedExecutor(context=context)


def add_post_set_parameters_callback(node, callback, validate) -> None:
    """``callback(parameters)`` after parameters were set. Where rclpy lacks the post-set hook (Humble),
    an on-set callback runs ``validate`` (the node's own check, registered on its own as well: on-set
    callbacks may run in any order) and, when it accepts, a one-shot timer runs ``callback`` at the
    node's next executor turn, once rclpy has stored the new values."""
    hook = getattr(node, "add_post_set_parameters_callback", None)
    if hook is not None:
        hook(callback)
        return
    log_fallback(
        "add_post_set_parameters_callback",
        "this rclpy has no add_post_set_parameters_callback "
        "(Humble): parameter changes reach the node's cache at its next executor turn",
        node.get_logger(),
    )

    def checked_then_scheduled(parameters):
        result = validate(parameters)
        if result.successful:
            timer = []

            def after_set():
                node.destroy_timer(timer[0])
                callback(parameters)

            timer.append(node.create_timer(0.0, after_set))
        return result

    node.add_on_set_parameters_callback(checked_then_scheduled)


def autostart_or_stay_unconfigured(start):
    """Wrap a node's ``start(node) -> bool`` (configure + activate) for the ``autostart`` parameter: when
    configure fails the error is already logged; the node stays unconfigured and the process keeps
    spinning (like a node brought up by launch_ros or a lifecycle manager), instead of exiting."""

    def start_or_wait(node) -> bool:
        if not start(node):
            name = node.get_fully_qualified_name()
            node.get_logger().warning(
                f"autostart: {name} stays unconfigured; fix the parameter named above and "
                f"configure it again: ros2 lifecycle set {name} configure"
            )
        return True

    return start_or_wait


def refuse_invalid_transitions(node_class) -> None:
    """A lifecycle transition requested in a state that has none of that name (``activate`` while
    active, through the change_state service) is refused with ``success: false``. Kilted's rclpy does
    that itself; Jazzy's raises RCLError out of the service callback, which ends the node process.
    Installed on ``node_class`` (a LifecycleNode subclass) as a guard around rclpy's own transition
    method; where rclpy already refuses, the guard never sees an exception."""
    from rclpy.lifecycle.node import LifecycleNodeMixin, TransitionCallbackReturn

    name = "_LifecycleNodeMixin__change_state"  # rclpy's private transition method, name-mangled
    original = getattr(LifecycleNodeMixin, name, None)
    if original is None:  # another rclpy layout: leave it as it is
        return

    def change_state(self, transition_id: int):
        from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

        try:
            return original(self, transition_id)
        except _rclpy.RCLError as exc:
            text = str(exc).split(",")[0]
            self.get_logger().error(
                f"lifecycle transition {transition_id} refused in state "
                f"'{self._state_machine.current_state[1]}': {text}"
            )
            return TransitionCallbackReturn.FAILURE

    setattr(node_class, name, change_state)
