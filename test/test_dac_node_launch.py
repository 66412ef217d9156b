"""The DAC launch files start installed executables with installed, loadable parameter files."""
import pytest
import yaml

from test_launch_files import ROOT, evaluate_launch_file, install_prefix, setup_kwargs  # noqa: F401 (fixtures)

CASES = [("dac_controller.launch.py", {}), ("dac_controller.launch.py", {"effort_topic": "/effort_controller/commands"}),
         ("dac_demo.launch.py", {}), ("dac_demo.launch.py", {"rviz": "true", "namespace": "arm"})]


@pytest.mark.parametrize("name,overrides", CASES, ids=[f"{n}:{o}" for n, o in CASES])
def test_dac_launch_files(name, overrides, install_prefix, setup_kwargs, monkeypatch):  # noqa: F811
    nodes = evaluate_launch_file(ROOT / "launch" / name, install_prefix, overrides, monkeypatch)
    scripts = dict(s.replace(" ", "").split("=", 1) for s in setup_kwargs["entry_points"]["console_scripts"])
    ours = [n for n in nodes if n["package"] == "ros_lnn"]
    assert "dac_controller" in {n["executable"] for n in ours}
    for node in ours:
        for p in node["parameters"]:
            if isinstance(p, str):  # a parameter file: installed and valid YAML
                assert p.startswith(str(install_prefix)) and isinstance(yaml.safe_load(open(p)), dict)
            else:
                assert "<robot" in p.get("robot_description", "<robot")
    missing = [n["executable"] for n in ours if n["executable"] not in scripts]
    assert not missing
    if overrides.get("rviz") == "true":
        rviz = [n for n in nodes if n["executable"] == "rviz2"][0]
        assert (install_prefix / "share" / "ros_lnn" / "config" / "dac_demo.rviz").is_file()
        assert str(rviz["arguments"][-1]).endswith("dac_demo.rviz")
