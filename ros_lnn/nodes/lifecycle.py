"""Lifecycle helpers shared by the lifecycle nodes (servo_lnn, dac_controller)."""

from __future__ import annotations

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


class LifecycleTeardown:
    """Teardown shared by the lifecycle nodes (put it before ``LifecycleNode`` in the bases).

    Subscriptions and timers live in ``self._subs`` / ``self._timers`` and go on :meth:`_drop_io`
    (deactivate, cleanup, error); the attributes named in ``_io_attributes`` (timers also kept by
    name) are reset to None with them. Cleanup and shutdown also destroy the lifecycle publishers in
    ``self._pubs`` and drop what configure built, the attribute named ``_configured_attribute``."""

    _configured_attribute = ""
    _io_attributes: tuple = ()
    _subs: list[Subscription[Any]]
    _timers: list[Timer]

    if TYPE_CHECKING:  # provided by rclpy's Node, which follows this mixin in the bases

        def destroy_subscription(self, subscription: Subscription[Any]) -> bool: ...

        def destroy_timer(self, timer: Timer) -> bool: ...

    def _drop_io(self) -> None:
        for sub in self._subs:
            self.destroy_subscription(sub)
        for timer in self._timers:
            self.destroy_timer(timer)
        self._subs, self._timers = [], []
        for name in self._io_attributes:
            setattr(self, name, None)

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
