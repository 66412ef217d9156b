"""The identified arm as a deployable model: ``τ̂(q, q̇, q̈) = RNEA_π(q, q̇, q̈) + τ_f(q̇) + r(q, q̇)``,
plus, along a measured velocity stream, the fast torque of :mod:`ros_lnn.arm.fast_torque`.

One file, ``<name>.onnx``: the graph computes friction ``τ_f`` and the learned residual ``r`` from
``q, qd`` (float32, batch × n, the mapping's joint order); with friction memory
(:mod:`ros_lnn.arm.presliding`) it also takes the friction state ``friction_state`` (batch × n × K: the
stop operators' play positions before the sample) and returns it advanced, ``friction_state_next`` —
state in, state out, so ONNX Runtime runs it sample by sample (an observer, a controller) or along a
whole recording whose states :meth:`ArmModel.friction_states` computed first. The rigid body — the
URDF's kinematics with the identified inertial parameters — travels in the metadata
(``metadata_props['ros_lnn_arm']``, one JSON document) and is evaluated with Pinocchio; so are the fast
torque's filter taps. No torch at run time.

The same object gives what an observer needs: M(q), C(q, q̇), g(q) of the identified arm, friction and
the residual.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelError
from ..inference.model_guard import ModelLimits, load_within
from . import friction
from .fast_torque import FastTorque
from .presliding import FrictionMemory
from .rigid_body import ArmRigidBody

METADATA_KEY = "ros_lnn_arm"
FAMILY = "arm"
FORMAT_VERSION = 1
GRAPH_INPUTS = ("q", "qd")
GRAPH_OUTPUTS = ("friction", "residual")
STATE_INPUT = "friction_state"  # friction memory: the play positions before the sample (batch, n, K)
STATE_OUTPUT = "friction_state_next"  # ... and after it


def _session(path: Path, threads: int = 1, limits: ModelLimits | None = None):
    import onnxruntime as ort

    if not path.is_file():
        raise ModelError(f"{path}: no such model file")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    try:
        return load_within(
            path, lambda: ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]), limits
        )
    except ModelError:
        raise
    except Exception as exc:  # noqa: BLE001 - ONNX Runtime raises its own types for unreadable graphs
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{path}: not a readable ONNX model ({first})") from None


def _metadata(session, path: Path) -> dict:
    props = session.get_modelmeta().custom_metadata_map
    if METADATA_KEY not in props:
        raise ModelError(f"{path}: not an arm model (no '{METADATA_KEY}' metadata)")
    try:
        meta = json.loads(props[METADATA_KEY])
    except json.JSONDecodeError as exc:
        raise ModelError(f"{path}: arm metadata is not JSON ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_VERSION:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise ModelError(f"{path}: arm model format {found}, this package reads {FORMAT_VERSION}")
    return meta


def read_arm_metadata(path) -> dict:
    """The arm metadata of an ONNX file (ModelError if it is not an arm model)."""
    path = Path(path)
    return _metadata(_session(path), path)


def is_arm_model(path) -> bool:
    try:
        read_arm_metadata(path)
    except ModelError:
        return False
    return True


class ArmModel:
    """Inverse dynamics, M, C, g, friction and residual of an identified arm (numpy + Pinocchio + ORT)."""

    def __init__(self, path, threads: int = 1, limits: ModelLimits | None = None):
        self.path = Path(path)
        self.session = _session(self.path, threads, limits)
        self.meta = _metadata(self.session, self.path)
        self.joints = tuple(self.meta["joints"])
        self.n = len(self.joints)
        nominal = ArmRigidBody.from_urdf(self.meta["urdf"], self.joints, self.meta["gravity"])
        self.nominal = nominal
        self.rigid = nominal.with_parameters(np.asarray(self.meta["pi"], dtype=float))
        self.phi = np.asarray(self.meta["phi"], dtype=float)
        self.coulomb_velocity = float(self.meta["coulomb_velocity"])
        self.residual_enabled = bool(self.meta.get("residual_enabled", False))
        self.fast = FastTorque.from_metadata(self.meta.get("fast_torque"), self.n)
        self.memory = FrictionMemory.from_metadata(self.meta.get("friction_memory"), self.n)
        names = {o.name for o in self.session.get_outputs()}
        if not set(GRAPH_OUTPUTS) <= names:
            raise ModelError(f"{self.path}: graph outputs {sorted(names)}, expected {list(GRAPH_OUTPUTS)}")
        stateful = STATE_INPUT in {i.name for i in self.session.get_inputs()}
        if stateful != (self.memory is not None):
            raise ModelError(
                f"{self.path}: the graph {'takes' if stateful else 'has no'} a friction state but the "
                f"metadata {'has no' if self.memory is None else 'has a'} friction memory"
            )
        self._outputs = [*GRAPH_OUTPUTS, STATE_OUTPUT] if stateful else list(GRAPH_OUTPUTS)

    def _graph(
        self, q, qd, friction_state=None, state_after: bool = False
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Friction, residual and (``state_after``, with friction memory) the state after each sample."""
        q = np.atleast_2d(np.asarray(q, dtype=np.float32))
        qd = np.atleast_2d(np.asarray(qd, dtype=np.float32))
        feed = {"q": q, "qd": qd}
        if self.memory is not None:
            state = self.memory.neutral_state(q) if friction_state is None else friction_state
            feed[STATE_INPUT] = np.asarray(state, dtype=np.float32).reshape(len(q), self.n, self.memory.k)
        with_state = state_after and self.memory is not None
        out = self.session.run(self._outputs if with_state else list(GRAPH_OUTPUTS), feed)
        return out[0].astype(float), out[1].astype(float), out[2].astype(float) if with_state else None

    def friction_torque(self, qd) -> np.ndarray:
        """The memoryless friction ``f_v q̇ + f_c tanh(q̇/v) + f_o`` (N, n)."""
        return friction.torque(self.phi, qd, self.coulomb_velocity)

    def residual_torque(self, q, qd) -> np.ndarray:
        """The learned residual (N, n); zeros when training switched it off."""
        return self._graph(q, qd)[1]

    def friction_states(self, q_measured, starts=(0,), first=None) -> np.ndarray | None:
        """The friction state before each sample of a logged position stream (N, n) whose pieces begin
        at ``starts`` (each starts neutral unless ``first`` gives the state before sample 0); None for a
        model without friction memory."""
        if self.memory is None:
            return None
        return self.memory.states(np.atleast_2d(np.asarray(q_measured, dtype=float)), starts, first)

    def inverse_dynamics(self, q, qd, qdd, residual: bool = True, friction_state=None) -> np.ndarray:
        """τ̂ (N, n); ``residual=False``: the least-squares fit alone (rigid body + friction, its memory
        included). ``friction_state`` (N, n, K): the friction state before each sample (default neutral:
        no memory torque)."""
        f, r, _ = self._graph(q, qd, friction_state)
        tau = self.rigid.inverse_dynamics(q, qd, qdd) + f
        return tau + r if residual else tau

    def torque_of(self, samples, residual: bool = True, fast: bool = True) -> np.ndarray:
        """τ̂ (N, n) along recorded samples (:class:`ros_lnn.arm.samples.Samples`): the inverse dynamics
        of their filtered q, q̇, q̈ — friction memory on their logged positions, each piece started
        neutral — and, with ``residual``, the fast torque of their measured velocities (left out when
        the stream's rate is not the one the model was fitted at; ``fast=False`` leaves it out)."""
        if self.memory is None or samples.q_measured is None:
            tau = self.inverse_dynamics(samples.q, samples.qd, samples.qdd, residual)
        else:
            # the graph's q is the logged one, as on the robot: the memory runs on it
            state = self.friction_states(samples.q_measured, samples.starts)
            f, r, _ = self._graph(samples.q_measured, samples.qd, state)
            tau = (
                self.rigid.inverse_dynamics(samples.q, samples.qd, samples.qdd) + f + (r if residual else 0.0)
            )
        if residual and fast and samples.qd_measured is not None:
            tau = tau + self.fast.torque(samples.qd_measured, samples.starts, samples.rate_hz)
        return tau

    def non_rigid_torque(self, q, qd, friction_state=None) -> np.ndarray:
        """Friction + residual (N, n): what the arm needs besides M q̈ + C q̇ + g; ``friction_state`` as
        in :meth:`inverse_dynamics`."""
        f, r, _ = self._graph(q, qd, friction_state)
        return f + r

    def step_non_rigid(self, q, qd, friction_state) -> tuple[np.ndarray, np.ndarray | None]:
        """One sample online: friction + residual (n,) at ``q, qd`` (n,) and the friction state after it
        (``friction_state``: the state before it, (n, K); None starts neutral). A model without memory
        returns None as its state."""
        state = None if friction_state is None else np.asarray(friction_state)[None]
        f, r, after = self._graph(q, qd, state, state_after=True)
        return (f + r)[0], None if after is None else after[0]

    def mass_matrix(self, q) -> np.ndarray:
        return self.rigid.mass_matrix(q)

    def coriolis_matrix(self, q, qd) -> np.ndarray:
        return self.rigid.coriolis_matrix(q, qd)

    def gravity_torque(self, q) -> np.ndarray:
        return self.rigid.gravity_torque(q)

    def describe(self) -> str:
        r = "with a learned residual" if self.residual_enabled else "residual off (the fit alone)"
        if self.fast.active:
            r += f", fast torque at {self.fast.rate_hz:.0f} Hz"
        if self.memory is not None:
            on = [j for j, a in zip(self.joints, self.memory.active) if a]
            r += f", friction memory on {len(on)} of {self.n} joints"
        return f"arm model of {self.n} joints ({', '.join(self.joints)}): rigid body + friction, {r}"


def arm_metadata(
    rigid: ArmRigidBody, pi, phi, coulomb_velocity: float, residual_enabled: bool, **extra: Any
) -> dict:
    return {
        "format": FORMAT_VERSION,
        "family": FAMILY,
        "joints": list(rigid.joints),
        "urdf": rigid.urdf_text,
        "gravity": [float(g) for g in rigid.gravity],
        "locked_joints": list(rigid.locked),
        "pi": [float(x) for x in pi],
        "phi": [float(x) for x in phi],
        "coulomb_velocity": float(coulomb_velocity),
        "residual_enabled": bool(residual_enabled),
        "inputs": list(GRAPH_INPUTS),
        "outputs": list(GRAPH_OUTPUTS),
        "units": {"q": "rad or m", "qd": "rad/s or m/s", "friction": "N*m or N", "residual": "N*m or N"},
        **extra,
    }
