"""Bugs the fuzz tests found, each pinned by the smallest case that showed it."""

import json
import os

import pytest

import spyre_emu.cli
from spyre_emu.cli import LINE_BREAKS, main
from tests.cli.test_fuzz import _budget
from tests.conftest import ROOT, SHARED

TINY = str(ROOT / "configs" / "tiny.toml")


def _fails(capsys, *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    return err.removeprefix("spyre-emu: error: ").rstrip("\n")


@pytest.mark.parametrize("char", list(LINE_BREAKS), ids=[f"U+{ord(c):04X}" for c in LINE_BREAKS])
def test_a_message_holding_any_line_break_stays_one_line(capsys, char):
    """--set clock.ghz=<U+001E> printed two lines: only \\n and \\r were escaped, str.splitlines breaks at ten."""
    assert main(["run", "x.json", "--config", str(ROOT / "configs" / "tiny.toml"), "--set", f"clock.ghz=a{char}b"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert err.startswith("spyre-emu: error: --set clock.ghz=a\\")


@pytest.mark.parametrize("rate", ["2.96e-254", "1e300"])
def test_a_pcie_rate_the_engine_cannot_hold_is_a_config_error(capsys, rate):
    """pcie.gbytes_per_s = 2.96e-254 made the port's cycles per stick overflow int64 in pack (a traceback)."""
    message = _fails(capsys, "run", str(ROOT / "docs" / "examples" / "load_exp_store.json"), "--config", TINY,
                     "--set", f"pcie.gbytes_per_s={rate}")
    assert message.startswith(f"--set pcie.gbytes_per_s={rate}: pcie.gbytes_per_s: gives ")


def test_a_tensor_larger_than_device_memory_fails_before_lowering(tmp_path, capsys):
    """A shape of 2**28 rows asked numpy for a 128 GiB array while planning LX (a MemoryError traceback)."""
    program = json.loads((ROOT / "examples" / "programs" / "add_exp_kernels.json").read_text())
    program["tensors"]["a"]["shape"] = [2**28, 1024]
    path = tmp_path / "p.json"
    path.write_text(json.dumps(program))
    message = _fails(capsys, "run", str(path))
    assert message.startswith(f"{path}: tensors.a.shape: a takes {2**28 * 2048} B; with the tensors before it, "
                              "more than the device memory (137438953472 B)")


def test_out_of_memory_is_one_line(monkeypatch, capsys):
    def exhausted(*args, **kwargs):
        raise MemoryError
    monkeypatch.setattr(spyre_emu.cli, "load", exhausted)
    message = _fails(capsys, "run", "x.json")
    assert message == "out of memory (the program is too large to simulate here)"


def test_a_division_over_more_cores_than_the_card_fails_before_lx_planning(tmp_path, capsys):
    """work_division mb = 33554431 on a kernel writing an LX tensor: LX planning walked 33 million cores (a hang)."""
    program = json.loads((ROOT / "examples" / "programs" / "layernorm_residual_kernels.json").read_text())
    program["kernels"][0]["work_division"] = {"mb": 33554431}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(program))
    with _budget(20):
        message = _fails(capsys, "run", str(path))
    assert message == f"{path}: kernels[0].work_division: work division needs 33554431 cores; the card has 32"


def test_a_config_without_fp16_pt_lanes_is_a_config_error(tmp_path, capsys):
    """Deleting pt.lanes.fp16 from configs/tiny.toml gave a KeyError traceback while building the report."""
    config = tmp_path / "c.toml"
    config.write_text((ROOT / "configs" / "tiny.toml").read_text().replace("\nfp16 = 8\n", "\n", 1))
    message = _fails(capsys, "run", str(ROOT / "docs" / "examples" / "load_exp_store.json"), "--config", str(config))
    assert message == f"{config}: pt.lanes.fp16: missing: the PT array's fp16 lanes are required"


def test_an_sdsc_slice_count_past_its_cores_fails_before_walking_them(tmp_path, capsys):
    """numWkSlicesPerDim_ mb = 2^40 + 1 made the importer enumerate 2^45 cores (a hang)."""
    source = SHARED / "sdsc-examples" / "add_3d" / "sdsc_0.json"
    if not source.is_file():
        assert os.environ.get("CI") != "true", f"{source} is missing in CI"
        pytest.skip(f"{source} is not beside the project")
    data = json.loads(source.read_text())
    sdsc = next(iter(data.values()))
    sdsc["numWkSlicesPerDim_"]["mb"] = (1 << 40) + 1
    (tmp_path / "sdsc").mkdir()
    (tmp_path / "sdsc" / "sdsc_0.json").write_text(json.dumps(data))
    with _budget(10):
        message = _fails(capsys, "import-sdsc", str(tmp_path / "sdsc"), "-o", str(tmp_path / "p.json"))
    assert "numWkSlicesPerDim_: expected whole positive slice counts whose product is numCoresUsed_" in message
    assert not (tmp_path / "p.json").exists()
