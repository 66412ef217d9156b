"""``ros-lnn convert``: CSV logs with their quirks → rosbag2 /joint_states that read_arm_bag reads."""

import numpy as np
import pytest

from ros_lnn.arm.mapping import ArmMapping
from ros_lnn.arm.recording import read_arm_bag
from ros_lnn.cli import main

JOINTS = ["shoulder", "elbow", "wrist"]


def _signals(N, rate):
    t = np.arange(N) / rate
    q = np.column_stack([np.sin(t * (k + 1)) for k in range(3)])
    qd = np.column_stack([(k + 1) * np.cos(t * (k + 1)) for k in range(3)])
    e = np.column_stack([0.5 + 0.1 * k + np.sin(3 * t + k) for k in range(3)])
    return t, q, qd, e


def test_rtde_like_space_separated_currents(tmp_path, capsys):
    """UR RTDE style: space separated, controller time in s, a byte-order mark, CRLF line ends, a
    comment, a truncated row and a 'nan' row (both skipped and counted); currents for the effort."""
    N, rate = 300, 125.0
    t, q, qd, cur = _signals(N, rate)
    t = t + 8123.456  # seconds since the controller booted
    header = "timestamp " + " ".join(f"actual_q_{k} actual_qd_{k} actual_current_{k}" for k in range(3))
    lines = ["# recorded by rtde record.py", header]
    for i in range(N):
        cells = [f"{t[i]:.6f}"] + [f"{v:.17g}" for k in range(3) for v in (q[i, k], qd[i, k], cur[i, k])]
        lines.append(" ".join(cells))
        if i == 10:
            lines.append(" ".join(cells[:4]))  # truncated
        if i == 20:
            lines.append(" ".join(cells[:2] + ["nan"] + cells[3:]))
    csv = tmp_path / "rtde.csv"
    csv.write_bytes(("\ufeff" + "\r\n".join(lines) + "\r\n").encode("utf-8"))
    columns = ",".join(
        ["time=timestamp"]
        + [
            f"q.{j}=actual_q_{k},qd.{j}=actual_qd_{k},current.{j}=actual_current_{k}"
            for k, j in enumerate(JOINTS)
        ]
    )
    bag = tmp_path / "rtde_bag"
    assert main(["convert", str(csv), "--columns", columns, "-o", str(bag), "--storage", "mcap"]) == 0
    out = capsys.readouterr().out
    assert "300 joint states of 3 joints" in out and "time unit s" in out
    assert "skipped 2 bad row(s) of 302" in out
    assert "effort: motor_current" in out
    gains = {"shoulder": 2.0, "elbow": 1.5, "wrist": 0.5}
    mapping = ArmMapping(actuated_joints=JOINTS, effort="motor_current", effort_scale=gains)
    rec = read_arm_bag(bag, mapping)
    np.testing.assert_allclose(rec.t, t - t[0], atol=1e-9)
    np.testing.assert_array_equal(rec.q, q)
    np.testing.assert_array_equal(rec.qd, qd)
    np.testing.assert_array_equal(rec.tau, cur * np.array([2.0, 1.5, 0.5]))


def test_headerless_unix_ns_torques_from_yaml(tmp_path, capsys):
    """A libfranka-style log without a header: Unix time in ns (kept to the nanosecond), positions in
    degrees (a factor), torques; columns by index from a YAML map; no velocity column."""
    N, rate = 200, 1000.0
    _, q, _, tau = _signals(N, rate)
    stamps = 1_726_000_000_123_456_789 + np.arange(N, dtype=np.int64) * 1_000_000 + (np.arange(N) % 3) * 137
    rows = [
        ",".join(
            [str(int(stamps[i]))]
            + [f"{np.degrees(q[i, k]):.17g}" for k in range(3)]
            + [f"{tau[i, k]:.17g}" for k in range(3)]
        )
        for i in range(N)
    ]
    csv = tmp_path / "franka.csv"
    csv.write_text("\n".join(rows) + "\n\n")
    cmap = tmp_path / "columns.yaml"
    cmap.write_text(
        "time: 0\ntime_unit: ns\njoints:\n"
        + "".join(
            f"  {j}: {{position: '{1 + k}*{np.pi / 180!r}', effort: {4 + k}}}\n" for k, j in enumerate(JOINTS)
        )
    )
    bag = tmp_path / "franka_bag"
    assert main(["convert", str(csv), "--columns", str(cmap), "-o", str(bag)]) == 0
    assert "fields: position, effort" in capsys.readouterr().out
    rec = read_arm_bag(bag, ArmMapping(actuated_joints=JOINTS))
    assert rec.qd is None
    np.testing.assert_array_equal(np.round(rec.t * 1e9).astype(np.int64), stamps - stamps[0])
    np.testing.assert_allclose(rec.q, q, rtol=1e-14, atol=1e-15)
    np.testing.assert_array_equal(rec.tau, tau)


@pytest.mark.parametrize(
    ("columns", "body", "message"),
    [
        ("time=t,q.a=pos_a", "t,pos_b\n0,1\n0.01,2\n", "no column 'pos_a' in the header (t, pos_b)"),
        ("time=t,q.a=p", "t,p\n0,1\n0.01,x\n0.02,y\n0.03,3\n", "2 of 4 rows are bad"),
        ("time=t,pos.a=p", "t,p\n0,1\n", "pos.a: unknown field"),
        ("time=t,q.a=p,tau.a=e,current.a=i", "t,p\n", "both an effort and a current column"),
        ("q.a=p", "t,p\n", "no time column"),
    ],
)
def test_errors_are_one_line_exit_2(tmp_path, capsys, columns, body, message):
    csv = tmp_path / "log.csv"
    csv.write_text(body)
    assert main(["convert", str(csv), "--columns", columns, "-o", str(tmp_path / "bag")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "bag").exists()
