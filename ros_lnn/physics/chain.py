"""Planar serial chains built from partial Lagrangians (partial-Lagrangian paper, docs/papers.md;
EQUATIONS.md §5).

Conventions: the chain hangs in the vertical x–y plane from a base at the origin, gravity along −y.
Coordinates are relative joint coordinates, one per link, in link order:
  * revolute joint i: angle ``q_i`` of link i relative to link i−1 (link 0 = the downward vertical),
    so the absolute angle is ``φ_i = Σ_{j ≤ i, revolute} q_j`` and ``φ = 0`` hangs straight down;
  * prismatic joint i: extension ``q_i`` of link i along the direction of link i−1 (``φ_i = φ_{i−1}``);
    link i's body and far end slide by ``q_i``: its reach is ``length + q_i``.
Posture vector ``e(φ) = [sin φ, −cos φ]`` (the paper's ``e_θ`` measured from the downward vertical),
``∂e/∂φ = [cos φ, sin φ] = e(φ + π/2)``.

Link i owns the partial Lagrangian ``𝓛_i = ½ q̇ᵀ M_i(q) q̇ − V_i(q)`` with
``M_i = m_i J_iᵀ J_i + I_i s_i s_iᵀ`` (``J_i`` the Jacobian of its centre of mass, ``s_i = ∂φ_i/∂q``)
and ``V_i = m_i g y_i``; ``M_i`` and ``V_i`` depend on ``q_1..q_i`` only. The whole system is
``M = Σ M_i``, ``V = Σ V_i``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from .lagrangian import NUMPY, Partition, dynamics
from .systems import LagrangianSystem

JOINT_KINDS = ("revolute", "prismatic")


@dataclass(frozen=True)
class Link:
    """One link: its joint (kind, name), mass, length (joint to far end; nominal length for a
    prismatic link), centre-of-mass offset from the joint along the link, and rotational inertia
    about the centre of mass (0 = point mass)."""

    joint: str
    kind: str = "revolute"
    mass: float = 1.0
    length: float = 1.0
    com: float | None = None  # default: at the far end (point mass at the tip, the paper's pendulum)
    inertia: float = 0.0

    def __post_init__(self):
        if self.kind not in JOINT_KINDS:
            raise ConfigError(f"link '{self.joint}': joint kind '{self.kind}' is not one of {JOINT_KINDS}")
        if not self.mass > 0 or self.inertia < 0:
            raise ConfigError(f"link '{self.joint}': mass must be > 0 and inertia >= 0")

    @property
    def com_offset(self) -> float:
        return self.length if self.com is None else self.com


class PlanarChain(LagrangianSystem):
    """A planar serial chain whose mass matrix and potential are sums of per-link partial terms."""

    name = "chain"

    def __init__(self, links: Sequence[Link], servo_joints: Sequence[str] = (), g: float = 9.8):
        self.links = tuple(links)
        if not self.links:
            raise ConfigError("a chain needs at least one link")
        names = [link.joint for link in self.links]
        if len(set(names)) != len(names):
            raise ConfigError(f"chain joint names must be unique, got {names}")
        unknown = [s for s in servo_joints if s not in names]
        if unknown:
            raise ConfigError(f"servo joints {unknown} are not joints of this chain {names}")
        self.g = float(g)
        self.coordinate_names = tuple(names)
        self.coordinate_units = tuple("rad" if link.kind == "revolute" else "m" for link in self.links)
        self.partition = Partition.from_servo(len(names), [names.index(s) for s in servo_joints])
        n = len(names)
        revolute = np.array([link.kind == "revolute" for link in self.links], dtype=float)
        # S[j, k] = ∂φ_j/∂q_k (lower triangular), P[j, k] = ∂(reach of link j)/∂q_k (diagonal)
        self._S = np.tril(np.ones((n, n))) * revolute[None, :]
        self._P = np.diag(1.0 - revolute)

    @classmethod
    def uniform(
        cls,
        n_links: int,
        *,
        mass=1.0,
        length=1.0,
        com=None,
        inertia=0.0,
        servo_joints=(),
        g=9.8,
        prefix="joint_",
    ) -> PlanarChain:
        """``n_links`` identical revolute links named ``joint_1..joint_n``."""
        links = [Link(f"{prefix}{i + 1}", "revolute", mass, length, com, inertia) for i in range(n_links)]
        return cls(links, servo_joints, g)

    # -- building new systems (the paper's extension and reconstruction) ---------------------------
    @property
    def servo_joints(self) -> tuple[str, ...]:
        return self.servo_names

    def append_link(self, link: Link, servo: bool = False) -> PlanarChain:
        """Extension: the same chain with one more link at the tip."""
        return PlanarChain(self.links + (link,), self.servo_joints + ((link.joint,) if servo else ()), self.g)

    def replace_link(self, index: int, link: Link) -> PlanarChain:
        """Reconstruction: link ``index`` (0-based) swapped, e.g. revolute → prismatic."""
        links = list(self.links)
        old = links[index].joint
        links[index] = link
        servo = tuple(link.joint if s == old else s for s in self.servo_joints)
        return PlanarChain(links, servo, self.g)

    def with_servo(self, servo_names) -> PlanarChain:
        return PlanarChain(self.links, tuple(servo_names), self.g)

    # -- kinematics -------------------------------------------------------------------------------
    def _reach(self, q):
        """(..., n) distance from each joint to the next joint and to each centre of mass."""
        nominal = np.array([link.length for link in self.links])
        com = np.array([link.com_offset for link in self.links])
        prismatic = np.diag(self._P)
        return nominal + prismatic * q, com + prismatic * q

    def _angles(self, q):
        return np.einsum("jk,...k->...j", self._S, q)

    def com_kinematics(self, q, i):
        """Position (..., 2), Jacobian (..., 2, n) and Hessian (..., n, 2, n) of link i's centre of mass."""
        q = np.asarray(q, dtype=float)
        reach, com = self._reach(q)
        rho = np.concatenate([reach[..., :i], com[..., i : i + 1]], axis=-1)  # (..., i+1)
        phi = self._angles(q)[..., : i + 1]
        e = np.stack([np.sin(phi), -np.cos(phi)], axis=-1)  # (..., i+1, 2)
        ep = np.stack([np.cos(phi), np.sin(phi)], axis=-1)  # ∂e/∂φ
        S, P = self._S[: i + 1], self._P[: i + 1]
        pos = np.einsum("...j,...jd->...d", rho, e)
        J = np.einsum("jk,...jd->...dk", P, e) + np.einsum("...j,jk,...jd->...dk", rho, S, ep)
        cross = np.einsum("jk,jl,...jd->...kdl", P, S, ep)
        H = cross + np.swapaxes(cross, -3, -1) - np.einsum("...j,jk,jl,...jd->...kdl", rho, S, S, e)
        return pos, J, H

    def joint_positions(self, q):
        """(..., n+1, 2): base, every joint and the tip, for plots and markers."""
        q = np.asarray(q, dtype=float)
        reach, _ = self._reach(q)
        phi = self._angles(q)
        e = np.stack([np.sin(phi), -np.cos(phi)], axis=-1)
        pts = np.cumsum(reach[..., None] * e, axis=-2)
        return np.concatenate([np.zeros(pts.shape[:-2] + (1, 2)), pts], axis=-2)

    # -- partial Lagrangians ----------------------------------------------------------------------
    def link_terms(self, q, i):
        """``(M_i, ∂M_i/∂q, V_i, ∂V_i/∂q)`` of link i's partial Lagrangian (full n-sized arrays)."""
        link = self.links[i]
        pos, J, H = self.com_kinematics(q, i)
        s = self._S[i]
        M = link.mass * np.einsum("...dk,...dl->...kl", J, J) + link.inertia * np.outer(s, s)
        HJ = np.einsum("...kdi,...dj->...kij", H, J)
        dM = link.mass * (HJ + np.swapaxes(HJ, -1, -2))
        V = link.mass * self.g * pos[..., 1]
        dV = link.mass * self.g * J[..., 1, :]
        return M, dM, V, dV

    def mass_matrix(self, q):
        return sum(self.link_terms(q, i)[0] for i in range(len(self.links)))

    def mass_matrix_partials(self, q):
        return sum(self.link_terms(q, i)[1] for i in range(len(self.links)))

    def potential(self, q):
        return sum(self.link_terms(q, i)[2] for i in range(len(self.links)))

    def potential_gradient(self, q):
        return sum(self.link_terms(q, i)[3] for i in range(len(self.links)))

    def dynamics(self, q, qd, *, qdd=None, qdd_e=None, Q_f=None) -> dict:
        # One pass over the links instead of four (same sums as the methods above).
        q = np.asarray(q, dtype=float)
        terms = [self.link_terms(q, i) for i in range(len(self.links))]
        M, dM, V, dV = (sum(t[k] for t in terms) for k in range(4))
        return dynamics(
            NUMPY, M, dM, V, dV, np.asarray(qd, dtype=float), self.partition, qdd=qdd, qdd_e=qdd_e, Q_f=Q_f
        )

    def partial_forces(self, q, qd, qdd):
        """(..., n, n_links): column i is ``D_k 𝓛_i`` for every coordinate k (the paper's Table 1
        column i); row sums are the whole-system generalised force ``Q``. Rows k > i are zero.

        Extension (``append_link``) holds pointwise in (q, q̇, q̈): the first n columns of the longer
        chain, restricted to its first n rows, equal this chain's columns at the same first-n
        coordinates, and vanish in the new row. The motion of the longer chain differs, of course:
        the new column loads every joint below the new link."""
        q, qd, qdd = (np.asarray(a, dtype=float) for a in (q, qd, qdd))
        cols = []
        for i in range(len(self.links)):
            M, dM, V, dV = self.link_terms(q, i)
            cols.append(dynamics(NUMPY, M, dM, V, dV, qd, self.partition, qdd=qdd)["Q"])
        return np.stack(cols, axis=-1)

    def describe(self) -> list[dict]:
        return [dict(vars(link)) | {"com": link.com_offset} for link in self.links]


def rod(joint: str, mass: float = 1.0, length: float = 1.0, kind: str = "revolute") -> Link:
    """A uniform slender rod: centre of mass at mid-length, inertia m l²/12."""
    return Link(joint, kind, mass, length, length / 2, mass * length**2 / 12)


__all__ = ["Link", "PlanarChain", "rod", "JOINT_KINDS"]
