"""Feature detection across distributions: each missing rclpy API falls back, with one logged warning,
to something that still works. The APIs are hidden on a real rclpy (Kilted or Jazzy) to test that."""

from __future__ import annotations

import logging
import sys
import types

import pytest

from conftest import HAVE_RCLPY, requires_rclpy

pytestmark = [requires_rclpy, pytest.mark.ros]

if HAVE_RCLPY:
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from _ros_harness import Harness
    from ros_lnn.nodes import compat
    from ros_lnn.nodes.servo_lnn.node import ServoLnnNode


@pytest.fixture
def fresh_reports(monkeypatch):
    monkeypatch.setattr(compat, "_reported", set())


def test_events_executor_missing_falls_back_to_single_threaded_with_one_warning(
    ctx, monkeypatch, caplog, fresh_reports
):
    monkeypatch.setitem(sys.modules, "rclpy.experimental", types.ModuleType("rclpy.experimental"))
    logger = logging.getLogger("test_compat")
    with caplog.at_level(logging.WARNING, logger="test_compat"):
        first = compat.make_executor(ctx, "events", logger)
        second = compat.make_executor(ctx, "events", logger)
    assert type(first) is SingleThreadedExecutor and type(second) is SingleThreadedExecutor
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "EventsExecutor" in warnings[0] and "SingleThreadedExecutor" in warnings[0]
    first.shutdown()
    second.shutdown()


def test_events_executor_where_rclpy_has_it(ctx, caplog, fresh_reports):
    try:
        from rclpy.experimental import EventsExecutor  # noqa: F401
    except ImportError:
        pytest.skip("this rclpy has no EventsExecutor")
    with caplog.at_level(logging.WARNING):
        executor = compat.make_executor(ctx, "events", logging.getLogger("test_compat"))
    assert type(executor).__name__ == "EventsExecutor" and not caplog.records
    executor.shutdown()
    assert type(compat.make_executor(ctx, "single")) is SingleThreadedExecutor


class _HumbleLikeServoLnn(ServoLnnNode):
    """servo_lnn on an rclpy without the post-set-parameters hook (as Humble's)."""

    @property
    def add_post_set_parameters_callback(self):
        raise AttributeError("add_post_set_parameters_callback")


@pytest.mark.parametrize("node_class", ["kilted_or_jazzy", "humble_like"])
def test_parameter_cache_follows_accepted_sets_and_ignores_rejected_ones(ctx, node_class, fresh_reports):
    cls = _HumbleLikeServoLnn if node_class == "humble_like" else ServoLnnNode
    node = cls(namespace=f"/compat_{node_class}", context=ctx)
    h = Harness(node, context=ctx)
    try:
        assert ("add_post_set_parameters_callback" in compat._reported) == (node_class == "humble_like")
        assert node.p("command_timeout_s") == 0.5
        assert node.set_parameters([Parameter("command_timeout_s", value=0.25)])[0].successful
        h.wait(lambda: node.p("command_timeout_s") == 0.25, 5, "the cached command_timeout_s")
        assert not node.set_parameters([Parameter("command_timeout_s", value=-1.0)])[0].successful
        assert node.set_parameters([Parameter("max_input_age_s", value=2.0)])[0].successful
        h.wait(lambda: node.p("max_input_age_s") == 2.0, 5, "the cached max_input_age_s")
        assert node.p("command_timeout_s") == 0.25 == node.get_parameter("command_timeout_s").value
    finally:
        h.close()
        node.destroy_node()
