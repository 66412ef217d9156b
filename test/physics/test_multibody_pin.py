"""The Pinocchio backend against the maximal-coordinate numpy model (the reference it replaces for arms)
and against physics where the numpy model has no counterpart (prismatic joints): kinematics, twist map
and its rate, joint-space inertia, Coriolis factorisation, gravity, port ↔ joint maps, forward dynamics
and the joint-space simulator, on random states."""

import subprocess
import sys
import textwrap

import numpy as np
import pinocchio as pin
import pytest
from _multibody_cases import CONFIG, MODELS, RP_URDF, _numpy_state

from ros_lnn.errors import ConfigError
from ros_lnn.physics.multibody import (
    forward_dynamics,
    gravity_port,
    mass_matrix,
    update,
)
from ros_lnn.physics.multibody.build import load_model, make_chain
from ros_lnn.physics.multibody.kinematics import (
    effort_map,
    forward_kinematics,
    twist_map_rate,
)
from ros_lnn.physics.multibody.pin import (
    PinocchioModel,
    effort_port,
    kinematics,
    port_to_joint,
)
from ros_lnn.physics.multibody.pin import forward_dynamics as aba
from ros_lnn.physics.multibody.pin_sim import port_efforts, rk4_step
from ros_lnn.physics.multibody.urdf import model_from_urdf

TOL = 1e-10  # relative; measured 1e-16 … 1e-14


def _rel(a, b):
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / max(np.abs(b).max(), 1e-300))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_quantity_equals_the_maximal_coordinate_model(name):
    model = MODELS[name]()
    pm = PinocchioModel(model)
    n, nv = model.n_bodies, pm.nv
    rng = np.random.default_rng(1)
    for _ in range(5):
        q, qd, u = rng.normal(size=nv), rng.normal(size=nv), rng.normal(size=nv)
        tau = rng.normal(size=6 * n)
        d = kinematics(pm, q, qd)
        ref, G = _numpy_state(model, q, qd, pm.coordinate_order)
        G_dot = twist_map_rate(model, ref)[:, pm.coordinate_order]
        E = effort_map(model, ref)[:, pm.coordinate_order]
        M = mass_matrix(model, ref)
        coriolis, M_dot = np.zeros((6 * n, 6 * n)), np.zeros((6 * n, 6 * n))  # 𝓒(ν) = blockdiag(0, Ω_i I_i)
        for i in range(n):
            (w1, w2, w3), k = ref.omega[i], 3 * n + 3 * i
            Om = np.array([[0, -w3, w2], [w3, 0, -w1], [-w2, w1, 0]])
            coriolis[k : k + 3, k : k + 3] = Om @ ref.inertia[i]
            M_dot[k : k + 3, k : k + 3] = Om @ ref.inertia[i] - ref.inertia[i] @ Om
        checks = {
            "r": (d.r, ref.r),
            "R": (d.R, ref.R),
            "quat": (d.quat, ref.quat),
            "nu": (d.nu, ref.nu),
            "inertia": (d.inertia, ref.inertia),
            "G": (d.G, G),
            "G_dot": (d.G_dot, G_dot),
            "H": (d.H, G.T @ M @ G),
            "C q̇": (d.C @ qd, G.T @ (M @ G_dot + coriolis @ G) @ qd),
            "C + Cᵀ = Ḣ": (d.C + d.C.T, G_dot.T @ M @ G + G.T @ M_dot @ G + G.T @ M @ G_dot),
            "g": (d.g, -G.T @ gravity_port(model)),
            "G^T tau": (port_to_joint(d, tau), G.T @ tau),
            "E u": (effort_port(d, u), E @ u),
            "joint moments": (d.joint_moment_port, ref.joint_moment_port),
        }
        for key, (a, b) in checks.items():
            assert _rel(a, b) < TOL, (key, _rel(a, b))
        # forward dynamics: the KKT system of eq 32 (maximal coordinates) against ABA (joint coordinates)
        nu_dot = forward_dynamics(model, ref, E @ u + tau)[0]
        qdd = aba(pm, q, qd, u + G.T @ tau)
        assert _rel(G @ qdd + G_dot @ qd, nu_dot) < TOL
        assert _rel(port_efforts(pm, q, tau), G.T @ tau) < TOL


def test_the_coriolis_factorisation_gives_the_rate_of_the_inertia():
    """Ḣ = C + Cᵀ (skew-symmetry of Ḣ − 2C, the Lyapunov argument's property) against central differences."""
    model = MODELS["tree_fixed_flange"]()
    pm = PinocchioModel(model)
    rng = np.random.default_rng(2)
    q, qd = rng.normal(size=pm.nv), rng.normal(size=pm.nv)
    h = 1e-6
    H_dot = (kinematics(pm, q + h * qd, qd).H - kinematics(pm, q - h * qd, qd).H) / (2 * h)
    C = kinematics(pm, q, qd).C
    assert np.abs(C + C.T - H_dot).max() < 1e-7 * np.abs(H_dot).max()


