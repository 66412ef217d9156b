"""ONNX Runtime evaluation of an exported ServoLNN/DeLaN model, on numpy only (never imports torch).
Models with a learned dissipation have one more output, ``Q_dissipative`` (``q̇ᵀ Q_d ≤ 0``); models
without it load and run as before.

    rt = ServoLnnRuntime(default_model_path())
    out = rt.evaluate(q, qd, qdd_e, Q_f)     # 1-D inputs: one sample; 2-D: a batch
    out["Q_e"], out["qdd_f"], out["E"], ...

Inputs and outputs are in *model order* (free joints, then servo joints; see ``rt.joints``). Single
samples run through pre-bound buffers (ONNX Runtime I/O binding), so a call costs one graph run and
a few small copies; batches run through a plain ``session.run``.

Per-sample callers that keep their own buffers use the flat form: ``rt.input_layout`` (name → slice of
one input vector ``[q | q̇ | q̈_e | Q_f]``), ``rt.output_layout`` (name → (slice, shape) of one output
vector) and ``rt.evaluate_flat(x)`` (one graph run, no allocation; the returned vector is reused by
the next call).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..errors import ModelError
from ..physics.lagrangian import OUTPUT_NAMES
from ..shipped import find, search_paths
from .metadata import METADATA_KEY, ModelMetadata
from .model_guard import ModelLimits, load_within

DEFAULT_MODEL_NAME = "crane_servo_lnn.onnx"
_ORT_TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64}


def model_search_paths(name: str = DEFAULT_MODEL_NAME) -> list[Path]:
    """Where a shipped model is looked for (:mod:`ros_lnn.shipped`: the source tree, the ament index, the
    install prefix)."""
    return search_paths("models", name)


def default_model_path(name: str = DEFAULT_MODEL_NAME) -> Path:
    """The shipped model file; ModelError naming every place looked at when there is none."""
    path = find("models", name)
    if path is not None:
        return path
    paths = model_search_paths(name)
    raise ModelError(
        f"shipped model {name} not found (looked in: {', '.join(map(str, paths))}); "
        "pass a model path or train one with: ros-lnn train --out models/" + name
    )


def read_metadata(path) -> ModelMetadata:
    """Metadata of a model file without creating a full inference session's worth of state."""
    return _open_session(Path(path), 1)[1]


def _open_session(path: Path, threads: int, limits: ModelLimits | None = None):
    """The session and metadata of ``path``; its size, node count and load time checked against
    ``limits`` (:mod:`.model_guard`; None: the defaults)."""
    import onnxruntime as ort

    if not path.is_file():
        raise ModelError(f"model file not found: {path}")
    options = ort.SessionOptions()
    options.intra_op_num_threads = int(threads)
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    try:
        session = load_within(
            path,
            lambda: ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]),
            limits,
        )
    except ModelError:
        raise
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{path}: not a readable ONNX model ({first})") from exc
    props = session.get_modelmeta().custom_metadata_map
    if METADATA_KEY not in props:
        raise ModelError(
            f"{path}: no '{METADATA_KEY}' metadata; it was not exported by ros_lnn "
            "(re-export with: ros-lnn export)"
        )
    return session, ModelMetadata.from_json(props[METADATA_KEY], source=str(path))


