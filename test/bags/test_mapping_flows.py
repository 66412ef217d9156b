"""One mapping class for the ``bag:`` section (ros_lnn.bags.mapping.BagMapping): the arm's keys are its
part (ArmKeys), the keys both flows share are checked once, with the same message in both."""

import pytest

from ros_lnn.arm.mapping import ArmMapping, is_arm_config
from ros_lnn.bags.mapping import ARM_FLOW_KEYS, CRANE, SHARED_KEYS, ArmKeys, BagMapping
from ros_lnn.errors import ConfigError

ARM = {"actuated_joints": ["a", "b"]}


def test_the_arm_mapping_is_the_bag_mapping_with_its_arm_part():
    assert ArmMapping is BagMapping
    m = ArmMapping(
        actuated_joints=["a", "b"], effort="motor_current", effort_scale={"a": 0.1}, stamps="receive"
    )
    assert isinstance(m.arm, ArmKeys) and m.is_arm
    assert m.actuated_joints == ("a", "b") and m.effort_scale == {"a": 0.1}  # read through the mapping
    assert m.gains() == [0.1, 1.0] and m.stamps == "receive"
    assert list(m.arm_dict()) == list(ARM_FLOW_KEYS)
    crane = BagMapping.from_dict(dict(CRANE))
    assert crane.arm is None and not crane.is_arm
    with pytest.raises(AttributeError):
        crane.actuated_joints  # noqa: B018 - a crane mapping has no arm keys
    with pytest.raises(ConfigError, match="not an arm mapping"):
        crane.arm_dict()


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("stamps", "wall", "bag.stamps 'wall': choose header or receive"),
        ("joint_states_topic", 5, "bag.joint_states_topic = 5: must be a text value"),
        ("robot_description", 5, "bag.robot_description = 5: must be a text value"),
        ("gap_factor", float("nan"), "bag.gap_factor = nan: must be finite"),
        ("gap_factor", "x", "bag.gap_factor = 'x': must be a number"),
    ],
)
def test_a_shared_key_is_refused_with_the_same_message_in_both_flows(key, value, message):
    assert key in SHARED_KEYS
    errors = []
    for base in (dict(CRANE), dict(ARM)):
        with pytest.raises(ConfigError) as err:
            BagMapping.from_dict({**base, key: value}, "c.yaml")
        errors.append(str(err.value))
    assert errors[0] == errors[1] and errors[0].endswith(message)


def test_constructed_directly_the_shared_keys_meet_the_same_check():
    for base in ({"free_joints": ("p",)}, ARM):
        with pytest.raises(ConfigError, match=r"^bag\.stamps 'wall': choose header or receive$"):
            BagMapping(**base, stamps="wall")
        with pytest.raises(ConfigError, match=r"^bag\.joint_states_topic = 5: must be a text value$"):
            BagMapping(**base, joint_states_topic=5)


def test_each_flow_takes_its_own_keys():
    with pytest.raises(ConfigError, match=r"unknown bag setting.*free_joints"):
        BagMapping.from_dict({**ARM, "free_joints": ["p"]}, "arm.yaml")
    with pytest.raises(ConfigError, match=r"unknown bag setting.*effort_scale"):
        BagMapping.from_dict({**CRANE, "effort_scale": {"p": 1.0}}, "crane.yaml")
    with pytest.raises(ConfigError, match="free_joints is empty"):
        BagMapping.from_dict({}, "crane.yaml")  # without actuated_joints: free joints needed
    with pytest.raises(ConfigError, match=r"gap_factor = 1.2: give a number in \[1.5, 1e\+06\]"):
        BagMapping.from_dict({**ARM, "gap_factor": 1.2})  # the arm's recordings as before
    assert BagMapping.from_dict({**CRANE, "gap_factor": 1.2}).gap_factor == 1.2


def test_a_config_read_either_way_gives_the_same_mapping(tmp_path):
    config = tmp_path / "arm.yaml"
    config.write_text("arm:\n  actuated_joints: [a, b]\n  robot_description: arm.urdf\n  gap_factor: 4\n")
    assert is_arm_config(config)
    m = ArmMapping.from_yaml(config)
    assert m.actuated_joints == ("a", "b") and m.gap_factor == 4.0
    assert m.robot_description == str(tmp_path / "arm.urdf")  # relative to the config, in both flows
    assert BagMapping.from_yaml(config) == m
    assert BagMapping.from_dict(m.arm_dict()) == m  # what an arm model stores reads back
    assert m.with_overrides(effort_field="position").effort_field == "position"