def test_twist_map_and_its_rate_are_the_derivatives_of_the_body_poses():
    """Kinematics against finite differences of the poses, a check independent of both models."""
    model = MODELS["tree_fixed_flange"]()
    pm = PinocchioModel(model)
    rng = np.random.default_rng(3)
    q, qd = rng.normal(size=pm.nv), rng.normal(size=pm.nv)
    h = 1e-6
    d, plus, minus = kinematics(pm, q, qd), kinematics(pm, q + h * qd, qd), kinematics(pm, q - h * qd, qd)
    v_fd = (plus.r - minus.r) / (2 * h)
    W = ((plus.R - minus.R) / (2 * h)) @ d.R.transpose(0, 2, 1)  # Ṙ Rᵀ = [ω]×
    omega_fd = np.stack([W[:, 2, 1], W[:, 0, 2], W[:, 1, 0]], axis=1)
    assert np.abs(d.v - v_fd).max() < 1e-8 and np.abs(d.omega - omega_fd).max() < 1e-8
    assert np.abs((plus.G - minus.G) / (2 * h) - d.G_dot).max() < 1e-7


# ----------------------------------------------------------------------------- prismatic joints
def test_a_prismatic_arm_reads_and_behaves_like_physics_says():
    """A turret (continuous) carrying a slider (prismatic, tilted): the tip link is lumped, the slide
    moves the slider's CoM along its axis, H = Gᵀ𝓜G from the bodies' masses and world inertias, and the
    simulator conserves energy (damping off) or loses it at the rate −D q̇² (damping on)."""
    model = model_from_urdf(RP_URDF, "rp.urdf")
    assert [j.kind for j in model.joints] == ["revolute", "prismatic"]
    assert model.joint_position_limits == {"reach": (0.0, 0.5)} and model.joints[0].damping == 0.05
    assert np.isclose(model.masses[1], 0.7) and model.frames["tip"][0] == 1
    pm = PinocchioModel(model)
    q, qd = np.array([0.4, 0.2]), np.array([0.7, -0.3])
    d = kinematics(pm, q, qd)
    slide_axis = d.R[1] @ np.array([1.0, 0.0, 0.0])
    shifted = kinematics(pm, q + np.array([0.0, 0.01]), qd)
    assert np.allclose(shifted.r[1] - d.r[1], 0.01 * slide_axis, atol=1e-14)  # a pure translation
    assert np.allclose(shifted.R, d.R, atol=1e-14)
    blocks = np.zeros((12, 12))
    blocks[:6, :6] = np.kron(np.diag(model.masses), np.eye(3))
    blocks[6:9, 6:9], blocks[9:, 9:] = d.inertia
    assert _rel(d.H, d.G.T @ blocks @ d.G) < TOL
    assert (
        np.allclose(d.G[3:6, 1], slide_axis) and not d.G[9:, 1].any()
    )  # the slide only translates the slider
    # joint efforts as a port: a moment pair (spin) and a force pair at the joint point (reach), Gᵀ E u = u
    u = np.array([0.7, -1.3])
    assert np.allclose(d.G.T @ effort_port(d, u), u, rtol=0, atol=1e-14)
    slide = effort_port(d, [0.0, -1.3]).reshape(2, 2, 3)  # between turret and slider: internal
    assert np.allclose(slide[0].sum(axis=0), 0.0, atol=1e-15)  # no net force …
    assert np.allclose((slide[1] + np.cross(d.r, slide[0])).sum(axis=0), 0.0, atol=1e-15)  # … nor moment
    assert np.allclose(slide[0, 1], -1.3 * slide_axis)

    for damping in (0.0, 0.05):
        arm = PinocchioModel(
            model_from_urdf(RP_URDF.replace('damping="0.05"', f'damping="{damping}"'), "rp.urdf")
        )

        def energy(q, qd, arm=arm):
            k = kinematics(arm, q, qd)
            return 0.5 * qd @ k.H @ qd - float(np.sum(model.masses * (k.r @ model.gravity)))

        x, xd, e0, dissipated, dt = q.copy(), qd.copy(), energy(q, qd), 0.0, 1e-3
        for _ in range(1000):
            x_new, xd_new = rk4_step(arm, x, xd, dt)
            dissipated += 0.5 * dt * damping * (xd[0] ** 2 + xd_new[0] ** 2)  # trapezoid; rate −D q̇²
            x, xd = x_new, xd_new
        drop = e0 - energy(x, xd)
        if damping == 0.0:
            assert abs(drop) < 1e-9 * abs(e0), drop
        else:
            assert drop > 0 and abs(drop - dissipated) < 1e-4 * dissipated, (drop, dissipated)


