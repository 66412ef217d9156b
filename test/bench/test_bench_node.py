"""``ros-lnn bench node``'s direct-call part: the estimator's joint_states callback called on serialized
messages, and where its time goes (each part timed in place)."""

from __future__ import annotations

import pytest

from conftest import requires_rclpy

pytestmark = [requires_rclpy, pytest.mark.ros]


def test_callback_parts_add_up_to_the_callback():
    from ros_lnn.errors import ModelError
    from ros_lnn.inference.runtime import default_model_path
    from ros_lnn_lab.bench.node import callback_cost, ratio_floor

    try:
        model = default_model_path()
    except ModelError:
        pytest.skip("no shipped estimator model")
    out = callback_cost(str(model), n=400)
    parts = out["parts_us"]
    assert out["n"] == 300 and out["callback_median_us"] > 0
    named = ("reader", "filter", "model", "estimator (rest)", "publishes")
    assert all(parts[k] > 0 for k in named), parts
    assert set(parts) == {"callback", *named, "rest"}
    assert parts["model"] == max(parts[k] for k in named)  # the model is the largest single part
    # the floor leaves out the estimator's rest and the callback's rest, so it lies below the whole C/E
    floor = ratio_floor(parts)
    assert 1 < floor < parts["callback"] / parts["model"]
    expected = (parts["callback"] - parts["estimator (rest)"] - parts["rest"]) / parts["model"]
    assert floor == pytest.approx(expected)