class ServoLnnRuntime:
    """An exported model, ready to evaluate on the CPU. One thread at a time: a single sample runs
    through buffers bound once (:meth:`evaluate_flat`), shared by every call — the nodes call it under
    their input lock; a second thread takes a runtime of its own."""

    def __init__(
        self,
        path=None,
        free_joints=None,
        servo_joints=None,
        threads: int = 1,
        limits: ModelLimits | None = None,
    ):
        self.path = Path(path) if path is not None else default_model_path()
        self.session, self.metadata = _open_session(self.path, threads, limits)
        if self.metadata.family != "servo_lnn":
            raise ModelError(
                f"{self.path}: a '{self.metadata.family}' model (q, qd -> qdd), not a ServoLNN/DeLaN; "
                "the estimator runtime needs one exported by `ros-lnn train --model servo_lnn|delan`"
            )
        if free_joints is not None or servo_joints is not None:
            self.metadata.check_joints(
                self.metadata.free_joints if free_joints is None else free_joints,
                self.metadata.servo_joints if servo_joints is None else servo_joints,
                source=str(self.path),
            )
        self.free_joints = list(self.metadata.free_joints)
        self.servo_joints = list(self.metadata.servo_joints)
        self.joints = self.free_joints + self.servo_joints
        self.n, self.n_f, self.n_e = len(self.joints), len(self.free_joints), len(self.servo_joints)
        self._check_graph()
        self._single: _SingleSampleBinding | None = None

    @property
    def model_id(self) -> str:
        """Short identifier for logs and diagnostics: file name and training hash when known."""
        tag = str(self.metadata.provenance.get("data_hash", ""))[:8]
        return f"{self.path.name}{'@' + tag if tag else ''}"

    def check_nominal(self) -> None:
        """Evaluate the model at nominal states (rest at zero, and a small displacement with small
        velocities); ModelError naming the outputs that are not finite. A model that cannot give a
        number at rest would give none on the robot either: it is refused before it runs."""
        rest = np.zeros((1, self.n))
        moved = np.full((1, self.n), 0.1)
        q, qd = np.vstack([rest, moved]), np.vstack([rest, 0.1 * moved])
        qdd_e, Q_f = np.zeros((2, self.n_e)), np.zeros((2, self.n_f))
        try:
            out = self.evaluate(q, qd, qdd_e, Q_f)
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types; say which model failed
            raise ModelError(
                f"{self.path}: evaluating at a nominal state failed ({type(exc).__name__})"
            ) from None
        bad = sorted(name for name, value in out.items() if not np.all(np.isfinite(value)))
        if bad:
            raise ModelError(
                f"{self.path} gives non-finite {', '.join(bad)} at a nominal state (q = 0, q̇ = 0): "
                "the model is refused"
            )

    def _check_graph(self) -> None:
        inputs = {i.name: i for i in self.session.get_inputs()}
        expected = {"q": self.n, "qd": self.n, "Q_f": self.n_f}
        if self.n_e:
            expected["qdd_e"] = self.n_e
        problems = []
        for name, width in expected.items():
            shape = list(inputs[name].shape) if name in inputs else None
            if shape is None:
                problems.append(f"input '{name}' missing")
            elif len(shape) != 2 or shape[-1] != width:
                problems.append(f"input '{name}' has shape {shape}, metadata says (batch, {width})")
        self.output_names = [o.name for o in self.session.get_outputs()]
        lacking = [k for k in OUTPUT_NAMES if k not in self.output_names]
        if lacking:
            problems.append(f"outputs {lacking} missing")
        if problems:
            raise ModelError(f"{self.path}: graph does not match its metadata: {'; '.join(problems)}")
        self.input_names = [name for name in ("q", "qd", "qdd_e", "Q_f") if name in inputs]
        self.dtype = _ORT_TYPES.get(inputs["q"].type)
        if self.dtype is None:
            raise ModelError(f"{self.path}: unsupported input type {inputs['q'].type}")
        mixed = [name for name in self.input_names if inputs[name].type != inputs["q"].type]
        if mixed:
            raise ModelError(f"{self.path}: inputs {mixed} are not of the type of q ({inputs['q'].type})")

    @property
    def input_layout(self) -> dict:
        """Slices of the flat input vector of :meth:`evaluate_flat`: q, qd, qdd_e, Q_f (model order)."""
        widths = (("q", self.n), ("qd", self.n), ("qdd_e", self.n_e), ("Q_f", self.n_f))
        bounds = np.cumsum([0] + [w for _, w in widths])
        return {name: slice(int(bounds[i]), int(bounds[i + 1])) for i, (name, _) in enumerate(widths)}

    @property
    def output_layout(self) -> dict:
        """Every output of :meth:`evaluate_flat`'s vector: name → (slice, per-sample shape). Outputs
        beyond ``OUTPUT_NAMES`` that a model carries (say ``Q_dissipative``) are included."""
        return dict(self._binding().layout)

    def evaluate_flat(self, x) -> np.ndarray:
        """One sample from the flat input vector ``x`` (:attr:`input_layout`; any float dtype): every
        output in one vector of the graph's dtype (:attr:`output_layout`). The vector is the runtime's
        own buffer, overwritten by the next call: copy what must outlive it."""
        return self._binding().run_flat(x)

    # -- evaluation -----------------------------------------------------------------------------
    def _feeds(self, q, qd, qdd_e, Q_f, batch: int) -> dict:
        values = {"q": q, "qd": qd, "qdd_e": qdd_e, "Q_f": Q_f}
        widths = {"q": self.n, "qd": self.n, "qdd_e": self.n_e, "Q_f": self.n_f}
        feeds = {}
        for name in self.input_names:
            value = values[name]
            if value is None:
                value = np.zeros((batch, widths[name]), self.dtype)
            value = np.asarray(value, dtype=self.dtype).reshape(batch, -1)
            if value.shape[1] != widths[name]:
                raise ValueError(
                    f"{name} has {value.shape[1]} entries per sample, model expects {widths[name]} "
                    f"(joints in model order: {self.joints})"
                )
            feeds[name] = value
        return feeds

    def evaluate(self, q, qd, qdd_e=None, Q_f=None) -> Mapping[str, np.ndarray]:
        """All outputs (forward mode). ``qdd_e``/``Q_f`` default to zero. Returns float64 arrays."""
        q = np.asarray(q)
        if q.ndim == 1:
            return self._evaluate_single(q, qd, qdd_e, Q_f)
        feeds = self._feeds(q, qd, qdd_e, Q_f, q.shape[0])
        results = self.session.run(self.output_names, feeds)
        out = {name: np.asarray(value, dtype=np.float64) for name, value in zip(self.output_names, results)}
        out.setdefault("qdd_f", out["qdd"][:, : self.n_f])
        return out

    def _binding(self) -> _SingleSampleBinding:
        if self._single is None:
            self._single = _SingleSampleBinding(self)
        return self._single

    def _evaluate_single(self, q, qd, qdd_e, Q_f) -> SampleOutputs:
        return self._binding().run(q, qd, qdd_e, Q_f)

    def inverse(self, q, qd, qdd) -> dict:
        """Inverse mode: ``Q = M q̈ + Ṁq̇ − ½k + ∂V/∂q`` from measured accelerations (model order)."""
        qdd = np.asarray(qdd, dtype=np.float64)
        single = qdd.ndim == 1
        qdd2 = qdd.reshape(-1, self.n)
        q2, qd2 = (
            np.asarray(q, np.float64).reshape(-1, self.n),
            np.asarray(qd, np.float64).reshape(-1, self.n),
        )
        out = self.evaluate(q2, qd2, qdd2[:, self.n_f :], np.zeros((len(qdd2), self.n_f)))
        M, Q_c, dV = out["M"], out["Q_coriolis"], out["Q_conservative"]
        Q_m = np.einsum("bij,bj->bi", M, qdd2)
        Q = Q_m + Q_c + dV
        if "Q_dissipative" in out:  # a model with dissipation: M q̈ + Q_c + ∂V/∂q = Q + Q_d (q̈-independent)
            Q = Q - out["Q_dissipative"]
        f, e = slice(0, self.n_f), slice(self.n_f, self.n)
        T_dot = np.einsum("bi,bi->b", qd2, Q_m + Q_c)  # = q̇ᵀ Q + q̇ᵀ Q_d − V̇ with dissipation
        V_dot = np.einsum("bi,bi->b", qd2, dV)
        res = dict(out)
        res.update(
            {
                "qdd": qdd2,
                "qdd_f": qdd2[:, f],
                "Q": Q,
                "Q_e": Q[:, e],
                "Q_inertial": Q_m,
                "Q_ff_m": np.einsum("bij,bj->bi", M[:, f, f], qdd2[:, f]),
                "Q_fe_m": np.einsum("bij,bj->bi", M[:, f, e], qdd2[:, e]),
                "Q_ef_m": np.einsum("bij,bj->bi", M[:, e, f], qdd2[:, f]),
                "Q_ee_m": np.einsum("bij,bj->bi", M[:, e, e], qdd2[:, e]),
                "T_dot": T_dot,
                "V_dot": V_dot,
                "E_dot": T_dot + V_dot,
                "W_dot": qd2 * Q,
                "power": np.einsum("bi,bi->b", qd2, Q),
            }
        )
        return {k: v[0] for k, v in res.items()} if single else res


