"""Building the multibody model from URDF (robot_description) and from YAML."""

from pathlib import Path

import numpy as np
import pytest

from ros_lnn.errors import ConfigError
from ros_lnn.physics.multibody import forward_dynamics, update
from ros_lnn.physics.multibody.build import load_model, make_chain, model_from_dict
from ros_lnn.physics.multibody.kinematics import effort_map, forward_kinematics, twist_map
from ros_lnn.physics.multibody.urdf import model_from_urdf

CONFIG = Path(__file__).resolve().parents[2] / "config"


def _link(name, mass, length, radius=0.05, split=False, rpy="0 0 0"):
    ix = 0.5 * mass * radius**2
    it = mass * (3 * radius**2 + length**2) / 12
    return (
        f'<link name="{name}"><inertial><origin xyz="{length / 2} 0 0" rpy="{rpy}"/><mass value="{mass}"/>'
        f'<inertia ixx="{ix}" ixy="0" ixz="0" iyy="{it}" iyz="0" izz="{it}"/></inertial></link>'
    )


def _planar_urdf(masses, lengths, split_last=False):
    parts = ['<robot name="planar">', '<link name="base"/>']
    parent, x = "base", 0.0
    for i, (m, L) in enumerate(zip(masses, lengths)):
        if split_last and i == len(masses) - 1:
            # the same cylinder as two halves glued by a fixed joint (and an inertial frame turned about x)
            parts.append(_link(f"l{i}", m / 2, L / 2, rpy="0.7 0 0"))
            parts.append(_link(f"l{i}b", m / 2, L / 2))
            parts.append(
                f'<joint name="glue" type="fixed"><parent link="l{i}"/><child link="l{i}b"/>'
                f'<origin xyz="{L / 2} 0 0"/></joint>'
            )
        else:
            parts.append(_link(f"l{i}", m, L))
        parts.append(
            f'<joint name="j{i}" type="revolute"><parent link="{parent}"/><child link="l{i}"/>'
            f'<origin xyz="{x} 0 0"/><axis xyz="0 0 1"/><limit effort="{10 + i}" velocity="3" '
            f'lower="-2" upper="2"/></joint>'
        )
        parent, x = f"l{i}", L
    parts.append("</robot>")
    return "\n".join(parts)


def _accelerations(model, q, qd, u):
    n = model.n_bodies
    r, quat = forward_kinematics(model, q)
    data = update(model, r, quat, np.zeros(6 * n))
    data = update(model, r, quat, twist_map(model, data) @ qd)
    return forward_dynamics(model, data, effort_map(model, data) @ u)[0]


def test_urdf_chain_matches_the_built_chain():
    masses, lengths = np.array([1.0, 0.7, 1.3]), np.array([0.4, 0.5, 0.3])
    urdf = model_from_urdf(_planar_urdf(masses, lengths), gravity=(0, -9.81, 0))
    ref = make_chain(
        3,
        joint="revolute",
        base="fixed",
        masses=masses,
        lengths=lengths,
        stiffness=[0.0],
        gravity=(0, -9.81, 0),
        base_position=(0, 0, 0),
    )
    rng = np.random.default_rng(0)
    q, qd, u = rng.normal(size=3), rng.normal(size=3), rng.normal(size=3)
    assert np.allclose(_accelerations(urdf, q, qd, u), _accelerations(ref, q, qd, u), atol=1e-12)
    assert [j.effort_limit for j in urdf.joints] == [10, 11, 12]
    assert urdf.joint_position_limits["j1"] == (-2.0, 2.0)


