"""Strided loads and stores (one instruction, pieces ``stride`` apart), derived by hand on configs/tiny.toml.

tiny: core0 -> mc0 is 2 hops (4 cycles) each way; 2 channels interleaved every 256 B, both banks
closed at first: a request reaching its channel at 4 opens the row (ACT 4, column 14), its data
is out 19..23, the stick leaves the controller at 23 and reaches core0 at 27.
"""

STICK = 128


def _load(dram, nbytes, **extra):
    return {"op": "load", "dram": dram, "lx": 0, "bytes": nbytes, **extra}


def test_pieces_are_in_flight_together(tiny, run_units):
    """Sticks at 0 and 256 (channels 0 and 1) in one strided load: both requests leave at 0, both sticks
    reach core0 at 27, the LX port writes them at 27 and 28: done 29."""
    log = run_units(tiny, {0: {"load": [_load(0, 2 * STICK, piece=STICK, stride=256)]}})
    assert log.total_cycles == 29
    assert log.channel_stats[:, 0].tolist() == [1, 1]


def test_one_load_per_piece_ordered_by_tokens_pays_the_round_trip_each(tiny, run_units):
    """The same sticks as two loads, the second waiting for the first: it starts at 28, reaches channel 1
    at 32: ACT 32, column 42, data 47..51, back at 55, done 56."""
    first, second = _load(0, STICK, signal=["a"]), _load(256, STICK, wait=["a"])
    log = run_units(tiny, {0: {"load": [first, second]}})
    assert log.end.tolist() == [28, 56]


def test_back_to_back_burst_sized_pieces_are_a_plain_transfer(tiny, run_units):
    """Bursts never cross a piece's end; pieces of whole bursts (4096 B), back to back, change nothing."""
    plain = run_units(tiny, {0: {"load": [_load(0, 64 * STICK)]}, 1: {"store": [
        {"op": "store", "lx": 0, "dram": 1 << 20, "bytes": 96 * STICK}]}})
    strided = run_units(tiny, {0: {"load": [_load(0, 64 * STICK, piece=4096, stride=4096)]}, 1: {"store": [
        {"op": "store", "lx": 0, "dram": 1 << 20, "bytes": 96 * STICK, "piece": 4096, "stride": 4096}]}})
    assert strided.end.tolist() == plain.end.tolist()


def test_each_piece_is_set_up_before_its_requests(tiny_with, run_units):
    """piece_setup_cycles = 10: the first piece's request leaves at 10 (ACT 14, column 24, data 29..33,
    at core0 37); the second piece is set up from 10, its request leaves at 20 for channel 1 (ACT 24,
    column 34, data 39..43, at core0 47). The port writes the sticks at 37 and 47: done 48."""
    machine = tiny_with("dma.piece_setup_cycles=10")
    log = run_units(machine, {0: {"load": [_load(0, 2 * STICK, piece=STICK, stride=256)]}})
    assert log.total_cycles == 48


def test_a_plain_transfer_is_one_piece(tiny_with, run_units):
    """A plain 4-stick load (two requests: channels 0 and 1) is one piece, set up once: it ends exactly
    the setup later than with none."""
    plain = run_units(tiny_with(), {0: {"load": [_load(0, 4 * STICK)]}})
    setup = run_units(tiny_with("dma.piece_setup_cycles=10"), {0: {"load": [_load(0, 4 * STICK)]}})
    assert setup.total_cycles == plain.total_cycles + 10


def test_a_send_is_set_up_too(tiny_with, run_units):
    """An LX-to-LX send of one stick waits its setup before the stick leaves the port."""
    send = {"op": "send", "lx": 0, "to_core": 1, "to_lx": 0, "bytes": STICK}
    plain = run_units(tiny_with(), {0: {"send": [send]}})
    setup = run_units(tiny_with("dma.piece_setup_cycles=10"), {0: {"send": [send]}})
    assert setup.total_cycles == plain.total_cycles + 10


def test_an_lx_pattern_costs_nothing_in_dram(tiny_with, run_units):
    """A pattern on the LX side leaves the DRAM side one piece: 4 whole sticks into every fourth LX slot end
    exactly when the plain load does (its piece set up once); the same bytes as 4 one-stick pieces in DRAM
    (set up one after another, each from its predecessor's issue) take longer."""
    machine = tiny_with("dma.piece_setup_cycles=10")
    plain = run_units(machine, {0: {"load": [_load(0, 4 * STICK)]}})
    patterned = run_units(machine, {0: {"load": [_load(0, 4 * STICK, lx_piece=STICK, lx_stride=4 * STICK)]}})
    pieces = run_units(machine, {0: {"load": [_load(0, 4 * STICK, piece=STICK, stride=STICK * 2)]}})
    assert patterned.total_cycles == plain.total_cycles
    assert pieces.total_cycles > plain.total_cycles
