"""Friction with memory: per joint a bank of stop operators (Maxwell-slip elements).

At rest a joint's torque remembers where the joint came from: after a motion in +q̇ the gear's
friction holds a torque of one sign, after −q̇ of the other (stiction), and after a reversal it
changes like a spring over a small displacement before the joint slides again (presliding,
hysteresis). A function of the present q̇ cannot show this. The Maxwell-slip model can: K elastic
elements in parallel, element i sticking until the joint has moved ``w_i`` away from where it
last slipped, then sliding with it. Its state is per element the position ``p_i`` where it sticks —
a play operator::

    p_i(t_k) = clip(p_i(t_{k−1}), q(t_k) − w_i, q(t_k) + w_i)
    s_i(t_k) = (q(t_k) − p_i(t_k)) / w_i ∈ [−1, 1]
    τ_mem = Σ_i h_i s_i

``s_i`` is +1 while the joint slides in +q and holds its value when the joint stops. The torques
``h_i`` (one per element and joint) enter linearly, so the memory is identified with the rigid body
and the rest of the friction in the same least squares (:mod:`ros_lnn.arm.identification`); the widths
``w_i`` are a fixed logarithmic grid from the encoder's noise to a few degrees. The state advances
on positions only — irregular stamps need nothing, a sample rate does not enter — from the logged
(unfiltered) q, so the observer and the controller run it online as the recordings ran it.

**The start.** A recording (or an observer) that begins at rest does not know ``p``: the element
can hold anything in ``[q − w_i, q + w_i]``. The update is monotone in ``p``, so the two extremes
``p = q ∓ w_i`` bound every possible state; once the joint has travelled far enough in one direction
both give the same ``p`` and the state is known (:meth:`FrictionMemory.known`). A state not yet known
starts *neutral* (``p = q``, ``s = 0``: no memory torque). Training leaves out the samples whose state
is not yet known (``warm-up``); evaluation and the nodes use the neutral start (the effect: on a
recording that begins at rest, the first motion of each joint by ``2 w_max`` is predicted without
memory). The observer may instead set the state at its start from the measured torque
(:func:`state_matching`), as a torque sensor's bias is set at power-up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ModelError

#: element widths (rad, or m for a prismatic joint): from above an encoder's noise to a few degrees
WIDTHS = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2)


def advance(state: np.ndarray, q: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """The play positions after the sample ``q`` (…, n) from ``state`` (…, n, K)."""
    q = np.asarray(q, dtype=float)[..., None]
    return np.minimum(np.maximum(state, q - widths), q + widths)  # np.clip's values, in a fifth of its time


def element_outputs(state_after: np.ndarray, q, widths: np.ndarray) -> np.ndarray:
    """``s`` (…, n, K) of the play positions after a sample at ``q``."""
    return (np.asarray(q, dtype=float)[..., None] - state_after) / widths


def _pieces(starts, length: int):
    if tuple(starts) == (0,):  # one piece: the observer's batches
        return [(0, length)]
    bounds = sorted({int(s) for s in starts if 0 <= int(s) < length} | {0})
    return list(zip(bounds, [*bounds[1:], length]))


@dataclass
class FrictionMemory:
    """The memory term of an arm model: ``widths`` (K,) and the element torques ``weights`` (n, K)
    (a joint whose memory is off has zeros)."""

    widths: np.ndarray
    weights: np.ndarray

    def __post_init__(self):
        self.widths = np.asarray(self.widths, dtype=float).reshape(-1)
        self.weights = np.atleast_2d(np.asarray(self.weights, dtype=float))
        if self.weights.shape[1] != len(self.widths):
            raise ModelError(
                f"friction memory: {self.weights.shape[1]} weights per joint for {len(self.widths)} widths"
            )
        if not (np.all(np.isfinite(self.widths)) and np.all(self.widths > 0)):
            raise ModelError("friction memory: widths must be finite and > 0")
        if not np.all(np.isfinite(self.weights)):
            raise ModelError("friction memory: non-finite element torques")

    @property
    def n(self) -> int:
        return self.weights.shape[0]

    @property
    def k(self) -> int:
        return len(self.widths)

    @property
    def active(self) -> np.ndarray:
        """Per joint: whether it has a memory term."""
        return np.any(self.weights != 0, axis=1)

    def neutral_state(self, q) -> np.ndarray:
        """(…, n, K) ``p = q``: every element unloaded."""
        q = np.asarray(q, dtype=float)
        return np.repeat(q[..., None], self.k, axis=-1)

    def states(self, q, starts=(0,), first=None) -> np.ndarray:
        """(N, n, K) the state *before* each sample of the position stream ``q`` (N, n) whose pieces
        (a recording, a stretch between gaps) begin at ``starts``; each piece starts neutral at its
        first sample unless ``first`` (n, K) gives the state before sample 0."""
        return play_states(q, self.widths, starts, first)

    def known(self, q, starts=(0,)) -> np.ndarray:
        """(N, n) whether the state at each sample is determined whatever the state at the piece's
        start was (the two extreme starts agree on every element)."""
        q = np.asarray(q, dtype=float)
        N, n = q.shape
        out = np.zeros((N, n), dtype=bool)
        w = self.widths
        for a, b in _pieces(starts, N):
            lo = q[a][:, None] - w
            hi = q[a][:, None] + w
            for k in range(a, b):
                lo = advance(lo, q[k], w)
                hi = advance(hi, q[k], w)
                out[k] = np.all(hi - lo <= 1e-6 * w, axis=1)
                if out[k].all():  # once known, the two starts evolve alike
                    out[k:b] = True
                    break
        return out

    def outputs(self, q, starts=(0,), first=None) -> np.ndarray:
        """(N, n, K) the element outputs ``s`` along ``q``."""
        q = np.asarray(q, dtype=float)
        before = self.states(q, starts, first)
        return element_outputs(advance(before, q, self.widths), q, self.widths)

    def torque_of_outputs(self, s: np.ndarray) -> np.ndarray:
        return np.einsum("...jk,jk->...j", s, self.weights)

    def torque(self, q, starts=(0,), first=None) -> np.ndarray:
        """τ_mem (N, n) along the position stream."""
        return self.torque_of_outputs(self.outputs(q, starts, first))

    def saturation_torque(self) -> np.ndarray:
        """(n,) Σ_i h_i: the memory torque of a joint sliding (or stopped after sliding) in +q."""
        return self.weights.sum(axis=1)

    def to_metadata(self) -> dict:
        return {"widths": self.widths.tolist(), "weights": self.weights.tolist()}

    @classmethod
    def from_metadata(cls, meta, n: int) -> FrictionMemory | None:
        if not meta:
            return None
        try:
            widths = np.asarray(meta["widths"], dtype=float)
            weights = np.asarray(meta["weights"], dtype=float).reshape(n, len(widths))
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"the arm metadata's friction_memory is unreadable ({exc})") from None
        return cls(widths, weights)


def play_states(q, widths, starts=(0,), first=None) -> np.ndarray:
    """(N, n, K) the play positions before each sample (see :meth:`FrictionMemory.states`)."""
    q = np.asarray(q, dtype=float)
    w = np.asarray(widths, dtype=float)
    N, n = q.shape
    out = np.empty((N, n, len(w)))
    low, high = q[:, :, None] - w, q[:, :, None] + w  # advance's bounds, for every sample at once
    maximum, minimum = np.maximum, np.minimum
    for a, b in _pieces(starts, N):
        p = np.repeat(q[a][:, None], len(w), axis=1) if (a != 0 or first is None) else np.asarray(first)
        for k in range(a, b):
            out[k] = p
            p = minimum(maximum(p, low[k]), high[k])
    return out


def state_matching(memory: FrictionMemory, q, torque) -> np.ndarray:
    """(n, K) a state at the positions ``q`` (n,) whose memory torque is as close to ``torque`` (n,)
    as the element bounds allow: every element of a joint at the same output ``c_j`` ∈ [−1, 1],
    ``c_j = clip(torque_j / Σ_i h_ji)``. For an observer that starts at rest without contact: the
    torque the rest of the model leaves unexplained is the friction the joint holds."""
    q = np.asarray(q, dtype=float)
    total = memory.saturation_torque()
    c = np.divide(
        np.asarray(torque, dtype=float), total, out=np.zeros_like(total), where=np.abs(total) > 1e-12
    )
    c = np.clip(c, -1.0, 1.0)
    return q[:, None] - c[:, None] * memory.widths[None, :]


def memory_columns(s: np.ndarray) -> np.ndarray:
    """(N, n, n K) least-squares columns of the element outputs ``s`` (N, n, K): joint ``j``'s row
    holds its own ``s_j`` at columns ``K j … K j + K − 1``."""
    N, n, K = s.shape
    out = np.zeros((N, n, n * K))
    for j in range(n):
        out[:, j, K * j : K * (j + 1)] = s[:, j, :]
    return out


def dahl_outputs(q, width: float, starts=(0,)) -> np.ndarray:
    """(N, n) one smooth element per joint — Dahl's model, LuGre's bristle at a constant friction
    level: ``dz/dq = sign(Δq) − z / w`` integrated exactly over each position step, ``s = z / w`` ∈
    (−1, 1), neutral at each piece's start. The smooth single-state alternative to the stop operators,
    compared with them in ``ros-lnn bench realarm``."""
    q = np.asarray(q, dtype=float)
    N, n = q.shape
    out = np.zeros((N, n))
    for a, b in _pieces(starts, N):
        s = np.zeros(n)
        for k in range(a + 1, b):
            step = q[k] - q[k - 1]
            target = np.sign(step)
            s = target + (s - target) * np.exp(-np.abs(step) / width)
            out[k] = s
    return out
