"""ros_lnn.shipped: one search order for the shipped models and configs (the source tree, the ament index,
the install prefix), used by every "find the shipped file" function."""

import sys
from pathlib import Path

import pytest

from ros_lnn import shipped

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def places(tmp_path, monkeypatch):
    """A source tree, an ament share folder and an install prefix, each empty."""
    source, share, prefix = (tmp_path / n for n in ("source", "share", "prefix"))
    monkeypatch.setattr(shipped, "SOURCE_TREE", source)
    monkeypatch.setattr(shipped, "_ament_share", lambda: share)
    monkeypatch.setattr(sys, "prefix", str(prefix))
    return source, share, prefix / "share" / "ros_lnn"


def _put(folder: Path, *parts: str) -> Path:
    path = folder.joinpath(*parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x")
    return path


def test_run_from_source_the_checkouts_files_are_found():
    assert shipped.SOURCE_TREE == ROOT
    assert shipped.find("models", "crane_servo_lnn.onnx") == ROOT / "models" / "crane_servo_lnn.onnx"
    assert shipped.find("config", "dac_chain.urdf") == ROOT / "config" / "dac_chain.urdf"


def test_the_order_is_source_tree_then_ament_index_then_install_prefix(places):
    source, share, prefix = places
    parts = ("config", "robots", "x.urdf")
    assert shipped.search_paths(*parts) == [p.joinpath(*parts) for p in places]
    assert shipped.find(*parts) is None
    assert shipped.shipped_path(*parts) == source.joinpath(*parts)  # missing: the source-tree path
    assert shipped.find(*parts) is None
    _put(prefix, *parts)
    assert shipped.find(*parts) == prefix.joinpath(*parts)
    _put(share, *parts)
    assert shipped.find(*parts) == share.joinpath(*parts)  # installed by colcon: the ament share folder
    _put(source, *parts)
    assert shipped.find(*parts) == shipped.shipped_path(*parts) == source.joinpath(*parts)


def test_without_an_ament_index_the_prefix_is_still_searched(places, monkeypatch):
    source, _, prefix = places
    monkeypatch.setattr(shipped, "_ament_share", lambda: None)
    assert shipped.search_paths("models", "m.onnx") == [
        source / "models" / "m.onnx",
        prefix / "models" / "m.onnx",
    ]


def test_every_finder_uses_the_one_order(places):
    from ros_lnn.arm.simulation import panda_urdf
    from ros_lnn.errors import ConfigError, ModelError
    from ros_lnn.inference.runtime import default_model_path
    from ros_lnn.shipped import demo_arm_path
    from ros_lnn.training.effort_residuals import shipped_config

    source, share, prefix = places
    with pytest.raises(ModelError, match="not found"):
        default_model_path("m.onnx")
    with pytest.raises(ConfigError, match="not installed"):
        panda_urdf()
    assert demo_arm_path() == source / "config" / "dac_chain.urdf"  # missing: says so when opened
    assert shipped_config("c.yaml") == source / "config" / "c.yaml"
    found = [
        _put(share, "models", "m.onnx"),
        _put(prefix, "config", "robots", "panda", "panda.urdf"),
        _put(share, "config", "dac_chain.urdf"),
        _put(prefix, "config", "c.yaml"),
    ]
    assert [
        default_model_path("m.onnx"),
        panda_urdf(),
        demo_arm_path(),
        shipped_config("c.yaml"),
    ] == found
