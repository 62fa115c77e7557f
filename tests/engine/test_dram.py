"""DRAM timing, derived by hand on configs/tiny.toml.

tiny: H = 2; core0 -> mc0 is 2 hops (counter-clockwise through pcie); 2 channels
interleaved every 256 B; 2 banks; 1 KB rows; one stick = 4 cycles on a channel;
tRCD 10, tRL 5, tWL 3, tRP 7, tRAS 20, tWR 6, tWTR 4, tRTW 2.
A load: request reaches the controller after 2 hops (4 cycles); served; each stick
leaves the controller when its data is out; 2 hops back (4 cycles); LX write; done +1.
A load unit starts its next load once the previous one has issued its requests; ``_chain`` makes
each load wait for the previous one's end instead, so the tests see one load's DRAM timing at a time.
"""

REQ = 4  # request path core0 -> mc0
BACK = 4  # data path mc0 -> core0


def _load(addr, nbytes=128, **extra):
    return {"op": "load", "dram": addr, "lx": 0, "bytes": nbytes, **extra}


def _chain(*loads):
    """The loads one after another: each waits for the previous one to end."""
    out = [dict(load) for load in loads]
    for k in range(1, len(out)):
        out[k - 1]["signal"] = [*out[k - 1].get("signal", []), f"after{k}"]
        out[k]["wait"] = [*out[k].get("wait", []), f"after{k}"]
    return out


def _address(tiny, bank_row_index):
    """The lowest channel-0 address whose channel-local row index is ``bank_row_index``."""
    d = tiny.dram
    local = bank_row_index * d.row_bytes
    return (local // d.interleave_bytes) * d.channels * d.interleave_bytes


def test_row_miss_on_closed_bank(tiny, run_units):
    # ACT at 4, column at 4 + tRCD = 14, data 14 + tRL = 19..23, back at 27, written, done 28.
    log = run_units(tiny, {0: {"load": [_load(0)]}})
    assert log.total_cycles == REQ + 10 + 5 + 4 + BACK + 1
    assert log.channel_stats[0].tolist()[3:5] == [0, 1]  # no hit, one miss


def test_row_hit(tiny, run_units):
    # Second load starts at 28, request at 32, row open: column at 32, data 37..41, back 45, done 46.
    log = run_units(tiny, {0: {"load": _chain(_load(0), _load(128))}})
    assert log.end.tolist() == [28, 46]
    assert int(log.channel_stats[0, 3]) == 1  # one row hit


def test_queued_loads_overlap(tiny, run_units):
    """Unchained, the second load starts at 0, once the first has issued its one request: both requests
    reach channel 0 at 4, in issue order. The first's data 19..23; the second is a row hit, column at
    max(4, data start - tRL = 14), data after the bus at 23..27, back at 31, done 32."""
    log = run_units(tiny, {0: {"load": [_load(0), _load(128)]}})
    assert log.start.tolist() == [0, 0]
    assert log.end.tolist() == [28, 32]


def test_row_conflict(tiny, run_units):
    """Row index 3 is bank (3 ^ 1) % 2 = 0, row 1: the same bank as address 0, another row.

    Request at 32; PRE at max(32, ACT 4 + tRAS 20) = 32, ACT 39, column 49, data 54..58,
    back at 62, done 63.
    """
    log = run_units(tiny, {0: {"load": _chain(_load(0), _load(_address(tiny, 3)))}})
    assert log.end.tolist() == [28, 63]
    assert int(log.channel_stats[0, 5]) == 1  # one conflict


def test_row_conflict_without_writes_needs_no_write_recovery(tiny_with, run_units):
    """As test_row_conflict with tWR 40 (> tRAS): the bank was never written, so the PRE is
    still at max(32, ACT 4 + tRAS 20) = 32, not at tWR = 40: done 63."""
    machine = tiny_with("dram.t_wr_cycles=40")
    log = run_units(machine, {0: {"load": _chain(_load(0), _load(_address(machine, 3)))}})
    assert log.end.tolist() == [28, 63]


def test_burst_of_two_sticks(tiny, run_units):
    # 256 B is one chunk on channel 0: data 19..27, sticks leave at 23 and 27, land 27 and 31.
    log = run_units(tiny, {0: {"load": [_load(0, 256)]}})
    assert log.total_cycles == 32


def test_store(tiny, run_units):
    # The stick leaves at 0, reaches mc0 at 4; ACT 4, column 14, data 14 + tWL = 17..21: done 21.
    log = run_units(tiny, {0: {"store": [{"op": "store", "lx": 0, "dram": 0, "bytes": 128}]}})
    assert log.total_cycles == 21


def test_read_after_write_turnaround(tiny, run_units):
    """Store done at 21 (bus busy to 21, row 0 open). The load then starts at 21, request at 25:
    row hit, column at 25, but a read after a write waits tWTR after the write data:
    data >= 21 + tWTR + tRL = 30, so data 30..34, back at 38, done 39."""
    store = {"op": "store", "lx": 0, "dram": 0, "bytes": 128, "signal": ["w"]}
    log = run_units(tiny, {0: {"store": [store], "load": [_load(128, wait=["w"])]}})
    assert log.end.tolist() == [39, 21]  # load unit comes first in unit order
    assert int(log.channel_stats[0, 7]) == 1  # one turnaround


def test_refresh_closes_rows_and_blocks(tiny_with, run_units):
    """With tREFI 30 and tRFC 20, channel 0's first refresh is due at 30. The second load's
    request at 32 finds it due: the refresh took the channel 30..50 (the bus was free from 23)
    and closed the row, so the request is a miss after it: ACT 50, column 60, data 65..69,
    back at 73, done 74."""
    machine = tiny_with("dram.t_refi_cycles=30", "dram.t_rfc_cycles=20")
    log = run_units(machine, {0: {"load": _chain(_load(0), _load(128))}})
    assert log.end.tolist() == [28, 74]
    assert int(log.channel_stats[0, 6]) == 1


def test_same_cycle_requests_of_one_unit_queue_in_issue_order(tiny_with, run_units):
    """Requests of one unit reaching a channel in the same cycle are queued in issue order,
    however many requests the unit issued before (its request slots wrap around).

    One channel, 256 B rows (each 256 B request is its own row index ri: bank (ri ^ ri // 2) % 2,
    row ri // 2), 8 request slots (1 KB in flight). Seven 128 B loads of address 0 (bank 0 row 0):
    the first ends at 28, each next one 18 later (row hit: request +4, data +9..+13, back +4,
    done +1), the seventh at 136. The eighth loads 1 KB at 0: four requests, ri 0..3, issued as
    the unit's requests 7..14 (slots 7, 0, 1, 2) and queued at T = 140 in that order:
    ri 0 (b0 r0, hit): data T+5..T+13. ri 1 (b1, closed): ACT T, column T+10, data T+15..T+23.
    ri 2 (b1 r1, conflict): PRE at ACT + tRAS = T+20, ACT T+27, column T+37, data T+42..T+50.
    ri 3 (b0 r1, conflict): picked at T+37, PRE T+37, ACT T+44, column T+54, data T+59..T+67.
    Its last stick leaves at T+67, lands at T+71 and is written; done T+72 = 212. (Served in
    slot order instead, ri 0 would come last and conflict: done T+99.)
    """
    machine = tiny_with("dram.channels=1", "dram.row_bytes=256", "dma.max_burst_bytes=1024",
                        "dma.max_inflight_bytes=1024")
    log = run_units(machine, {0: {"load": _chain(*[_load(0)] * 7, _load(0, 1024))}})
    assert log.end.tolist() == [28 + 18 * k for k in range(7)] + [212]
