"""A small ONNX model for the node tests: the analytic crane written in torch through the shared
Lagrangian machinery, exported with the package's metadata. Node tests compare node outputs with the
runtime evaluated directly, so any model would do; this one is also physically exact."""

from __future__ import annotations

from pathlib import Path


def export_crane_model(path: Path, m1=0.45, m2=0.13, L=1.5, g=9.8, scale_m2: float = 1.0) -> Path:
    import torch

    from ros_lnn.inference.metadata import METADATA_KEY, ModelMetadata
    from ros_lnn.models.torch_ops import TorchOps
    from ros_lnn.physics.lagrangian import OUTPUT_NAMES, Partition, dynamics

    ops = TorchOps()
    part = Partition(free=(0,), servo=(1,))
    m2 = m2 * scale_m2

    class Crane(torch.nn.Module):
        def forward(self, q, qd, qdd_e, Q_f):
            th = q[:, 0]
            c, s = torch.cos(th), torch.sin(th)
            b = q.shape[0]
            z = torch.zeros_like(th)
            M = torch.stack(
                [torch.stack([z + m2 * L * L, m2 * L * c], -1), torch.stack([m2 * L * c, z + (m1 + m2)], -1)],
                -2,
            )
            dM0 = torch.stack([torch.stack([z, -m2 * L * s], -1), torch.stack([-m2 * L * s, z], -1)], -2)
            dM = torch.stack([dM0, torch.zeros(b, 2, 2, dtype=q.dtype)], 1)
            V = -m2 * g * L * c
            dV = torch.stack([m2 * g * L * s, z], -1)
            out = dynamics(ops, M, dM, V, dV, qd, part, qdd_e=qdd_e, Q_f=Q_f)
            return tuple(out[k] for k in OUTPUT_NAMES)

    path = Path(path)
    args = tuple(torch.zeros(2, w) for w in (2, 2, 1, 1))
    dyn = {name: {0: "batch"} for name in ("q", "qd", "qdd_e", "Q_f") + OUTPUT_NAMES}
    torch.onnx.export(
        Crane(),
        args,
        str(path),
        input_names=["q", "qd", "qdd_e", "Q_f"],
        output_names=list(OUTPUT_NAMES),
        dynamic_axes=dyn,
        dynamo=False,
    )
    import onnx

    model = onnx.load(str(path))
    meta = ModelMetadata(
        family="servo_lnn",
        free_joints=["pendulum_joint"],
        servo_joints=["cart_joint"],
        coordinate_units=["rad", "m"],
        system="crane",
        provenance={"data_hash": "testmodel"},
    )
    entry = model.metadata_props.add()
    entry.key, entry.value = METADATA_KEY, meta.to_json()
    onnx.save(model, str(path))
    return path
