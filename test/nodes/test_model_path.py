"""The nodes' one ``model_path`` rule (ros_lnn.nodes.model_params.resolve_model_path): empty = the node's
default, ``~`` = home, an existing file (absolute or relative to the working directory), a bare name =
a shipped file in models/ then config/, any other path as given; and every node that takes a model path
goes through it."""

import ast
import os
from pathlib import Path

import pytest

pytest.importorskip("rclpy")

from ros_lnn.errors import ModelError, RosLnnError
from ros_lnn.nodes import model_params
from ros_lnn.nodes.model_params import model_file, resolve_model_path
from ros_lnn.shipped import SOURCE_TREE, demo_arm_path

NODES = Path(model_params.__file__).parent


def test_empty_is_the_nodes_default_and_without_one_no_file():
    assert resolve_model_path("", demo_arm_path) == demo_arm_path()
    assert model_file({"model_path": ""}, lambda: Path("/x.onnx")) == Path("/x.onnx")
    with pytest.raises(ValueError):
        resolve_model_path("")


def test_an_existing_file_relative_to_the_working_directory_or_absolute(tmp_path, monkeypatch):
    (tmp_path / "dac_chain.urdf").write_text("<robot/>")  # a file here beats the shipped one of that name
    monkeypatch.chdir(tmp_path)
    assert resolve_model_path("dac_chain.urdf") == Path("dac_chain.urdf")
    assert resolve_model_path(str(tmp_path / "dac_chain.urdf")) == tmp_path / "dac_chain.urdf"
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "m.onnx").write_text("")
    assert resolve_model_path("sub/m.onnx") == Path("sub/m.onnx")


def test_a_leading_tilde_is_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_model_path("~/m.onnx") == tmp_path / "m.onnx"  # missing: as given, the loader says so
    assert resolve_model_path("~nosuchuser_xyz/m.onnx") == Path("~nosuchuser_xyz/m.onnx")  # no such user


def test_a_bare_name_is_a_shipped_file_models_then_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_model_path("crane_servo_lnn.onnx") == SOURCE_TREE / "models" / "crane_servo_lnn.onnx"
    assert resolve_model_path("dac_chain.urdf") == demo_arm_path()
    with pytest.raises(ModelError) as err:
        resolve_model_path("no_such_model.onnx")
    message = str(err.value)
    assert "no_such_model.onnx" in message and "\n" not in message
    assert str(tmp_path / "no_such_model.onnx") in message and str(SOURCE_TREE / "models") in message
    assert isinstance(err.value, RosLnnError)  # configure fails with it, in one line
    with pytest.raises(ModelError):
        resolve_model_path("x" * 4096)  # too long for a file name: no file, not an OSError


def test_any_other_path_is_as_given(tmp_path):
    missing = tmp_path / "none" / "m.onnx"
    assert resolve_model_path(str(missing)) == missing
    assert resolve_model_path("models/none.onnx") == Path("models/none.onnx")


def test_a_path_that_worked_still_works(tmp_path, monkeypatch):
    """What the nodes took before the rule: servo_lnn a file or a shipped model's name, dac_controller and
    dac_chain_sim a file (``~`` expanded for arm models and residual_model)."""
    monkeypatch.chdir(tmp_path)
    from ros_lnn.nodes.servo_lnn.parameters import resolve_model_path as servo_model

    assert servo_model("") == SOURCE_TREE / "models" / "crane_servo_lnn.onnx"
    assert servo_model("crane_servo_lnn.onnx") == SOURCE_TREE / "models" / "crane_servo_lnn.onnx"
    shipped = str(demo_arm_path())
    assert resolve_model_path(shipped) == Path(shipped)
    assert resolve_model_path(os.path.relpath(shipped)) == Path(os.path.relpath(shipped))


@pytest.mark.parametrize(
    "module",
    ["servo_lnn/parameters", "dac_controller/build", "dac_chain_sim/node", "effort_observer/node"],
)
def test_every_node_that_takes_a_model_path_goes_through_the_rule(module):
    """No node reads a path out of ``model_path`` itself (``Path(values["model_path"])``, ``expanduser``):
    it calls resolve_model_path or model_file."""
    tree = ast.parse((NODES / f"{module}.py").read_text())
    called = {
        node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
    }
    assert called & {"resolve_model_path", "model_file"}
    assert "expanduser" not in called