def test_fixed_joints_lump_inertia_into_the_parent_body():
    masses, lengths = np.array([1.0, 0.7, 1.3]), np.array([0.4, 0.5, 0.3])
    whole = model_from_urdf(_planar_urdf(masses, lengths))
    split = model_from_urdf(_planar_urdf(masses, lengths, split_last=True))
    assert split.n_bodies == 3
    assert np.isclose(split.masses[2], masses[2])
    # the two halves about the common CoM give the whole cylinder's inertia about the x-z axes
    assert np.allclose(split.inertia_body[2][[1, 2], [1, 2]], whole.inertia_body[2][[1, 2], [1, 2]])
    b, _R, p = split.frames["l2b"]
    assert b == 2 and np.allclose(p, [0.0, 0, 0])  # the glued half starts at the CoM of the lumped body
    rng = np.random.default_rng(1)
    q, qd, u = rng.normal(size=3), rng.normal(size=3), rng.normal(size=3)
    # the glued half's inertial frame is turned about x: ixx differs from the whole, the planar motion does
    # not
    a_whole, a_split = _accelerations(whole, q, qd, u), _accelerations(split, q, qd, u)
    assert np.allclose(a_whole, a_split, atol=1e-9)


def test_shipped_demo_arm_and_paper_chain_load():
    arm = load_model(CONFIG / "dac_chain.urdf")
    assert arm.joint_names == ("joint1", "joint2", "joint3", "joint4", "joint5")
    assert "tool0" in arm.frames and arm.frames["tool0"][0] == 4
    chain = load_model(CONFIG / "dac_paper_chain.yaml")
    ref = make_chain(5)
    assert chain.floating_root == 0 and chain.n_constraints == 12
    assert np.allclose(chain.inertia_body, ref.inertia_body, rtol=1e-5)
    assert np.allclose(chain.anchor_parent, ref.anchor_parent) and np.allclose(chain.sph_stiffness, 2.0)


@pytest.mark.parametrize(
    "text,needle",
    [
        (
            (
                "<robot name='x'><link name='a'/><link name='b'/><joint name='slide' type='floating'>"
                "<parent link='a'/><child link='b'/></joint></robot>"
            ),
            "slide",
        ),
        (
            (
                "<robot name='x'><link name='a'/><link name='b'/><joint name='j' type='revolute'><parent "
                "link='a'/>"
                "<child link='b'/><axis xyz='0 0 1'/><limit effort='1' velocity='1' lower='-1' "
                "upper='1'/></joint></robot>"
            ),
            "'b'",
        ),
        ("<robot name='x'><link name='a'", "not valid URDF"),
        (
            (
                "<robot name='x'><link name='a'/><link name='b'><inertial><mass value='1'/><inertia "
                "ixx='1' iyy='1' izz='1' "
                "ixy='0' ixz='0' iyz='0'/></inertial></link><joint name='j' type='continuous'><parent "
                "link='a'/>"
                "<child link='b'/><axis xyz='0 0 nan_oops'/></joint></robot>"
            ),
            "axis .*joint \\[j\\]",
        ),
        (
            (
                "<robot name='x'><link name='a'/><link name='b'><inertial><mass value='1'/><inertia "
                "ixx='1' iyy='1' izz='1'/>"
                "</inertial></link><joint name='j' type='continuous'><parent link='a'/><child "
                "link='b'/></joint></robot>"
            ),
            "Link \\[b\\]",
        ),
        (
            (
                "<robot name='x'><link name='a'/><link name='b'/><joint name='j' type='revolute'><parent "
                "link='a'/>"
                "<child link='b'/><axis xyz='0 0 1'/></joint></robot>"
            ),
            "Joint \\[j\\] .* limits",
        ),
    ],
)
def test_bad_urdf_names_the_culprit(text, needle):
    with pytest.raises(ConfigError, match=needle):
        model_from_urdf(text, source="robot_description")


def test_bad_yaml_names_the_entry():
    with pytest.raises(ConfigError, match=r"joints\[0\]"):
        model_from_dict(
            {
                "bodies": [{"name": "a", "mass": 1, "inertia": [1, 1, 1]}],
                "joints": [{"name": "j", "parent": "world", "child": "nope"}],
            },
            source="arm.yaml",
        )
    with pytest.raises(ConfigError, match="positive definite"):
        model_from_dict({"bodies": [{"name": "a", "mass": 0, "inertia": [1, 1, 1]}]}, source="arm.yaml")
