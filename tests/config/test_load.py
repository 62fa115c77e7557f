"""The machine TOML loader: defaults, --set overrides, and one named ConfigError per mistake."""

import re

import pytest

from spyre_emu.config import DEFAULT_CONFIG, load_machine
from spyre_emu.errors import ConfigError, SpyreEmuError

TEXT = DEFAULT_CONFIG.read_text()


def _edit(old: str, new: str) -> str:
    """The default TOML with the one line starting ``old`` (a ``key =`` prefix) replaced."""
    pattern = re.compile(rf"^{re.escape(old)}.*$", re.MULTILINE)
    assert len(pattern.findall(TEXT)) == 1, old
    return pattern.sub(new, TEXT)


def _write(tmp_path, text: str):
    path = tmp_path / "card.toml"
    path.write_text(text)
    return path


def _error(*args) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_machine(*args)
    message = str(info.value)
    assert "\n" not in message
    return info.value


def test_default_config_loads():
    machine = load_machine()
    assert machine == load_machine(DEFAULT_CONFIG)
    assert machine.cores.count == 32
    assert machine.lx.size_bytes == 2 * 1024 * 1024
    assert machine.ring.stops.count("pcie") == 1
    assert machine.problems() == []


def test_config_file_copy_loads_the_same(tmp_path):
    assert load_machine(_write(tmp_path, TEXT)) == load_machine()


@pytest.mark.parametrize(("item", "read"), [
    ("ring.hop_latency_cycles=3", lambda m: m.ring.hop_latency_cycles == 3),
    ("dram.page_policy=closed", lambda m: m.dram.page_policy == "closed"),
    ('dram.page_policy="closed"', lambda m: m.dram.page_policy == "closed"),
    ("pt.lanes.fp16=16", lambda m: m.pt.lanes["fp16"] == 16),
    ("clock.ghz=2", lambda m: m.clock.ghz == 2.0 and isinstance(m.clock.ghz, float)),
    (" sfu.cost_cycles.transcendental = 8", lambda m: m.sfu.cost_cycles["transcendental"] == 8),
])
def test_set_overrides_apply(item, read):
    assert read(load_machine(None, [item]))


def test_set_overrides_apply_in_order_and_do_not_leak():
    machine = load_machine(None, ["ring.hop_latency_cycles=3", "ring.hop_latency_cycles=5"])
    assert machine.ring.hop_latency_cycles == 5
    assert load_machine().ring.hop_latency_cycles == 2


def test_set_applies_to_a_given_file(tmp_path):
    path = _write(tmp_path, _edit("hop_latency_cycles =", "hop_latency_cycles = 7"))
    assert load_machine(path).ring.hop_latency_cycles == 7
    assert load_machine(path, ["ring.hop_latency_cycles=1"]).ring.hop_latency_cycles == 1


BAD_FILES = {
    "unknown top-level table": (TEXT + "\n[turbo]\nboost = 2\n", "turbo", "unknown key"),
    "unknown top-level key": ("turbo = 2\n" + TEXT, "turbo", "unknown key"),
    "unknown nested key": (_edit("ghz =", "ghz = 1.1\nturbo = 2"), "clock.turbo", "unknown key"),
    "missing key": (_edit("banks =", ""), "dram.banks", "missing key"),
    "missing table": (TEXT.replace("[fifo]\ndepth_sticks = 16", ""), "fifo", "missing key"),
    "string for int": (_edit("banks =", 'banks = "16"'), "dram.banks", "expected int, got str"),
    "bool for int": (_edit("banks =", "banks = true"), "dram.banks", "expected int, got bool"),
    "float for int": (_edit("banks =", "banks = 16.0"), "dram.banks", "expected int, got float"),
    "scalar for table": (_edit("ghz =", "").replace("[clock]", "clock = 1"), "clock", "expected a table"),
    "string in a dtype table": (_edit("fp16 = 8", 'fp16 = "8"'), "pt.lanes.fp16", "expected int"),
    "int in the stop list": (TEXT.replace('"pcie",\n]', "3,\n]"), "ring.stops", "array of strings"),
    "no cores": (_edit("count =", "count = 0"), "cores.count", "must be > 0"),
    "banks not a power of two": (_edit("banks =", "banks = 3"), "dram.banks", "power of two"),
    "negative latency": (_edit("fill_cycles =", "fill_cycles = -1"), "pt.fill_cycles", "must be >= 0"),
    "unknown page policy": (_edit("page_policy =", 'page_policy = "sideways"'), "dram.page_policy",
                            '"open" or "closed"'),
    "nan clock": (_edit("ghz =", "ghz = nan"), "clock.ghz", "finite"),
    "infinite bandwidth": (_edit("gbytes_per_s =", "gbytes_per_s = inf"), "pcie.gbytes_per_s", "finite"),
    "beyond 64 bits": (_edit("size_bytes = 137438953472", "size_bytes = 100000000000000000000"),
                       "dram.size_bytes", "64 bits"),
    "more cores than ring stops": (_edit("count =", "count = 1000000000000"), "cores.count", "ring stops"),
    "zero cost class": (_edit("simple =", "simple = 0"), "sfu.cost_cycles.simple", "must be > 0"),
    "unknown dtype lanes": (_edit("fp16 = 8", "fp64 = 8"), "pt.lanes.fp64", "unknown dtype"),
}


