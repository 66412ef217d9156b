"""The excitation report of a recording, before training: per joint the ranges of q, q̇, q̈ covered,
and warnings in words where the data cannot separate the terms of the dynamics, with what to record
instead (EQUATIONS.md §7). With a URDF prior, also the rank of the free rows' regressor: which
parameter combinations this recording identifies and which stay at the URDF's values.

The checks, per joint (model order; ``j`` free, ``e`` servo):

* a joint that never moves (``q`` spread and ``|q̇|`` below a floor): nothing about it is seen;
* a servo at nearly constant speed (``q̇_e`` within 5 % of its peak of the median speed in most
  samples, the median not near zero): the coupling ``M_fe q̈_e`` is
  excited only in the ramps and every term in ``q̇_e²`` is constant, so a pendulum's centrifugal term
  and its gravity term trade off freely (measured: their correlation over the recording);
* a free joint with a small swing (``sin q ≈ q``): the potential is seen near its minimum only;
* a free joint whose velocity never changes sign: Coulomb friction and a constant force coincide;
* one recording only: the validation is cut from it (in-distribution).
"""

from __future__ import annotations

import numpy as np

SMALL_SWING_RAD = 0.3
CORRELATION_LIMIT = 0.98


def _range(x) -> list:
    return [float(np.min(x)), float(np.max(x))]


def _corr(a, b) -> float:
    a, b = a - a.mean(), b - b.mean()
    den = np.sqrt(np.sum(a * a) * np.sum(b * b))
    return float(abs(np.sum(a * b)) / den) if den > 0 else 1.0


def excitation_report(
    samples: dict,
    free_joints,
    servo_joints,
    units=(),
    kinds=(),
    *,
    recordings: int = 1,
    identification=None,
    urdf=None,
) -> dict:
    """``{"joints": {name: ranges}, "warnings": [sentences], "lines": [the report for people]}`` of
    model-order ``samples`` (``q, qd, qdd``); ``identification``/``urdf`` add the prior's rank."""
    q, qd, qdd = (np.asarray(samples[k], float) for k in ("q", "qd", "qdd"))
    joints = list(free_joints) + list(servo_joints)
    n_f = len(free_joints)
    units = list(units) or ["rad"] * len(joints)
    kinds = list(kinds) or ["revolute"] * len(joints)
    ranges, warnings = {}, []
    for i, joint in enumerate(joints):
        u = units[i]
        ranges[joint] = {
            "q": _range(q[:, i]),
            "qd": _range(qd[:, i]),
            "qdd": _range(qdd[:, i]),
            "unit": u,
            "kind": kinds[i],
            "role": "free" if i < n_f else "servo",
        }
        spread, speed = float(np.ptp(q[:, i])), float(np.max(np.abs(qd[:, i])))
        if spread < 1e-3 and speed < 1e-2:
            warnings.append(
                f"{joint} never moves (q spread {spread:.1e} {u}): nothing about it — its inertia, its "
                "coupling "
                f"to the other joints, its friction — can be identified; record a motion of {joint}"
            )
            continue
        if i >= n_f:
            median = float(np.median(qd[:, i]))
            quiet = float(np.mean(np.abs(qd[:, i] - median) < 0.05 * speed))
            if quiet > 0.7 and abs(median) > 0.05 * speed:
                mean_speed = median
                text = (
                    f"servo {joint} runs at nearly constant speed ({mean_speed:.3g} {u}/s, within 5 % of its "
                    f"peak speed in {quiet:.0%} of the samples): the coupling through its acceleration is "
                    "excited only in the ramps, and terms in its speed squared (centrifugal) are constant, "
                    "so they cannot be told apart from the potential (gravity) terms"
                )
                worst = _centrifugal_collinearity(q, qd, i, n_f, units)
                if worst is not None:
                    text += (
                        f" (over this recording sin q and sin q cos q · q̇_{joint}² of {joints[worst[0]]} "
                        f"correlate {worst[1]:.4f})"
                    )
                warnings.append(
                    text + f"; record {joint} with varying speed and both directions (a chirp, impulses, "
                    "steps of several sizes)"
                )
        else:
            if u == "rad" and kinds[i] != "cyclic" and spread < SMALL_SWING_RAD:
                warnings.append(
                    f"{joint} swings only {spread:.2f} rad: sin q ≈ q there, so the shape of the potential "
                    "is "
                    "seen near its minimum only; record larger swings"
                )
            if np.min(qd[:, i]) * np.max(qd[:, i]) >= 0:
                warnings.append(
                    f"{joint}'s velocity never changes sign: Coulomb friction and a constant force on it "
                    "cannot be told apart; record motions in both directions"
                )
    if recordings < 2:
        warnings.append(
            "one recording: validation is cut from it (in-distribution); pass another recording of different "
            "excitation as --test-bag to see how the model transfers"
        )
    report = {"joints": ranges, "warnings": warnings, "samples": int(len(q))}
    if identification is not None and urdf is not None:
        report["prior"] = prior_rank(samples, n_f, urdf, identification)
    report["lines"] = describe(report)
    return report


