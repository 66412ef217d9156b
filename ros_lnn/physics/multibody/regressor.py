"""The part of an arm's residual efforts that is linear in physical parameters, fitted by least squares.

What a real arm adds to its description is mostly of three known kinds, each linear in its parameters:

    τ_res ≈ Y(q, q̇, q̈) δπ + diag(q̈) a + f_v ∘ q̇ + f_c ∘ tanh(q̇ / v_s) + f_o

* ``Y δπ``: wrong inertial parameters and a payload — Pinocchio's joint-torque regressor ``Y`` (ten
  parameters per body: mass, first moments, inertia about the joint frame) times the change ``δπ``;
* ``diag(q̈) a``: reflected rotor inertia (Pinocchio's ``armature``), one per joint;
* viscous, smooth Coulomb (``v_s`` fixed, so the model stays linear) and a constant offset per joint.

:func:`fit_regressor_port` solves for ``θ = [δπ; a; f_v; f_c; f_o]`` by weighted least squares (each
joint's rows over the spread of its residual, so the light wrist counts as much as the shoulder). ``Y``
is rank-deficient (some parameters never reach the joints, others only in combinations); the
minimum-norm solution gives the same efforts as any other, which is all the port needs. The learned
port (``ros-lnn train --model dac_residual``) fits this part first and trains its network on what is
left; :class:`RegressorPort` evaluates it at run time (numpy + Pinocchio, no torch) from the model text
it carries, so a port file is self-contained.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin  # type: ignore[import-untyped]

from ...errors import ModelError
from .pin import PinocchioModel

#: Friction parameters per joint, in θ after δπ and the armature.
FRICTION_TERMS = ("viscous", "coulomb", "offset")
DEFAULT_COULOMB_VELOCITY = 0.05


def load_model_text(text: str, model_format: str, source: str):
    """A :class:`MultibodyModel` from a model file's text (``urdf`` or ``yaml``)."""
    if model_format == "urdf":
        from .urdf import model_from_urdf

        return model_from_urdf(text, source=source)
    if model_format == "yaml":
        import yaml

        from .build import model_from_dict

        return model_from_dict(yaml.safe_load(text), source=source)
    raise ModelError(f"{source}: model format '{model_format}' (expected urdf or yaml)")


@dataclass
class RegressorPort:
    """``τ = [Y | diag(q̈) | friction](q, q̇, q̈) θ`` on ``pmodel`` (Pinocchio order of its joints)."""

    pmodel: PinocchioModel
    theta: np.ndarray
    coulomb_velocity: float
    model_text: str = ""
    model_format: str = ""

    def __post_init__(self):
        self.theta = np.asarray(self.theta, dtype=float)
        self.nv = self.pmodel.nv
        self._data = self.pmodel.pin.createData()
        self._inertial = 10 * (self.pmodel.pin.njoints - 1)
        if self.theta.shape != (self._inertial + 4 * self.nv,):
            raise ModelError(
                f"regressor fit: {self.theta.size} parameters, the model '{self.pmodel.model.name}' "
                f"takes {self._inertial + 4 * self.nv}"
            )
        th = self.theta
        self._delta_pi = th[: self._inertial]
        a, k = self._inertial, self.nv
        self.armature, self.viscous, self.coulomb, self.offset = (
            th[a : a + k],
            th[a + k : a + 2 * k],
            th[a + 2 * k : a + 3 * k],
            th[a + 3 * k :],
        )

    def rows(self, q, qd, qdd) -> np.ndarray:
        """The regressor ``(nv, P)`` at one sample (model order)."""
        n = self.nv
        Y = pin.computeJointTorqueRegressor(self.pmodel.pin, self._data, q, qd, qdd)
        out = np.zeros((n, self._inertial + 4 * n))
        out[:, : self._inertial] = Y
        diag = np.arange(n)
        a = self._inertial
        out[diag, a + diag] = qdd
        out[diag, a + n + diag] = qd
        out[diag, a + 2 * n + diag] = np.tanh(np.asarray(qd) / self.coulomb_velocity)
        out[diag, a + 3 * n + diag] = 1.0
        return out

    def __call__(self, q, qd, qdd) -> np.ndarray:
        """τ at one sample (1-D, model order)."""
        q, qd, qdd = (np.asarray(x, dtype=float) for x in (q, qd, qdd))
        Y = pin.computeJointTorqueRegressor(self.pmodel.pin, self._data, q, qd, qdd)
        return (
            Y.dot(self._delta_pi)
            + self.armature * qdd
            + self.viscous * qd
            + self.coulomb * np.tanh(qd / self.coulomb_velocity)
            + self.offset
        )

    def batch(self, q, qd, qdd) -> np.ndarray:
        """Rows of samples (model order) → τ rows."""
        q, qd, qdd = (np.atleast_2d(np.asarray(x, dtype=float)) for x in (q, qd, qdd))
        return np.array([self(*s) for s in zip(q, qd, qdd)]).reshape(q.shape)

    def to_dict(self) -> dict:
        """What a port file's metadata carries (the model's text included: the file is self-contained)."""
        return {
            "theta": self.theta.tolist(),
            "coulomb_velocity": self.coulomb_velocity,
            "model_format": self.model_format,
            "model_text": self.model_text,
            "model_name": self.pmodel.model.name,
            "joints": list(self.pmodel.joint_names),
            "terms": ["inertial (10 per body, Pinocchio order)", "armature", *FRICTION_TERMS],
        }

    @classmethod
    def from_dict(cls, values: dict, source: str = "regressor fit") -> RegressorPort:
        try:
            model = load_model_text(values["model_text"], values["model_format"], source)
            theta, vs = values["theta"], float(values["coulomb_velocity"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"{source}: regressor fit unreadable ({exc})") from None
        pmodel = PinocchioModel(model)
        if list(pmodel.joint_names) != list(values.get("joints", pmodel.joint_names)):
            raise ModelError(f"{source}: regressor fit joints {values.get('joints')} differ from its model's")
        return cls(pmodel, np.asarray(theta, float), vs, values["model_text"], values["model_format"])


def fit_regressor_port(
    pmodel: PinocchioModel,
    q,
    qd,
    qdd,
    tau,
    coulomb_velocity: float = DEFAULT_COULOMB_VELOCITY,
    model_text: str = "",
    model_format: str = "",
) -> RegressorPort:
    """Weighted least squares of ``tau`` (rows, model order) on the regressor at ``(q, q̇, q̈)``."""
    q, qd, qdd, tau = (np.atleast_2d(np.asarray(x, dtype=float)) for x in (q, qd, qdd, tau))
    port = RegressorPort(pmodel, np.zeros(10 * (pmodel.pin.njoints - 1) + 4 * pmodel.nv), coulomb_velocity)
    X = np.array([port.rows(*s) for s in zip(q, qd, qdd)])  # (N, n, P)
    spread = tau.std(0)
    w = 1.0 / np.where(spread > 1e-12, spread, 1.0)
    A = (X * w[None, :, None]).reshape(-1, X.shape[2])
    b = (tau * w).reshape(-1)
    scale = np.linalg.norm(A, axis=0)  # columns to unit norm: the cut-off below is relative per column
    scale = np.where(scale > 0, scale, 1.0)
    theta, *_ = np.linalg.lstsq(A / scale, b, rcond=1e-10)
    return RegressorPort(pmodel, theta / scale, coulomb_velocity, model_text, model_format)


__all__ = ["RegressorPort", "fit_regressor_port", "load_model_text", "FRICTION_TERMS"]