def test_the_maximal_coordinate_model_refuses_prismatic_joints_by_name():
    model = model_from_urdf(RP_URDF, "rp.urdf")
    with pytest.raises(ConfigError, match="reach"):
        forward_kinematics(model, np.zeros(2))
    with pytest.raises(ConfigError, match="reach"):
        update(model, np.zeros((2, 3)), np.tile([1.0, 0, 0, 0], (2, 1)), np.zeros(12))


def test_joints_are_handed_to_pinocchio_depth_first():
    """The tree lists a branch after its sibling's descendants; Pinocchio needs each subtree consecutive."""
    pm = PinocchioModel(MODELS["tree_fixed_flange"]())
    assert pm.joint_names == ("yaw", "left", "left2", "wrist1", "wrist2", "wrist3", "right", "right2")
    assert list(pm.coordinate_order) == [0, 1, 2, 5, 6, 7, 3, 4]


def test_pinocchio_model_refuses_what_it_does_not_cover():
    with pytest.raises(ConfigError, match="fixed base"):
        PinocchioModel(make_chain(3))
    with pytest.raises(ConfigError, match="spherical"):
        PinocchioModel(make_chain(3, base="fixed"))


def test_the_rebuilt_model_equals_pinocchios_own_reading_of_the_urdf():
    """Continuous joints become one-angle joints in the rebuilt model; dynamics are the same."""
    text = RP_URDF
    own = pin.buildModelFromXML(text)
    own_data = own.createData()
    pm = PinocchioModel(model_from_urdf(text, "rp.urdf"))
    rng = np.random.default_rng(4)
    for _ in range(5):
        q, qd, qdd = rng.normal(size=2), rng.normal(size=2), rng.normal(size=2)
        q_own = np.array([np.cos(q[0]), np.sin(q[0]), q[1]])
        tau_own = pin.rnea(own, own_data, q_own, qd, qdd)
        tau = pin.rnea(pm.pin, pm.data, q, qd, qdd)
        assert _rel(tau, tau_own) < TOL


# ----------------------------------------------------------------------------- simulator
def test_joint_space_simulator_follows_the_maximal_coordinate_one_and_keeps_energy():
    """The demo arm falls under gravity from rest: both simulators agree while the maximal-coordinate
    one holds its joints (dt = 1 ms, 0.3 s), and the joint-space one conserves energy to RK4 error."""
    from ros_lnn.physics.multibody import energy, joint_mismatch
    from ros_lnn.physics.multibody.sim import MultibodyState, simulate

    model = load_model(CONFIG / "dac_chain.urdf")
    pm = PinocchioModel(model)
    q0 = np.array([0.0, -0.8, 1.4, 0.6, 0.4])
    r, quat = forward_kinematics(model, q0)
    out = simulate(
        model,
        MultibodyState(r, quat, np.zeros(30)),
        0.3,
        1e-3,
        every=300,
        observe=lambda s, d, f, p: {"gap": joint_mismatch(model, d).max(), "E": energy(model, d)["total"]},
    )
    q, qd = q0.copy(), np.zeros(5)
    for _ in range(300):
        q, qd = rk4_step(pm, q, qd, 1e-3)
    d = kinematics(pm, q, qd)
    assert out["gap"].max() < 1e-8
    assert np.abs(d.r - out["r"][-1]).max() < 1e-8 and np.abs(d.nu - out["nu"][-1]).max() < 1e-7
    e = 0.5 * qd @ d.H @ qd - float(np.sum(model.masses * (d.r @ model.gravity)))
    assert abs(e - out["E"][0]) < 1e-9 * abs(out["E"][0])


def test_the_dac_path_runs_without_torch():
    """URDF loading, the Pinocchio pipeline and the joint-space simulator import and run with torch
    made unimportable (the deployment path)."""
    code = textwrap.dedent(f"""
        import sys
        sys.modules['torch'] = None
        import numpy as np
        from ros_lnn.control.pipeline import DacPipeline
        from ros_lnn.physics.multibody.build import load_model
        from ros_lnn.physics.multibody.pin_sim import rk4_step
        arm = load_model({str(CONFIG / "dac_chain.urdf")!r})
        pipe = DacPipeline(arm, obstacles=[([0.3, 0.1, 0.2], 0.05)])
        q0 = np.array([0.0, -0.8, 1.4, 0.6, 0.4])
        out = pipe.step(q0, np.zeros(5))
        q, qd = rk4_step(pipe.pinocchio, q0, np.zeros(5), 1e-3, lambda t, q, qd: out.efforts.effort)
        assert np.isfinite(q).all() and 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]
        print('ok')
    """)
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr
