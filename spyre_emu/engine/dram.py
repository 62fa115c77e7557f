"""LPDDR5 channels and banks: address mapping and in-order request service.

Timing contract (all in core cycles, parameters from [dram]):
- Addresses interleave over channels every ``interleave_bytes``; inside a channel a row
  spans ``row_bytes`` and the bank index is the row index XOR-hashed with the row bits
  above it (permutation interleaving, so streams 2 MB apart do not share a bank).
- Each channel keeps a read queue and a write queue, each first come, first served.
  The next request is chosen when the previous one's column command issues (in-order
  command issue: its PRE/ACT cannot come earlier); when both queues wait, the channel
  alternates direction (read/write round-robin, which bounds either side's latency).
- Open-page policy: row hit: column command when the bank allows; closed bank: ACT,
  then tRCD; other row open: PRE no earlier than ACT + tRAS (and write data end + tWR),
  then tRP, ACT, tRCD. Closed-page policy: every access ends with an auto-precharge
  (after tRAS, the read's column commands or the write recovery tWR), so the next
  access to the bank is an ACT after tRP.
- Data starts tRL (read) or tWL (write) after the column command, on a free data bus;
  a read after a write starts its command tWTR after the write data ends; a write after
  a read waits tRTW after the read data ends. Each 128 B stick takes ``stick_cycles``.
- All-bank refresh is due every tREFI (staggered per channel) and is taken at the next
  request boundary: it waits for the bus, lasts tRFC and closes every bank.
"""

from numba import njit

from .layout import (
    B_ACT,
    B_ACTOK,
    B_COL,
    B_ROW,
    B_WREND,
    C_BANKS,
    C_CHANNELS,
    C_CLOSED_PAGE,
    C_INTERLEAVE,
    C_RAS,
    C_RCD,
    C_REFI,
    C_RFC,
    C_RL,
    C_ROW,
    C_RP,
    C_RTW,
    C_STICK_CYC,
    C_WL,
    C_WR,
    C_WTR,
    D_ARMED,
    D_BUS,
    D_BUSY,
    D_CMD,
    D_CONFLICTS,
    D_HITS,
    D_LASTW,
    D_MISSES,
    D_NEXTREF,
    D_QHEAD_R,
    D_QHEAD_W,
    D_QTAIL_R,
    D_QTAIL_W,
    D_READ_STICKS,
    D_REFRESHES,
    D_TURNS,
    D_WRITE_STICKS,
    K_ADDR,
    K_NEXT,
)


@njit(cache=True, _nrt=False)
def channel_of_nb(cfg, addr):
    return (addr // cfg[C_INTERLEAVE]) % cfg[C_CHANNELS]


@njit(cache=True, _nrt=False)
def enqueue_nb(cfg, ch, chunk, k, is_write):
    """Append request ``k`` to its channel's queue; True if the channel must be armed."""
    c = channel_of_nb(cfg, chunk[k, K_ADDR])
    head, tail = (D_QHEAD_W, D_QTAIL_W) if is_write else (D_QHEAD_R, D_QTAIL_R)
    chunk[k, K_NEXT] = -1
    if ch[c, head] < 0:
        ch[c, head] = k
    else:
        chunk[ch[c, tail], K_NEXT] = k
    ch[c, tail] = k
    if ch[c, D_ARMED]:
        return False
    ch[c, D_ARMED] = 1
    return True


@njit(cache=True, _nrt=False)
def pick_nb(ch, chunk, c):
    """Take the channel's next request: (chunk id, is_write), or (-1, 0) if none waits."""
    reads, writes = ch[c, D_QHEAD_R] >= 0, ch[c, D_QHEAD_W] >= 0
    if not reads and not writes:
        return -1, 0
    is_write = 1 if writes and (not reads or ch[c, D_LASTW] == 0) else 0
    head = D_QHEAD_W if is_write else D_QHEAD_R
    k = ch[c, head]
    ch[c, head] = chunk[k, K_NEXT]
    return k, is_write


@njit(cache=True, _nrt=False)
def _refresh_nb(cfg, ch, bank, c, start):
    """Take every refresh that fell due before ``start``; return when the channel is usable."""
    while start >= ch[c, D_NEXTREF]:
        ref_end = max(ch[c, D_NEXTREF], ch[c, D_BUS]) + cfg[C_RFC]
        first = c * cfg[C_BANKS]
        for b in range(first, first + cfg[C_BANKS]):
            bank[b, B_ROW] = -1
            bank[b, B_ACTOK] = ref_end
        ch[c, D_NEXTREF] += cfg[C_REFI]
        ch[c, D_REFRESHES] += 1
        start = max(start, ref_end)
    return start


@njit(cache=True, _nrt=False)
def serve_nb(cfg, ch, bank, addr, sticks, is_write, now):
    """Serve one request of ``sticks`` sticks starting at ``addr``; return the data start cycle."""
    c = channel_of_nb(cfg, addr)
    local = (addr // (cfg[C_INTERLEAVE] * cfg[C_CHANNELS])) * cfg[C_INTERLEAVE] + addr % cfg[C_INTERLEAVE]
    row_index = local // cfg[C_ROW]
    b = c * cfg[C_BANKS] + (row_index ^ (row_index // cfg[C_BANKS])) % cfg[C_BANKS]
    row = row_index // cfg[C_BANKS]
    start = _refresh_nb(cfg, ch, bank, c, max(now, ch[c, D_CMD]))
    act = bank[b, B_ACT]
    if bank[b, B_ROW] == row:
        col = max(start, bank[b, B_COL])
        ch[c, D_HITS] += 1
    else:
        if bank[b, B_ROW] >= 0:
            pre = max(start, bank[b, B_ACT] + cfg[C_RAS], bank[b, B_WREND] + cfg[C_WR])
            act = pre + cfg[C_RP]
            ch[c, D_CONFLICTS] += 1
        else:
            act = max(start, bank[b, B_ACTOK])
            ch[c, D_MISSES] += 1
        bank[b, B_ROW] = row
        bank[b, B_ACT] = act
        col = act + cfg[C_RCD]
        bank[b, B_COL] = col
    latency = cfg[C_WL] if is_write else cfg[C_RL]
    data = max(col + latency, ch[c, D_BUS])
    if ch[c, D_LASTW] >= 0 and ch[c, D_LASTW] != is_write:
        turn = ch[c, D_BUS] + cfg[C_RTW] if is_write else ch[c, D_BUS] + cfg[C_WTR] + latency
        data = max(data, turn)
        ch[c, D_TURNS] += 1
    end = data + sticks * cfg[C_STICK_CYC]
    ch[c, D_CMD] = data - latency
    ch[c, D_BUS] = end
    ch[c, D_LASTW] = is_write
    ch[c, D_BUSY] += sticks * cfg[C_STICK_CYC]
    if is_write:
        bank[b, B_WREND] = end
        ch[c, D_WRITE_STICKS] += sticks
    else:
        ch[c, D_READ_STICKS] += sticks
    if cfg[C_CLOSED_PAGE]:
        done = end + cfg[C_WR] if is_write else col + sticks * cfg[C_STICK_CYC]
        bank[b, B_ROW] = -1
        bank[b, B_ACTOK] = max(act + cfg[C_RAS], done) + cfg[C_RP]
    return data
