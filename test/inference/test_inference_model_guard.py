"""Models checked before they run (ros_lnn.inference.model_guard): file size and graph node count from
the file (no onnx package on that path), a load-time limit, and the runtimes and dac_controller's learned
port refusing a real generated ONNX file that exceeds a small limit in one line, before ONNX Runtime
creates a session."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from conftest import HAVE_RCLPY
from ros_lnn.errors import ModelError
from ros_lnn.inference.model_guard import ModelLimits, check_model_file, count_graph_nodes, load_within

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "models").glob("*.onnx"))


def _chain(n_nodes: int, weights: int = 0, with_subgraph: bool = False, with_function: bool = False):
    """A ModelProto: ``n_nodes`` Add nodes in a chain on x (1,), an initializer of ``weights`` floats,
    optionally an If node with a 2-node and a 1-node branch, and a local function of 3 nodes."""
    nodes, last = [], "x"
    for i in range(n_nodes):
        nodes.append(helper.make_node("Add", [last, "one"], [f"a{i}"]))
        last = f"a{i}"
    inits = [numpy_helper.from_array(np.ones(1, np.float32), "one")]
    if weights:
        inits.append(numpy_helper.from_array(np.zeros(weights, np.float32), "w"))
    if with_subgraph:
        out = helper.make_tensor_value_info("b", TensorProto.FLOAT, [1])
        then = helper.make_graph(
            [helper.make_node("Neg", [last], ["t0"]), helper.make_node("Neg", ["t0"], ["b"])],
            "then",
            [],
            [out],
        )
        other = helper.make_graph([helper.make_node("Identity", [last], ["b"])], "else", [], [out])
        nodes.append(
            helper.make_node(
                "Constant", [], ["c"], value=helper.make_tensor("c", TensorProto.BOOL, [], [True])
            )
        )
        nodes.append(helper.make_node("If", ["c"], ["b"], then_branch=then, else_branch=other))
        last = "b"
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info(last, TensorProto.FLOAT, [1])],
        inits,
    )
    functions = []
    if with_function:
        body = [helper.make_node("Neg", ["u"], [f"f{i}"]) for i in range(3)]
        functions.append(
            helper.make_function("local", "triple", ["u"], ["f0"], body, [helper.make_opsetid("", 17)])
        )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], functions=functions)


def _write(tmp_path, model, name="model.onnx") -> Path:
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def _onnx_count(model) -> int:
    def graph(g):
        n = 0
        for node in g.node:
            n += 1
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    n += graph(attr.g)
                n += sum(graph(sub) for sub in attr.graphs)
        return n

    return graph(model.graph) + sum(len(f.node) for f in model.functions)


def test_the_node_count_from_the_file_is_the_one_onnx_reads(tmp_path):
    model = _chain(40, with_subgraph=True, with_function=True)
    path = _write(tmp_path, model)
    assert count_graph_nodes(path.read_bytes()) == _onnx_count(model) == 40 + 2 + 3 + 3
    for shipped in SHIPPED:
        assert count_graph_nodes(shipped.read_bytes()) == _onnx_count(onnx.load(str(shipped))), shipped
        assert check_model_file(shipped) < 100_000  # the defaults are far above the shipped models


def test_a_model_over_a_limit_is_refused_in_one_line(tmp_path):
    path = _write(tmp_path, _chain(500, weights=300_000))  # 1.2 MB, 500 nodes
    assert check_model_file(path, ModelLimits(max_mb=10.0, max_nodes=1000)) == 500
    with pytest.raises(
        ModelError, match=r"500 graph nodes, more than the limit of 100 \(model_max_nodes\)"
    ) as err:
        check_model_file(path, ModelLimits(max_nodes=100))
    assert "\n" not in str(err.value)
    with pytest.raises(ModelError, match=r"1\.2 MB, larger than the limit of 0\.5 MB \(model_max_mb\)"):
        check_model_file(path, ModelLimits(max_mb=0.5))
    with pytest.raises(ModelError, match="not a readable ONNX model"):
        garbage = tmp_path / "garbage.onnx"
        garbage.write_bytes(b"\x08\x07garbage" * 40)
        check_model_file(garbage)
    with pytest.raises(ModelError, match="not found"):
        check_model_file(tmp_path / "missing.onnx")


def test_the_runtimes_refuse_before_onnx_runtime_creates_a_session(tmp_path, monkeypatch):
    import onnxruntime

    from ros_lnn.arm.model import ArmModel
    from ros_lnn.inference.residual import ResidualRuntime
    from ros_lnn.inference.runtime import ServoLnnRuntime

    path = _write(tmp_path, _chain(500))

    def never(*args, **kwargs):
        raise AssertionError("a session was created for a model over its limit")

    monkeypatch.setattr(onnxruntime, "InferenceSession", never)
    small = ModelLimits(max_nodes=100)
    for load in (
        lambda: ServoLnnRuntime(path, limits=small),
        lambda: ResidualRuntime(path, limits=small),
        lambda: ArmModel(path, limits=small),
    ):
        with pytest.raises(ModelError, match="model_max_nodes"):
            load()
    monkeypatch.undo()
    # within its limits the generated file goes on to ONNX Runtime, and is refused for its metadata
    with pytest.raises(ModelError, match="no 'ros_lnn' metadata"):
        ServoLnnRuntime(path, limits=ModelLimits(max_nodes=1000))


def test_a_load_that_takes_too_long_is_refused_and_errors_pass_through(tmp_path):
    path = _write(tmp_path, _chain(3))
    release = threading.Event()
    with pytest.raises(ModelError, match=r"loading took longer than 0\.2 s \(model_load_timeout_s\)"):
        load_within(path, lambda: release.wait(60.0), ModelLimits(load_timeout_s=0.2))
    release.set()  # the abandoned load ends
    assert load_within(path, lambda: "session", ModelLimits()) == "session"

    def fails():
        raise RuntimeError("broken graph")

    with pytest.raises(RuntimeError, match="broken graph"):
        load_within(path, fails)


@pytest.mark.skipif(not HAVE_RCLPY, reason="rclpy")
def test_dac_controller_refuses_a_learned_port_over_its_limit_at_configure(ctx, tmp_path):
    from rclpy.parameter import Parameter

    from ros_lnn.nodes.dac_controller.node import DacControllerNode, start

    path = _write(tmp_path, _chain(500, weights=300_000))
    for name, value, words in (
        ("model_max_nodes", 100, "model_max_nodes"),
        ("model_max_mb", 0.5, "model_max_mb"),
    ):
        node = DacControllerNode(
            namespace=f"/guard_{name}",
            context=ctx,
            parameter_overrides=[
                Parameter("robot_description", value=(ROOT / "config" / "dac_chain.urdf").read_text()),
                Parameter("residual_model", value=str(path)),
                Parameter(name, value=value),
            ],
        )
        try:
            assert not start(node)
            assert words in node.last_error and str(path) in node.last_error, node.last_error
            assert "refused before loading" in node.last_error
        finally:
            node.destroy_node()
