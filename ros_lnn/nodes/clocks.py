"""Clocks of the nodes' timers. Timeouts that protect hardware (stale joint states and commands, the
effort watchdog, the diagnostics period) run on a steady clock whatever ``use_sim_time`` says: when
``/clock`` stops (a paused or crashed simulator, a bag that ends) together with the inputs, the ROS
clock stops too and a timer on it would never fire. Stamps and ages stay on ROS time."""

from __future__ import annotations

#: Most steps a simulator node's timer tick takes to catch up with the clock (``dac_chain_sim``,
#: ``arm_sim``), each published; further behind, the simulated time runs slower (:func:`catch_up`).
MAX_CATCH_UP = 10
#: How far the simulated time may fall behind the clock before the stamps re-anchor (a jump at least
#: this long: longer than effort_observer's restart_gap_s, 0.1 s; shorter than dac_controller's
#: state_timeout_s, 0.5 s, so its states are never too old).
MAX_LAG_S = 0.25


def catch_up(now_ns: int, anchor_ns: int, steps: int, dt_ns: int) -> tuple[int, int]:
    """A simulator's timer tick at node time ``now_ns`` (stamps ``anchor_ns + k · dt_ns``, ``steps``
    taken): ``(anchor_ns, steps to take)``, each step published. A tick up to :data:`MAX_CATCH_UP`
    periods late takes every step it missed; a later one takes that many and the simulated time falls
    behind the clock — the stamps stay those of the physics (a momentum observer reads stamped time
    with no motion in it as an external torque), and nothing more is computed on a machine that is
    already too busy. Once behind by more than :data:`MAX_LAG_S` the anchor moves on: the stamps jump
    once, by at least that (a gap the observer restarts at), and are the clock's again."""
    due = round((now_ns - anchor_ns) / dt_ns) - steps
    if due > MAX_CATCH_UP + round(MAX_LAG_S * 1e9 / dt_ns):
        return anchor_ns + (due - MAX_CATCH_UP) * dt_ns, MAX_CATCH_UP
    return anchor_ns, min(max(due, 0), MAX_CATCH_UP)


def steady_clock():
    """A clock that never stops nor jumps (rclpy's STEADY_TIME)."""
    from rclpy.clock import Clock, ClockType

    return Clock(clock_type=ClockType.STEADY_TIME)


def steady_timer(node, period_s: float, callback):
    """``node.create_timer`` on the steady clock."""
    return node.create_timer(float(period_s), callback, clock=steady_clock())
