"""The array operations of :mod:`ros_lnn.physics.lagrangian` on torch, so the one ``dynamics`` function
serves the numpy reference systems and the network alike.

Everything lowers to plain ONNX ops: ``take`` becomes a Slice for contiguous indices (the model order
``[free; servo]`` makes every index list contiguous) and a Gather otherwise; ``solve`` of the small SPD
block ``M_ff`` is an unrolled Cholesky factorisation with forward/back substitution (a division for
one free coordinate), so no linear-algebra op is needed in the graph.
"""

from __future__ import annotations

import torch


def _contiguous(idx) -> bool:
    return len(idx) > 0 and list(idx) == list(range(idx[0], idx[0] + len(idx)))


def einsum(spec: str, *xs):
    """``torch.einsum`` for the contractions the machinery uses, written as MatMul/Mul/ReduceSum: ONNX
    Runtime runs these faster than its Einsum kernel on the tiny per-sample tensors of this model."""
    if spec == "...ij,...j->...i":
        A, x = xs
        if A.shape[-1] == 1:  # a column: no reduction needed
            return A.squeeze(-1) * x
        return (A @ x.unsqueeze(-1)).squeeze(-1)
    if spec == "...i,...i->...":
        a, b = xs
        return (a * b).sum(-1)
    if spec == "...kij,...j->...ki":
        D, v = xs  # one (k·i, j) × (j, 1) product per sample, not k tiny ones
        return (D.flatten(-3, -2) @ v.unsqueeze(-1)).squeeze(-1).unflatten(-1, D.shape[-3:-1])
    if spec == "...k,...ki->...i":
        v, X = xs
        return (v.unsqueeze(-2) @ X).squeeze(-2)
    if spec == "...i,...ij,...j->...":
        a, A, b = xs
        return ((a.unsqueeze(-2) @ A) @ b.unsqueeze(-1)).squeeze(-1).squeeze(-1)
    return torch.einsum(spec, *xs)


class TorchOps:
    einsum = staticmethod(einsum)

    @staticmethod
    def swap(x):
        """Transpose of the last two axes."""
        return x.transpose(-1, -2)

    @staticmethod
    def cat(xs, axis=-1):
        xs = [x for x in xs if x.shape[axis] != 0]
        return xs[0] if len(xs) == 1 else torch.cat(xs, dim=axis)

    @staticmethod
    def take(x, idx, axis=-1):
        idx = [int(i) for i in idx]
        size = x.shape[axis]
        if idx == list(range(size)):
            return x
        if _contiguous(idx):
            return x.narrow(axis, idx[0], len(idx))
        if not idx:
            return x.narrow(axis, 0, 0)
        return x.index_select(axis, torch.tensor(idx, device=x.device))

    @staticmethod
    def solve(A, b):
        """``A⁻¹ b`` for a symmetric positive definite ``A`` (..., m, m) of small fixed m; b (..., m).
        Unrolled Cholesky (elementwise ops only: what ONNX export, tracing and ``torch.compile`` see), or
        in eager CPU runs from :data:`LAPACK_SOLVE_FROM` coordinates on LAPACK's batched Cholesky (the
        unrolled form's O(m³) small ops cost more from m ≈ 4 on: 7 coordinates, batch 512, forward and
        backward 5.8 → 3.0 ms)."""
        m = A.shape[-1]
        if m == 1:
            return b / A[..., 0]
        if m >= LAPACK_SOLVE_FROM and A.device.type == "cpu" and _eager():
            return torch.cholesky_solve(b.unsqueeze(-1), torch.linalg.cholesky(A)).squeeze(-1)
        return cholesky_solve_unrolled(A, b)


#: Coordinate count from which :meth:`TorchOps.solve` uses LAPACK in eager CPU runs (measured crossover ≈ 4).
LAPACK_SOLVE_FROM = 5


def _eager() -> bool:
    """Not under ONNX export, TorchScript tracing, ``torch.export`` or ``torch.compile``."""
    return not (torch.onnx.is_in_onnx_export() or torch.jit.is_tracing() or torch.compiler.is_compiling())


def cholesky_solve_unrolled(A, b):
    m = A.shape[-1]
    L = [[None] * m for _ in range(m)]
    for j in range(m):
        s = A[..., j, j]
        for k in range(j):
            s = s - L[j][k] * L[j][k]
        L[j][j] = torch.sqrt(s)
        for i in range(j + 1, m):
            s = A[..., i, j]
            for k in range(j):
                s = s - L[i][k] * L[j][k]
            L[i][j] = s / L[j][j]
    y = [None] * m
    for i in range(m):
        s = b[..., i]
        for k in range(i):
            s = s - L[i][k] * y[k]
        y[i] = s / L[i][i]
    x = [None] * m
    for i in reversed(range(m)):
        s = y[i]
        for k in range(i + 1, m):
            s = s - L[k][i] * x[k]
        x[i] = s / L[i][i]
    return torch.stack(x, dim=-1)


TORCH = TorchOps()