class _SingleSampleBinding:
    """Pre-bound input/output buffers for batch size 1: one graph run, no per-call allocations in ORT.
    The inputs are views of one vector ``[q | q̇ | q̈_e | Q_f]``, the outputs views of another."""

    def __init__(self, rt: ServoLnnRuntime):
        import onnxruntime as ort

        self.rt = rt
        spans = rt.input_layout
        self.inputs_flat = np.zeros(spans["Q_f"].stop, rt.dtype)
        self.inputs = {name: self.inputs_flat[spans[name]].reshape(1, -1) for name in rt.input_names}
        self.binding = rt.session.io_binding()
        for name, buf in self.inputs.items():
            self.binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(buf))
        # Run once to learn each output's shape, then bind every output to its own stretch of one
        # contiguous buffer: a call then costs one graph run and one float64 copy.
        try:
            feeds = {k: v.copy() for k, v in self.inputs.items()}
            probe = [np.asarray(v) for v in rt.session.run(rt.output_names, feeds)]
        except Exception as exc:  # onnxruntime raises several unrelated types
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelError(f"{rt.path}: the graph does not run on one sample ({first})") from exc
        bad = [
            name
            for name, v in zip(rt.output_names, probe)
            if v.ndim < 1 or v.shape[0] != 1 or v.dtype != rt.dtype
        ]
        if bad:
            raise ModelError(f"{rt.path}: outputs {bad} are not one row per sample of the input type")
        sizes = [v.size for v in probe]
        self.flat = np.zeros(sum(sizes), rt.dtype)
        self.layout = {}
        offset = 0
        for name, value, size in zip(rt.output_names, probe, sizes):
            view = self.flat[offset : offset + size].reshape(value.shape)
            self.binding.bind_ortvalue_output(name, ort.OrtValue.ortvalue_from_numpy(view))
            self.layout[name] = (slice(offset, offset + size), value.shape[1:])
            offset += size
        if "qdd_f" not in self.layout:
            span = self.layout["qdd"][0]
            self.layout["qdd_f"] = (slice(span.start, span.start + rt.n_f), (rt.n_f,))
        wrong = [
            name
            for name in OUTPUT_NAMES
            if name in self.layout and self.layout[name][1] != _expected_shape(name, rt)
        ]
        if wrong:
            raise ModelError(f"{rt.path}: outputs {wrong} do not have the shapes the metadata's joints give")
        # (argument position, the input's row, its width, name): the per-call loop touches nothing else.
        order = ("q", "qd", "qdd_e", "Q_f")
        self.slots = [(order.index(name), buf[0], buf.shape[1], name) for name, buf in self.inputs.items()]

    def run(self, *values) -> SampleOutputs:
        for position, row, width, name in self.slots:
            value = values[position]
            if value is None:
                row.fill(0.0)
                continue
            if np.ndim(value) != 1 or len(value) != width:
                raise ValueError(
                    f"{name} has shape {np.shape(value)}, model expects {width} entries "
                    f"(joints in model order: {self.rt.joints})"
                )
            row[:] = value
        self.rt.session.run_with_iobinding(self.binding)
        return SampleOutputs(self.flat.astype(np.float64), self.layout)

    def run_flat(self, x) -> np.ndarray:
        self.inputs_flat[:] = x
        self.rt.session.run_with_iobinding(self.binding)
        return self.flat


def _expected_shape(name: str, rt: ServoLnnRuntime) -> tuple:
    from .metadata import OUTPUT_SHAPES

    sizes = {"n": rt.n, "n_f": rt.n_f, "n_e": rt.n_e}
    spec = OUTPUT_SHAPES.get(name, "")
    return tuple(sizes[part] for part in spec.split(",")) if spec else ()


class SampleOutputs(Mapping):
    """Every output of one sample, held as one float64 vector (``flat``); ``out[name]`` is a view
    into it, made on first access. Computing all outputs costs one graph run and one copy; a caller
    pays only for the names it reads."""

    __slots__ = ("flat", "_layout", "_views")

    def __init__(self, flat: np.ndarray, layout: dict):
        self._views: dict[str, np.ndarray]
        self.flat, self._layout, self._views = flat, layout, {}

    def __getitem__(self, name):
        view = self._views.get(name)
        if view is None:
            span, shape = self._layout[name]
            view = self._views[name] = self.flat[span].reshape(shape)
        return view

    def __iter__(self):
        return iter(self._layout)

    def __len__(self) -> int:
        return len(self._layout)

    def all_finite(self) -> bool:
        return bool(np.isfinite(self.flat).all())
