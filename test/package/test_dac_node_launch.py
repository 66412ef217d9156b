"""The DAC launch files start installed executables with installed, loadable parameter files, the
controller as a lifecycle node that brings itself up (its autostart parameter: after a respawn too), and
its efforts where they are meant to go."""

import pytest
import yaml
from test_launch_files import (  # noqa: F401 (fixtures)
    ROOT,
    evaluate_launch_file,
    install_prefix,
    setup_kwargs,
)

CASES = [
    ("dac_controller.launch.py", {}),
    ("dac_controller.launch.py", {"effort_topic": "/effort_controller/commands", "autostart": "false"}),
    ("dac_demo.launch.py", {}),
    ("dac_demo.launch.py", {"rviz": "true", "namespace": "arm"}),
]


@pytest.mark.parametrize("name,overrides", CASES, ids=[f"{n}:{o}" for n, o in CASES])
def test_dac_launch_files(name, overrides, install_prefix, setup_kwargs, monkeypatch):  # noqa: F811
    nodes = evaluate_launch_file(ROOT / "launch" / name, install_prefix, overrides, monkeypatch)
    scripts = dict(s.replace(" ", "").split("=", 1) for s in setup_kwargs["entry_points"]["console_scripts"])
    ours = [n for n in nodes if n["package"] == "ros_lnn"]
    controllers = [n for n in ours if n["executable"] == "dac_controller"]
    assert len(controllers) == 1, "exactly one dac_controller variant runs"
    controller = controllers[0]
    assert controller["lifecycle"] and controller["autostart"] is False  # launch_ros does nothing
    for node in ours:
        for p in node["parameters"]:
            if isinstance(p, str):  # a parameter file: installed and valid YAML
                assert p.startswith(str(install_prefix)) and isinstance(yaml.safe_load(open(p)), dict)
            else:
                assert p["robot_description"] == (ROOT / "config" / "dac_chain.urdf").read_text()
                if node is controller:
                    assert p["autostart"] is (overrides.get("autostart", "true") == "true")
    missing = [n["executable"] for n in ours if n["executable"] not in scripts]
    assert not missing
    if name == "dac_controller.launch.py":
        target = overrides.get("effort_topic") or "~/joint_effort_command"
        assert controller["remappings"] == [("~/joint_effort_command", target)]
    else:
        sim = next(n for n in ours if n["executable"] == "dac_chain_sim")
        # relative names in one namespace: the simulator reads <ns>/dac_controller/joint_effort_command
        assert sim["namespace"] == controller["namespace"] == overrides.get("namespace", "")
        assert sim["remappings"] == [("effort_commands", f"{controller['name']}/joint_effort_command")]
    if overrides.get("rviz") == "true":
        rviz = next(n for n in nodes if n["executable"] == "rviz2")
        assert (install_prefix / "share" / "ros_lnn" / "config" / "dac_demo.rviz").is_file()
        assert str(rviz["arguments"][-1]).endswith("dac_demo.rviz")
