"""Clocks of the nodes' timers. Timeouts that protect hardware (stale joint states and commands, the
effort watchdog, the diagnostics period) run on a steady clock whatever ``use_sim_time`` says: when
``/clock`` stops (a paused or crashed simulator, a bag that ends) together with the inputs, the ROS
clock stops too and a timer on it would never fire. Stamps and ages stay on ROS time."""

from __future__ import annotations

#: Most steps a simulator node's timer tick takes to catch up with the clock (``dac_chain_sim``,
#: ``arm_sim``); further behind, the stamps re-anchor and the simulated time runs slower.
MAX_CATCH_UP = 10


def steady_clock():
    """A clock that never stops nor jumps (rclpy's STEADY_TIME)."""
    from rclpy.clock import Clock, ClockType

    return Clock(clock_type=ClockType.STEADY_TIME)


def steady_timer(node, period_s: float, callback):
    """``node.create_timer`` on the steady clock."""
    return node.create_timer(float(period_s), callback, clock=steady_clock())
