"""``ros-lnn bench stop``: what a latched joint-limit stop leaves of a moving arm, zero efforts against
the protective stop (``limit_reaction: zero`` / ``brake``).

The closed loop of ``dac_demo.launch.py`` (the shipped demo arm tracing its circle, dac_controller's
pipeline on dac_chain_sim's dynamics: :func:`ros_lnn.control.closed_loop.sampled_loop`, 500 Hz, the
efforts held over each period as the simulator holds them). At ``--change-at`` seconds (default 2) the
gains go to 1e6 (``kd_linear``, ``kd_angular``, ``lambda_position``, ``lambda_attitude``, as ``ros2
param set`` would set them); the arm trips a joint limit (a velocity beyond 1.2 × its limit) and the
stop latches. For each reaction: the time and cause of the stop, each joint's largest excursion past
its hard position limits after the stop, where the joints are at the end (``--duration``, default 10
s) and how fast they still move. Last line: ``protective stop after gains of 1e6: overshoot past the
joint limits zero A rad, brake B rad; brake at rest R s after the stop, inside the limits: yes|no``.
"""

from __future__ import annotations

import numpy as np

GAINS = ("kd_linear", "kd_angular", "lambda_position", "lambda_attitude")


def demo_values(reaction: str) -> tuple[dict, np.ndarray]:
    """dac_controller's parameter values of the demo (config/dac_demo.yaml over the defaults) with
    ``limit_reaction`` and ``fault_reaction`` set to ``reaction``; the simulator's initial positions."""
    import yaml

    from ros_lnn.nodes.dac_controller.parameters import PARAMETERS
    from ros_lnn.shipped import shipped_path

    doc = yaml.safe_load(shipped_path("config", "dac_demo.yaml").read_text())
    values = {p.name: p.default for p in PARAMETERS}
    values.update(doc["/**/dac_controller"]["ros__parameters"])
    values.update(limit_reaction=reaction, fault_reaction=reaction)
    q0 = np.asarray(doc["/**/dac_chain_sim"]["ros__parameters"]["initial_positions"], float)
    return PARAMETERS.coerce(values), q0


def run_stop(reaction: str, duration: float = 10.0, change_at: float = 2.0, gain: float = 1e6) -> dict:
    """The demo loop with the gains set to ``gain`` at ``change_at``; the stop's figures (module text)."""
    from ros_lnn.control.closed_loop import sampled_loop
    from ros_lnn.control.protective_stop import SETTLED_SPEED
    from ros_lnn.nodes.dac_controller.build import built_in_circle, make_pipeline
    from ros_lnn.nodes.dac_controller.parameters import gains_from_values
    from ros_lnn.physics.multibody.build import load_model
    from ros_lnn.shipped import shipped_path

    values, q0 = demo_values(reaction)
    pipe = make_pipeline(load_model(shipped_path("config", "dac_chain.urdf")), values)
    pipe.set_ee_path(built_in_circle(values, 0.0))
    dt = 2e-3
    changed: list[float] = []

    def set_gains(t: float) -> None:
        if t >= change_at and not changed:
            pipe.set_gains(gains_from_values(values, dict.fromkeys(GAINS, gain)))
            changed.append(t)

    log = sampled_loop(pipe, q0, duration, dt, before_step=set_gains)
    assert pipe.joint_limits is not None  # the demo enforces its URDF limits
    limits = pipe.joint_limits.limits
    if not log.stopped.any():
        return {"reaction": reaction, "stopped": False}
    k = int(np.argmax(log.stopped))
    after = log.q[k:]
    past = np.maximum(after - limits.upper, limits.lower - after).max(axis=0)
    speed = np.abs(log.qd).max(axis=1)
    moving = np.nonzero(speed[k:] >= SETTLED_SPEED)[0]  # samples after the stop with a joint moving
    if not moving.size:
        rest_s: float | None = 0.0
    elif moving[-1] == len(speed) - k - 1:
        rest_s = None  # still moving at the end
    else:
        rest_s = float((moving[-1] + 1) * dt)
    final = log.q[-1]
    return {
        "reaction": reaction,
        "stopped": True,
        "stop_time_s": float(log.t[k]),
        "cause": pipe.joint_limits.violation,
        "overshoot_rad": np.maximum(past, 0.0).round(4).tolist(),
        "max_overshoot_rad": float(max(past.max(), 0.0)),
        "final_q": final.round(3).tolist(),
        "final_speed": float(speed[-1]),
        "rest_after_stop_s": rest_s,
        "inside_limits": bool(np.all((final >= limits.lower) & (final <= limits.upper))),
    }


def bench_stop(args) -> dict:
    from ros_lnn.timing import machine_description

    duration = float(getattr(args, "duration", None) or 10.0)
    print(
        f"protective stop on the demo arm's closed loop (500 Hz, {duration:g} s; gains of 1e6 set at 2 s); "
        f"{machine_description()}",
        flush=True,
    )
    runs = {}
    for reaction in ("zero", "brake"):
        run = runs[reaction] = run_stop(reaction, duration)
        if not run["stopped"]:
            print(f"  {reaction}: no stop")
            continue
        rest = run["rest_after_stop_s"]
        print(
            f"  limit_reaction {reaction}: stop at {run['stop_time_s']:.3f} s ({run['cause']}); past the "
            f"limits after it [rad] {run['overshoot_rad']}; at the end q = {run['final_q']} rad, "
            f"|q̇| max {run['final_speed']:.3g} rad/s; at rest {'never' if rest is None else f'{rest:.3f} s'} "
            f"after the stop"
        )
    zero, brake = runs["zero"], runs["brake"]
    rest = brake.get("rest_after_stop_s")
    line = (
        f"protective stop after gains of 1e6: overshoot past the joint limits zero "
        f"{zero.get('max_overshoot_rad', float('nan')):.3g} rad, brake "
        f"{brake.get('max_overshoot_rad', float('nan')):.3g} rad; brake at rest "
        f"{'never' if rest is None else f'{rest:.3g} s'} after the stop, inside the limits: "
        f"{'yes' if brake.get('inside_limits') else 'no'}"
    )
    print(line)
    return {"machine": machine_description(), "runs": runs, "summary": line}