def _centrifugal_collinearity(q, qd, e, n_f, units):
    """The free revolute joint whose gravity-like term ``sin q_f`` and centrifugal-like term
    ``sin q_f cos q_f q̇_e²`` are most correlated over the recording: (joint index, correlation)."""
    best = None
    for j in range(n_f):
        if units[j] != "rad":
            continue
        s = np.sin(q[:, j])
        c = _corr(s, s * np.cos(q[:, j]) * qd[:, e] ** 2)
        if c > CORRELATION_LIMIT and (best is None or c > best[1]):
            best = (j, c)
    return best


def prior_rank(samples: dict, n_f: int, urdf, identification, max_samples: int = 2000) -> dict:
    """Singular values of the free rows' regressor (columns scaled by the URDF's magnitudes): how many
    parameter combinations the recording determines, which do not enter the free rows at all, and the
    parameters of the combinations it leaves to the URDF."""
    from .urdf_prior import PARAMETER_NAMES, regressor

    q, qd, qdd = (np.asarray(samples[k], float) for k in ("q", "qd", "qdd"))
    if len(q) > max_samples:
        pick = np.linspace(0, len(q) - 1, max_samples).astype(int)
        q, qd, qdd = q[pick], qd[pick], qdd[pick]
    Y = regressor(urdf, q, qd, qdd)[:, :n_f, :].reshape(-1, 10 * urdf.n)
    scale = np.abs(urdf.params).reshape(-1)
    scale = np.maximum(scale, 1e-3 * max(scale.max(), 1e-12))
    A = Y * scale
    _, s, Vt = np.linalg.svd(A, full_matrices=False)
    rel = s / max(s[0], 1e-300)
    names = [f"{urdf.joints[k // 10]}:{PARAMETER_NAMES[k % 10]}" for k in range(10 * urdf.n)]
    absent = [names[k] for k in range(len(names)) if np.linalg.norm(A[:, k]) <= 1e-12 * max(s[0], 1e-300)]
    structural = int(np.sum(rel < 1e-9))
    weak = [k for k in range(len(rel)) if 1e-9 <= rel[k] < 1e-3]
    weak_terms = []
    for k in weak:
        top = np.argsort(-np.abs(Vt[k]))[:3]
        weak_terms.append(" + ".join(f"{Vt[k, t]:+.2f}·{names[t]}" for t in top))
    return {
        "parameters": len(names),
        "identified_directions": int(np.sum(rel >= 1e-3)),
        "not_in_free_rows": absent,
        "structurally_unidentifiable": structural,
        "weak_directions": weak_terms,
        "singular_values_rel": [float(x) for x in rel],
        "prior_weight": identification.prior_weight,
        "fit_residual_rel": identification.residual_rel,
        "changed_from_urdf": {k: list(v) for k, v in identification.changes.items()},
        "rows": identification.rows,
    }


def describe(report: dict) -> list[str]:
    lines = [f"excitation of the training data ({report['samples']} samples):"]
    for joint, r in report["joints"].items():
        u = r["unit"]
        lines.append(
            f"  {joint} ({r['role']}, {r['kind']}): q [{r['q'][0]:.3g}, {r['q'][1]:.3g}] {u}, q̇ "
            f"[{r['qd'][0]:.3g}, {r['qd'][1]:.3g}] {u}/s, q̈ [{r['qdd'][0]:.3g}, {r['qdd'][1]:.3g}] {u}/s²"
        )
    prior = report.get("prior")
    if prior:
        lines.append(
            f"  URDF prior ({prior['rows']}): the recording determines {prior['identified_directions']} of "
            f"{prior['parameters']} parameter combinations; {len(prior['not_in_free_rows'])} parameters "
            "do not enter the free joints' equations (they do not affect q̈_f); the overall scale is fixed "
            "by the URDF"
            + (
                f"; {len(prior['weak_directions'])} combinations are barely excited and stay near the URDF's "
                f"values ({'; '.join(prior['weak_directions'][:3])})"
                if prior["weak_directions"]
                else ""
            )
        )
        changed = prior["changed_from_urdf"]
        if changed:
            lines.append(
                "  identified (URDF → recording): "
                + ", ".join(f"{k} {a:.4g} → {b:.4g}" for k, (a, b) in list(changed.items())[:8])
            )
    lines += [f"warning: {w}" for w in report["warnings"]]
    return lines


def write_report(directory, report: dict) -> str:
    """``identifiability.txt`` in the report folder (the same lines as the log)."""
    from pathlib import Path

    path = Path(directory) / "identifiability.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(report["lines"]) + "\n")
    return path.name


__all__ = ["excitation_report", "prior_rank", "describe", "write_report"]
