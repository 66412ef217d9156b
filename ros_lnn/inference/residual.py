"""ONNX Runtime evaluation of the DAC's learned port (``ros-lnn train --model dac_residual``), numpy only.

    port = ResidualRuntime("arm_residual.onnx", joint_names)   # ModelError when the joints differ
    tau = port(q, qd, qdd_r)                                    # joint_names order, float64

The graph takes ``q, qd, qdd`` (batch, n) in the metadata's joint order (``free_joints``) and gives
``tau_res``; the runtime maps the configured joint order onto it. One sample runs through pre-bound
ONNX Runtime buffers (I/O binding): a call is one graph run and three small copies. A port trained
with a regressor fit (the metadata's ``network.regressor_fit``) is that fit plus the graph: the fit is
evaluated with Pinocchio from the model text the file carries
(:class:`ros_lnn.physics.multibody.regressor.RegressorPort`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ModelError
from .metadata import ModelMetadata
from .model_guard import ModelLimits
from .runtime import _ORT_TYPES, _open_session

FAMILY = "dac_residual"
INPUTS, OUTPUT = ("q", "qd", "qdd"), "tau_res"


def check_residual_metadata(meta: ModelMetadata, path, joint_names=None) -> list[str]:
    """The model's joints; ModelError (one line) when it is no residual model or its joints differ."""
    if meta.family != FAMILY:
        raise ModelError(
            f"{path}: a '{meta.family}' model, not a learned port; export one with "
            f"`ros-lnn train --model {FAMILY}`"
        )
    joints = list(meta.free_joints)
    if joint_names is not None and sorted(joints) != sorted(joint_names):
        extra = [j for j in joint_names if j not in joints]
        lacking = [j for j in joints if j not in joint_names]
        raise ModelError(
            f"{path} does not fit the controller's joints: model {joints}, controller "
            f"{list(joint_names)} (not in the model: {extra}; only in the model: {lacking}); "
            "train it on recordings of these joints"
        )
    return joints


class ResidualRuntime:
    """A learned port on the CPU: ``τ̂_res(q, q̇, q̈)`` in the caller's joint order."""

    def __init__(self, path, joint_names=None, threads: int = 1, limits: ModelLimits | None = None):
        import onnxruntime as ort

        self.path = Path(path)
        self.session, self.metadata = _open_session(self.path, threads, limits)
        model_joints = check_residual_metadata(self.metadata, self.path, joint_names)
        self.joint_names = list(joint_names) if joint_names is not None else model_joints
        self.n = len(model_joints)
        inputs = {i.name: i for i in self.session.get_inputs()}
        outputs = [o.name for o in self.session.get_outputs()]
        missing = [k for k in INPUTS if k not in inputs] + ([OUTPUT] if OUTPUT not in outputs else [])
        if missing or any(inputs[k].shape[-1] != self.n for k in INPUTS):
            raise ModelError(
                f"{self.path}: graph does not match its metadata (inputs q, qd, qdd and output "
                f"tau_res of width {self.n}); re-export it"
            )
        self.dtype = _ORT_TYPES.get(inputs["q"].type)
        if self.dtype is None:
            raise ModelError(f"{self.path}: unsupported input type {inputs['q'].type}")
        # configured order -> model order, and back
        self._to_model = np.array([self.joint_names.index(j) for j in model_joints], dtype=np.intp)
        self._identity = bool(np.array_equal(self._to_model, np.arange(self.n)))
        self._buffers = np.zeros((3, 1, self.n), self.dtype)
        self._out = np.zeros((1, self.n), self.dtype)
        self._binding = self.session.io_binding()
        for name, buf in zip(INPUTS, self._buffers):
            self._binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(buf))
        self._binding.bind_ortvalue_output(OUTPUT, ort.OrtValue.ortvalue_from_numpy(self._out))
        self._from_model = np.argsort(self._to_model)
        self.regressor_fit = self._regressor_fit(model_joints)
        #: False: training found the network no help beyond the fit; its graph is not run
        self.network_enabled = bool((self.metadata.network or {}).get("network_enabled", True))

    @property
    def _runs_graph(self) -> bool:
        return self.network_enabled or self.regressor_fit is None

    def _regressor_fit(self, model_joints):
        """``(RegressorPort, caller order → its order, back)`` or None (the graph alone)."""
        values = (self.metadata.network or {}).get("regressor_fit")
        if not values:
            return None
        from ..physics.multibody.regressor import RegressorPort

        fit = RegressorPort.from_dict(values, f"{self.path}: regressor fit")
        names = list(fit.pmodel.joint_names)
        if sorted(names) != sorted(model_joints):
            raise ModelError(
                f"{self.path}: regressor fit joints {names} differ from the model's {model_joints}"
            )
        to_fit = np.array([self.joint_names.index(j) for j in names], dtype=np.intp)
        return fit, to_fit, np.argsort(to_fit)

    @property
    def trained_max(self) -> np.ndarray | None:
        """Largest |τ_res| per joint (``joint_names`` order) in the training data, when recorded."""
        values = (self.metadata.network or {}).get("tau_res_max")
        if not values or len(values) != self.n:
            return None
        return np.asarray(values, float).take(self._from_model)

    @property
    def certain_model(self) -> dict:
        """The certain model the residual was trained against (name, path, sha256), when recorded."""
        return dict((self.metadata.provenance.get("data") or {}).get("certain_model") or {})

    def __call__(self, q, qd, qdd) -> np.ndarray:
        """One sample (1-D, ``joint_names`` order) → τ̂_res (float64, same order)."""
        if self._runs_graph:
            buf = self._buffers
            if self._identity:
                buf[0, 0], buf[1, 0], buf[2, 0] = q, qd, qdd
            else:
                idx = self._to_model
                buf[0, 0], buf[1, 0], buf[2, 0] = np.take(q, idx), np.take(qd, idx), np.take(qdd, idx)
            self.session.run_with_iobinding(self._binding)
            out = self._out[0].astype(np.float64)
            out = out if self._identity else out.take(self._from_model)
        else:
            out = np.zeros(self.n)
        if self.regressor_fit is not None:
            fit, idx, back = self.regressor_fit
            out += fit(np.take(q, idx), np.take(qd, idx), np.take(qdd, idx)).take(back)
        return out

    def batch(self, q, qd, qdd) -> np.ndarray:
        """Rows of samples (``joint_names`` order) → τ̂_res rows (float64)."""
        idx = self._to_model
        if self._runs_graph:
            feeds = {
                name: np.ascontiguousarray(np.asarray(v, float)[:, idx], dtype=self.dtype)
                for name, v in zip(INPUTS, (q, qd, qdd))
            }
            (out,) = self.session.run([OUTPUT], feeds)
            out = np.asarray(out, np.float64)[:, self._from_model]
        else:
            out = np.zeros((len(np.atleast_2d(q)), self.n))
        if self.regressor_fit is not None:
            fit, idx, back = self.regressor_fit
            args = (np.asarray(v, float)[:, idx] for v in (q, qd, qdd))
            out += fit.batch(*args)[:, back]
        return out


__all__ = ["ResidualRuntime", "check_residual_metadata", "FAMILY"]
