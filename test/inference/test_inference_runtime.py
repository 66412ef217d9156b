"""ONNX runtime: parity with the torch model, refusal of bad models, and no torch on the deploy path."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import requires_torch
from ros_lnn.errors import ModelError
from ros_lnn.inference.metadata import ModelMetadata
from ros_lnn.inference.runtime import ServoLnnRuntime, read_metadata
from ros_lnn.physics.lagrangian import OUTPUT_NAMES

FREE, SERVO = ["pendulum_joint"], ["cart_joint"]


@pytest.fixture(scope="module")
def torch_model():
    torch = pytest.importorskip("torch")
    from ros_lnn.models.servo_lnn import ServoLNN

    torch.manual_seed(3)
    return ServoLNN(FREE, SERVO, coordinate_units=["rad", "m"]).double().eval()


@pytest.fixture(scope="module")
def exported(tmp_path_factory, torch_model):
    from ros_lnn.models.export import export_onnx

    folder = tmp_path_factory.mktemp("models")
    return {
        dtype: export_onnx(torch_model, folder / f"m_{dtype}.onnx", dtype=dtype)
        for dtype in ("float32", "float64")
    }


def _samples(n, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.uniform(-1, 1, (n, 2)),
        rng.uniform(-1, 1, (n, 2)),
        rng.uniform(-1, 1, (n, 1)),
        rng.uniform(-1, 1, (n, 1)),
    )


def _torch_outputs(model, q, qd, qdd_e, Q_f):
    import torch

    with torch.no_grad():
        out = model(*(torch.as_tensor(a, dtype=torch.float64) for a in (q, qd, qdd_e, Q_f)))
    return {k: v.numpy() for k, v in out.items()}


@requires_torch
@pytest.mark.parametrize("dtype, rtol", [("float64", 1e-10), ("float32", 2e-5)])
def test_batched_and_single_sample_match_torch(torch_model, exported, dtype, rtol):
    rt = ServoLnnRuntime(exported[dtype])
    q, qd, qdd_e, Q_f = _samples(64)
    ref = _torch_outputs(torch_model, q, qd, qdd_e, Q_f)
    batched = rt.evaluate(q, qd, qdd_e, Q_f)
    for name in (*OUTPUT_NAMES, "qdd_f"):
        scale = np.max(np.abs(ref[name])) + 1e-12
        assert np.max(np.abs(batched[name] - ref[name])) <= rtol * scale, name
    for i in (0, 17, 63):
        single = rt.evaluate(q[i], qd[i], qdd_e[i], Q_f[i])
        for name in (*OUTPUT_NAMES, "qdd_f"):
            np.testing.assert_allclose(single[name], batched[name][i], rtol=1e-6, atol=1e-9, err_msg=name)


@requires_torch
def test_single_sample_results_are_not_overwritten_by_the_next_call(exported):
    rt = ServoLnnRuntime(exported["float64"])
    q, qd, qdd_e, Q_f = _samples(2)
    first = rt.evaluate(q[0], qd[0], qdd_e[0], Q_f[0])
    kept = {k: np.array(v, copy=True) for k, v in first.items()}
    rt.evaluate(q[1], qd[1], qdd_e[1], Q_f[1])
    for k in kept:
        np.testing.assert_array_equal(first[k], kept[k])


@requires_torch
def test_inverse_mode_recovers_the_applied_force(exported):
    rt = ServoLnnRuntime(exported["float64"])
    q, qd, qdd_e, Q_f = _samples(16, seed=4)
    fwd = rt.evaluate(q, qd, qdd_e, Q_f)
    inv = rt.inverse(q, qd, fwd["qdd"])
    np.testing.assert_allclose(inv["Q"][:, :1], Q_f, atol=1e-9)
    np.testing.assert_allclose(inv["Q_e"], fwd["Q_e"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        inv["E_dot"], inv["power"], rtol=1e-9, atol=1e-12
    )  # first law, by construction
    one = rt.inverse(q[0], qd[0], fwd["qdd"][0])
    np.testing.assert_allclose(one["Q_e"], fwd["Q_e"][0], rtol=1e-9)


@requires_torch
def test_metadata_round_trip_and_joint_check(exported):
    meta = read_metadata(exported["float32"])
    assert meta.free_joints == FREE and meta.servo_joints == SERVO and meta.dtype == "float32"
    ServoLnnRuntime(exported["float32"], free_joints=FREE, servo_joints=SERVO)
    with pytest.raises(ModelError, match="configured but not in model: \\['theta'\\]"):
        ServoLnnRuntime(exported["float32"], free_joints=["theta"], servo_joints=SERVO)
    two = ModelMetadata(
        family="servo_lnn", free_joints=["a", "b"], servo_joints=[], coordinate_units=["rad", "rad"]
    )
    with pytest.raises(ModelError, match="order differs"):
        two.check_joints(["b", "a"], [])


@requires_torch
def test_wrong_input_width_is_refused(exported):
    rt = ServoLnnRuntime(exported["float32"])
    with pytest.raises(ValueError, match="model expects 2"):
        rt.evaluate(np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="model expects 2"):
        rt.evaluate(np.zeros((4, 3)), np.zeros((4, 2)))


def test_missing_and_corrupt_models_are_refused(tmp_path):
    with pytest.raises(ModelError, match="not found"):
        ServoLnnRuntime(tmp_path / "absent.onnx")
    bad = tmp_path / "corrupt.onnx"
    bad.write_bytes(b"\x08\x07garbage" * 50)
    with pytest.raises(ModelError, match="not a readable ONNX model"):
        ServoLnnRuntime(bad)


@requires_torch
def test_truncated_model_and_foreign_model_are_refused(tmp_path, exported):
    data = exported["float32"].read_bytes()
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError):
        ServoLnnRuntime(cut)
    import onnx

    proto = onnx.load(exported["float32"])
    del proto.metadata_props[:]
    foreign = tmp_path / "foreign.onnx"
    onnx.save(proto, foreign)
    with pytest.raises(ModelError, match="no 'ros_lnn' metadata"):
        ServoLnnRuntime(foreign)


@requires_torch
def test_runtime_runs_with_torch_absent(exported):
    """The deployment path imports and evaluates with torch made unimportable."""
    code = textwrap.dedent(f"""
        import sys
        sys.modules['torch'] = None          # any 'import torch' now raises ImportError
        import numpy as np
        from ros_lnn.inference.runtime import ServoLnnRuntime
        rt = ServoLnnRuntime({str(exported["float32"])!r})
        out = rt.evaluate(np.zeros(2), np.zeros(2), np.zeros(1), np.zeros(1))
        assert np.isfinite(out['Q_e']).all()
        assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]
        print('ok')
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr


