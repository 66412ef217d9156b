"""ONNX export: contract of ros_lnn.inference.metadata, parity with torch in onnxruntime (float32:
relative 1e-5 of each output's scale; float64: 1e-10), dynamic batch, DeLaN and feature-map variants."""

import json

import numpy as np
import pytest

from conftest import requires_torch

pytestmark = requires_torch

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from ros_lnn.inference.metadata import METADATA_KEY, ModelMetadata  # noqa: E402
from ros_lnn.models.export import EXPORT_OUTPUTS, default_metadata, export_onnx  # noqa: E402
from ros_lnn.models.servo_lnn import ServoLNN  # noqa: E402
from ros_lnn.physics.lagrangian import OUTPUT_NAMES  # noqa: E402

FREE, SERVO = ["pendulum_joint"], ["cart_joint"]


def _crane_model(seed=0, **kw):
    torch.manual_seed(seed)
    m = ServoLNN(FREE, SERVO, coordinate_units=["rad", "m"], **kw).double()
    m.set_normalisation([0.05, 0.3], [0.6, 0.5])
    with torch.no_grad():
        m.net.out.bias[1:3] += 0.5  # live ReLU diagonal so every path of the graph carries signal
    return m.eval()


def _session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _inputs(model, batch, seed=0):
    rng = np.random.default_rng(seed)
    x = {
        "q": rng.uniform(-1.2, 1.2, (batch, model.n)),
        "qd": rng.uniform(-2, 2, (batch, model.n)),
        "qdd_e": rng.uniform(-3, 3, (batch, model.n_e)),
        "Q_f": rng.uniform(-1, 1, (batch, model.n_f)),
    }
    return x if model.n_e else {k: v for k, v in x.items() if k != "qdd_e"}


def _check_parity(model, path, dtype, rtol, batches=(1, 7)):
    """Every output of the graph against the float64 torch model, for single samples and batches; the
    error is measured relative to the output's largest magnitude over the 7-sample batch."""
    sess = _session(path)
    names = [o.name for o in sess.get_outputs()]
    assert names[: len(OUTPUT_NAMES)] == list(OUTPUT_NAMES) and "qdd_f" in names
    np_dtype = np.float32 if dtype == "float32" else np.float64
    x_all = _inputs(model, max(batches))
    with torch.no_grad():
        ref_all = model(
            *(torch.as_tensor(x_all[k]) if k in x_all else None for k in ("q", "qd", "qdd_e", "Q_f"))
        )
    for batch in batches:
        x = {k: v[:batch] for k, v in x_all.items()}
        got = dict(zip(names, sess.run(None, {k: v.astype(np_dtype) for k, v in x.items()})))
        for name in EXPORT_OUTPUTS:
            r = ref_all[name].numpy()[:batch]
            assert got[name].shape == r.shape, name
            if r.size == 0:
                continue
            scale = np.max(np.abs(ref_all[name].numpy())) + 1e-12
            assert np.max(np.abs(got[name] - r)) <= rtol * scale, (
                name,
                np.max(np.abs(got[name] - r)) / scale,
            )


@pytest.fixture(scope="module")
def crane_onnx(tmp_path_factory):
    model = _crane_model()
    path = tmp_path_factory.mktemp("export") / "crane.onnx"
    meta = default_metadata(
        model, system="crane", metrics={"qdd_f_nmse": 1e-4}, provenance={"data_hash": "ab" * 32}
    )
    export_onnx(model, path, meta)
    return model, path


def test_graph_contract_and_metadata(crane_onnx):
    _model, path = crane_onnx
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    inputs = {i.name: i for i in proto.graph.input}
    assert list(inputs) == ["q", "qd", "qdd_e", "Q_f"]
    for name, width in (("q", 2), ("qd", 2), ("qdd_e", 1), ("Q_f", 1)):
        dims = inputs[name].type.tensor_type.shape.dim
        assert dims[0].dim_param and not dims[0].dim_value, f"{name}: batch must be dynamic"
        assert dims[1].dim_value == width
        assert inputs[name].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    props = {p.key: p.value for p in proto.metadata_props}
    meta = ModelMetadata.from_json(props[METADATA_KEY])
    assert meta.free_joints == FREE and meta.servo_joints == SERVO and meta.coordinate_units == ["rad", "m"]
    assert meta.family == "servo_lnn" and meta.dtype == "float32" and meta.system == "crane"
    assert meta.metrics["qdd_f_nmse"] == 1e-4 and meta.provenance["data_hash"] == "ab" * 32
    assert meta.network["hidden"] == [64] and meta.network["epsilon"] == 0.01
    assert json.loads(props[METADATA_KEY])["package_version"]
    # no leftovers of the atomic write
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_float32_parity_with_torch(crane_onnx):
    model, path = crane_onnx
    _check_parity(model, path, "float32", rtol=1e-5)


def test_float64_export_parity(tmp_path):
    model = _crane_model(1)
    path = export_onnx(model, tmp_path / "m64.onnx", dtype="float64", dynamo=False)
    _check_parity(model, path, "float64", rtol=1e-10)


def test_delan_and_feature_map_variants(tmp_path):
    torch.manual_seed(2)
    delan = ServoLNN(["j1", "j2"], [], hidden=(16, 16)).double().eval()
    path = export_onnx(delan, tmp_path / "delan.onnx", dtype="float64", dynamo=False)
    assert [i.name for i in _session(path).get_inputs()] == ["q", "qd", "Q_f"]
    _check_parity(delan, path, "float64", rtol=1e-10)
    torch.manual_seed(3)
    chain = (
        ServoLNN(
            ["j1", "j2"], ["j3"], hidden=(16,), angle_joints=["j1", "j2", "j3"], diag_activation="softplus"
        )
        .double()
        .eval()
    )
    path = export_onnx(chain, tmp_path / "chain.onnx", dtype="float64", dynamo=False)
    _check_parity(chain, path, "float64", rtol=1e-10, batches=(3,))


def test_refuses_metadata_of_other_joints(tmp_path):
    model = _crane_model()
    wrong = ModelMetadata(
        family="servo_lnn",
        free_joints=["cart_joint"],
        servo_joints=["pendulum_joint"],
        coordinate_units=["m", "rad"],
    )
    with pytest.raises(ValueError, match="do not match"):
        export_onnx(model, tmp_path / "x.onnx", wrong)
    assert not (tmp_path / "x.onnx").exists()


@pytest.mark.parametrize("dynamo", [False, True])
def test_six_joint_delan_exports_the_unrolled_solve_and_matches_the_eager_lapack_path(tmp_path, dynamo):
    """From LAPACK_SOLVE_FROM coordinates the eager model solves M q̈ = … with LAPACK's Cholesky; the export
    must still trace the unrolled form (ONNX has no Cholesky) and give the eager model's numbers."""
    from ros_lnn.models.torch_ops import LAPACK_SOLVE_FROM

    n = 6
    assert n >= LAPACK_SOLVE_FROM
    torch.manual_seed(4)
    delan = ServoLNN([f"j{i}" for i in range(n)], [], hidden=(16, 16)).double().eval()
    path = export_onnx(delan, tmp_path / "delan6.onnx", dtype="float64", dynamo=dynamo)
    import onnx

    assert all(node.domain in ("", "ai.onnx") for node in onnx.load(str(path)).graph.node)  # standard ops
    _check_parity(delan, path, "float64", rtol=1e-10, batches=(1, 5))