@pytest.mark.parametrize("case", BAD_FILES, ids=list(BAD_FILES))
def test_bad_file_names_file_and_key(tmp_path, case):
    text, key, what = BAD_FILES[case]
    path = _write(tmp_path, text)
    error = _error(path)
    assert isinstance(error, SpyreEmuError)
    assert error.file == str(path)
    assert error.path == key
    assert str(error).startswith(f"{path}: {key}: ")
    assert what in error.message


def test_malformed_toml(tmp_path):
    path = _write(tmp_path, TEXT.replace("[dram]", "[dram"))
    error = _error(path)
    assert str(error).startswith(f"{path}: invalid TOML")
    assert "line" in str(error)


def test_not_utf8(tmp_path):
    path = tmp_path / "card.toml"
    path.write_bytes(b"\xff\xfe" + TEXT.encode())
    assert str(_error(path)).startswith(f"{path}: invalid TOML: not UTF-8")


@pytest.mark.parametrize(("value", "what"), [("[" * 5000 + "]" * 5000, "nested too deeply"),
                                           ("9" * 5000, "4300 digits")])
def test_toml_beyond_tomllib_is_invalid_toml(tmp_path, value, what):
    """Arrays nested past Python's stack raised RecursionError, an integer of 5000 digits int()'s ValueError:
    tracebacks from tomllib, which only ever promises TOMLDecodeError (found by fuzzing, session 40)."""
    path = _write(tmp_path, TEXT.replace("[clock]\n", f"[clock]\nx = {value}\n", 1))
    error = _error(path)
    assert str(error).startswith(f"{path}: invalid TOML: ")
    assert what in str(error)


@pytest.mark.parametrize(("value", "what"), [("[" * 5000 + "]" * 5000, "nested too deeply"),
                                           ("9" * 5000, "4300 digits")])
def test_set_value_beyond_tomllib_names_the_option(value, what):
    error = _error(None, [f"dram.channels={value}"])
    assert error.file == f"--set dram.channels={value}"
    assert error.message.startswith("invalid value: ")
    assert what in error.message


def test_missing_file(tmp_path):
    path = tmp_path / "nope.toml"
    assert str(_error(path)) == f"{path}: cannot read config: No such file or directory"


def test_directory_instead_of_file(tmp_path):
    assert str(_error(tmp_path)).startswith(f"{tmp_path}: cannot read config: ")


BAD_SETS = {
    "ring.hop_latency_cycles": (None, "expected KEY=VALUE"),
    "=3": (None, "expected KEY=VALUE"),
    "ring.nope=3": (None, "unknown key 'ring.nope'"),
    "nope=3": (None, "unknown key 'nope'"),
    "nope.deeper=3": (None, "unknown key 'nope.deeper'"),
    "ring.hop_latency_cycles.x=3": (None, "unknown key"),
    "pt.lanes.fp64=8": (None, "unknown key 'pt.lanes.fp64'"),
    "ring.hop_latency_cycles=abc": ("ring.hop_latency_cycles", "expected int, got str"),
    "ring.hop_latency_cycles=true": ("ring.hop_latency_cycles", "expected int, got bool"),
    "ring.hop_latency_cycles=1.5": ("ring.hop_latency_cycles", "expected int, got float"),
    "ring.hop_latency_cycles=-1": ("ring.hop_latency_cycles", "must be > 0"),
    "ring.hop_latency_cycles=0": ("ring.hop_latency_cycles", "must be > 0"),
    "sfu.cost_cycles.transcendental=1000000000000000000": ("sfu.cost_cycles.transcendental", "must be at most"),
    "sfu.latency_cycles=9223372036854775000": ("sfu.latency_cycles", "must be at most"),
    "cores.count=0": ("cores.count", "must be > 0"),
    "dram.banks=3": ("dram.banks", "power of two"),
    "pt.fill_cycles=-1": ("pt.fill_cycles", "must be >= 0"),
    "dram.page_policy=sideways": ("dram.page_policy", '"open" or "closed"'),
    "clock.ghz=nan": ("clock.ghz", "finite"),
    "ring=3": ("ring", "expected a table"),
    "pt.lanes.fp16=0": ("pt.lanes.fp16", "power of two"),
}


@pytest.mark.parametrize("item", BAD_SETS)
def test_bad_set_names_option_and_key(item):
    key, what = BAD_SETS[item]
    error = _error(None, ["ring.hop_latency_cycles=3", item])
    assert error.file == f"--set {item}"
    assert str(error).startswith(f"--set {item}: ")
    if key is not None:
        assert error.path == key
        assert f": {key}: " in str(error)
    assert what in str(error)


def test_set_error_on_a_given_file_names_the_option(tmp_path):
    path = _write(tmp_path, TEXT)
    error = _error(path, ["dram.banks=3"])
    assert str(error) == "--set dram.banks=3: dram.banks: must be a power of two"


def test_file_error_is_not_blamed_on_an_unrelated_set(tmp_path):
    path = _write(tmp_path, _edit("banks =", "banks = 3"))
    error = _error(path, ["ring.hop_latency_cycles=3"])
    assert str(error) == f"{path}: dram.banks: must be a power of two"
