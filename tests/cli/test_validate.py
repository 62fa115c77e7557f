"""`spyre-emu validate` on a reduced set (the whole run takes minutes), and the table's arithmetic."""

from spyre_emu.cli import main
from spyre_emu.validate import MEASUREMENTS, MISS, Measurement, Row, mean_abs_error, render


def test_validate_one_workload_writes_its_row(tmp_path, capsys):
    out = tmp_path / "validation.md"
    assert main(["validate", "--only", "sustained", "--out", str(out), "--quiet"]) == 0
    text = out.read_text()
    assert "| sustained plain 2D matmul [512,2048]×[2048,512], 1 core | 1,140.0 MAC/ns/core |" in text
    assert "over 1 measurements" in text
    assert "spyre-emu: validate: matmul_512x2048x512_1core" in capsys.readouterr().err


def test_bad_validate_is_one_line_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "validation.md"
    assert main(["validate", "--only", "nope", "--out", str(out)]) == 2
    assert main(["validate", "--only", "sustained", "--programs", str(tmp_path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"spyre-emu: error: --only: unknown workload 'nope'; expected one of " \
                     f"{', '.join(m.name for m in MEASUREMENTS)}"
    assert err[1].startswith(f"spyre-emu: error: {tmp_path}/matmul_512x2048x512_1core.json: calibration program")
    assert len(err) == 2
    assert not out.exists()


def _row(measured: float, simulated: float, why: str) -> Row:
    return Row(Measurement("x", f"w{measured}", measured, "µs", "src", ("p",), lambda r: 0.0, why), simulated)


def test_errors_mean_and_misses():
    """+10 % is within the 15 % target (no reason shown), -30 % misses and says why; the mean is 20 %."""
    rows = [_row(10.0, 11.0, "never shown"), _row(20.0, 14.0, "a missing mechanism")]
    assert [round(r.error, 12) for r in rows] == [0.1, -0.3]
    assert round(mean_abs_error(rows), 12) == 0.2
    text = render(rows, [], "config `c`")
    assert "| w10.0 | 10.00 µs | 11.00 µs | +10.0 % | src | — |" in text
    assert "| w20.0 | 20.00 µs | 14.00 µs | −30.0 % | src | a missing mechanism |" in text
    assert "**Mean absolute error: 20.0 %** over 2 measurements" in text
    assert "never shown" not in text
    assert MISS == 0.15