@requires_torch
def test_exported_graph_stays_lean(exported):
    """Per-sample latency is dominated by ONNX Runtime's per-node cost (~0.3 µs a node): the crane
    graph with every output is 75 nodes; a change that bloats it should be a conscious one."""
    import onnx

    nodes = onnx.load(exported["float32"]).graph.node
    assert len(nodes) <= 80, f"{len(nodes)} nodes: " + ", ".join(sorted({n.op_type for n in nodes}))
    assert not any(n.op_type in ("Einsum", "Loop", "If") for n in nodes)


def _shipped_proto():
    onnx = pytest.importorskip("onnx")
    from ros_lnn.inference.runtime import default_model_path

    return onnx, onnx.load(str(default_model_path()))


def _with_metadata(tmp_path, text, name="forged.onnx"):
    onnx, proto = _shipped_proto()
    for entry in proto.metadata_props:
        if entry.key == "ros_lnn":
            entry.value = text
    path = tmp_path / name
    onnx.save(proto, str(path))
    return path


@pytest.mark.parametrize(
    "text,message",
    [
        ("[1, 2]", "is a JSON array, not an object"),
        ("42", "is a JSON number, not an object"),
        ("null", "is a JSON null, not an object"),
        ('"crane"', "is a JSON string, not an object"),
        ("{not json", "is not valid JSON"),
        ('{"family": 3, "free_joints": ["p"], "servo_joints": ["c"], "coordinate_units": []}', "family is 3"),
        (
            '{"family": "servo_lnn", "free_joints": "p", "servo_joints": ["c"], "coordinate_units": []}',
            'free_joints is "p", not a list',
        ),
        (
            '{"family": "servo_lnn", "free_joints": [1], "servo_joints": ["c"], "coordinate_units": []}',
            "free_joints",
        ),
        (
            '{"family": "servo_lnn", "free_joints": ["p"], "servo_joints": ["p"], "coordinate_units": []}',
            "more than once",
        ),
        (
            '{"family": "servo_lnn", "free_joints": ["p"], "servo_joints": ["c"], "coordinate_units": [],'
            ' "provenance": [1]}',
            "provenance is [1], not an object",
        ),
        (
            '{"family": "servo_lnn", "free_joints": ["p"], "servo_joints": ["c"], "coordinate_units": [],'
            ' "format_version": "1"}',
            "format_version",
        ),
        (
            '{"family": "servo_lnn", "free_joints": ["p", "x"], "servo_joints": ["c"], '
            '"coordinate_units": []}',
            "graph does not match its metadata",
        ),
    ],
)
def test_forged_metadata_gives_one_line_model_errors(tmp_path, text, message):
    path = _with_metadata(tmp_path, text)
    with pytest.raises(ModelError) as info:
        ServoLnnRuntime(path)
    assert message in str(info.value) and str(path) in str(info.value) and "\n" not in str(info.value)


def test_flat_evaluation_equals_the_mapping_and_extra_outputs_are_kept(tmp_path):
    """A model with an output beyond OUTPUT_NAMES (as a model with Q_dissipative) loads; evaluate_flat
    returns every output in one vector at the slices output_layout names."""
    onnx, proto = _shipped_proto()
    from onnx import helper

    graph = proto.graph
    q_out = next(o for o in graph.output if o.name == "Q")
    graph.node.append(helper.make_node("Neg", ["Q"], ["Q_dissipative"]))
    extra = onnx.ValueInfoProto()
    extra.CopyFrom(q_out)
    extra.name = "Q_dissipative"
    graph.output.append(extra)
    path = tmp_path / "extra.onnx"
    onnx.save(proto, str(path))
    rt = ServoLnnRuntime(path)
    q, qd, qdd_e, Q_f = (a[0] for a in _samples(1, seed=5))
    x = np.concatenate([q, qd, qdd_e, Q_f])
    layout = rt.input_layout
    spans = [layout[k] for k in ("q", "qd", "qdd_e", "Q_f")]
    assert spans == [slice(0, 2), slice(2, 4), slice(4, 5), slice(5, 6)]
    y = rt.evaluate_flat(x).astype(np.float64)
    out = rt.evaluate(q, qd, qdd_e, Q_f)
    for name, (span, shape) in rt.output_layout.items():
        np.testing.assert_array_equal(y[span].reshape(shape), out[name])
    span = rt.output_layout["Q_dissipative"][0]
    np.testing.assert_array_equal(y[span], -out["Q"])
