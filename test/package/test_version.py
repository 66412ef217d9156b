"""The version is written once, in package.xml (where ROS reads it): setup.py, the installed
distribution and ``ros_lnn.__version__`` all take it from there."""

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import ros_lnn

ROOT = Path(__file__).resolve().parents[2]


def package_xml_version() -> str:
    return re.search(r"<version>\s*([^<\s]+)\s*</version>", (ROOT / "package.xml").read_text()).group(1)


def test_package_setup_and_module_agree():
    version = package_xml_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    assert ros_lnn.__version__ == version
    res = subprocess.run(
        [sys.executable, "setup.py", "--version"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0 and res.stdout.strip().splitlines()[-1] == version, res.stderr[-1000:]
    try:
        installed = metadata.version("ros_lnn")
    except metadata.PackageNotFoundError:
        pytest.skip("ros_lnn is not installed (source tree only)")
    assert installed == version


def test_no_other_file_spells_the_version():
    assert not re.search(r"version\s*=\s*['\"]\d", (ROOT / "setup.py").read_text())
    assert not re.search(r"__version__\s*=\s*['\"]", (ROOT / "ros_lnn" / "__init__.py").read_text())


def test_the_fallback_reads_package_xml(monkeypatch):
    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    assert ros_lnn._version() == package_xml_version()
