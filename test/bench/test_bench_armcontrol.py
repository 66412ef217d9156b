"""``ros-lnn bench armcontrol --quick``: a real (small) identification of the simulated Panda, then the
same feed-forward + PD loop with the URDF's model, the identified one and the true one. The figures are
the benchmark's; the test holds the printed line to the figures it returns and the order the physics
dictates (the true model tracks best, the URDF's worst)."""

from __future__ import annotations

import re

import pytest

from conftest import requires_torch

pytestmark = [requires_torch, pytest.mark.slow]

LAST = re.compile(
    r"^arm tracking RMS \[mrad\]: URDF-nominal (?P<a>\d+\.\d{3}), identified (?P<b>\d+\.\d{3}), "
    r"true (?P<c>\d+\.\d{3}); A/B = (?P<ab>\d+\.\d\d), B/C = (?P<bc>\d+\.\d\d)$"
)


def test_bench_armcontrol_quick(capsys, tmp_path):
    import json

    from ros_lnn import cli

    out = tmp_path / "figures.json"
    assert cli.main(["bench", "armcontrol", "--quick", "--json", str(out)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    m = LAST.match(lines[-2])  # the line after it says where the JSON went
    assert m, lines[-3:]
    figures = json.loads(out.read_text())
    rms = figures["rms_mrad"]
    assert float(m["a"]) == pytest.approx(rms["urdf"], abs=5e-4)
    assert float(m["b"]) == pytest.approx(rms["identified"], abs=5e-4)
    assert float(m["c"]) == pytest.approx(rms["true"], abs=5e-4)
    assert rms["true"] < rms["identified"] < rms["urdf"]
    assert figures["a_over_b"] >= 3.0  # the identified rigid body and friction, not the URDF's
    share = figures["feedforward_share"]
    assert share["true"] > share["identified"] > share["URDF-nominal"] > 0.5
    assert lines[-3].startswith("feed-forward share of the commanded torque: URDF-nominal ")
