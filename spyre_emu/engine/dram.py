"""LPDDR5 channels and banks: address mapping and in-order request service.

Timing contract (all in core cycles, parameters from [dram]):
- Addresses interleave over channels every ``interleave_bytes``; inside a channel a row
  spans ``row_bytes`` and the bank index is the row index XOR-hashed with the row bits
  above it (permutation interleaving, so streams 2 MB apart do not share a bank).
- Each channel keeps a read queue and a write queue, each first come, first served (reads
  reaching the controller in the same cycle: by unit, then in issue order).
  The next request is chosen when the previous one's column command issues (in-order
  command issue: its PRE/ACT cannot come earlier); when both queues wait, the channel
  alternates direction (read/write round-robin, which bounds either side's latency).
  An idle channel picks when a request reaches it, or at its next command cycle if later.
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

A read's arrival is no event: the read enters its channel's read queue when it is issued, stamped
with its arrival cycle and in its arrival order (``queue_read_nb``), and a pick takes only reads that
have arrived (``pick_nb``); the pick's cycle is kept as an arrival would have set it (``dma._arm_nb``).
A pick that nothing before its cycle can change is made within the previous one's event (``dma.channel_nb``).
"""


from . import layout as L
from .jit import U, njit


@njit(cache=True, _nrt=False, forceinline=True)
def channel_of_nb(cfg, addr):
    """The interleave line modulo the channels, XORed with each higher group of line bits when
    ``C_HASH_GROUPS`` > 1 (``Dram.channel_of``)."""
    line, mask = addr >> cfg[L.C_LINE_SHIFT], cfg[L.C_CHANNELS] - 1  # shifts: a division per group is slow
    channel = line & mask
    for _ in range(cfg[L.C_HASH_GROUPS] - 1):
        line >>= cfg[L.C_CHANNEL_SHIFT]
        channel ^= line & mask
    return channel


@njit(cache=True, _nrt=False)
def queue_read_nb(ch, chunk, c, k, arrive, t):
    """Put read request ``k``, issued at ``t``, into channel ``c``'s read queue, stamped with the cycle it
    reaches the controller, at its place in the order its arrivals would have been handled as events:
    (arrival, unit, the unit's request number). A request goes after those of its own unit and arrival,
    which it was issued after: at once after the read queued last if that is of the same unit and cycle,
    else where a walk back from the tail (arrivals come nearly in order) by runs of one unit and arrival
    (``K_FIRST``) stops. The runs walked past arrive later than ``t``, so none has lost a member to a pick.
    At a stream's start 32 units issue 4,096 requests in unit order, not in arrival order: on the 8 MB
    stream a walk by request took 252,076 steps, this one 5,872 (docs/speed.md, session 42)."""
    chan, req = ch[U(c)], chunk[U(k)]
    req[L.K_ARRIVE] = arrive
    head, u = chan[L.D_QHEAD_R], req[L.K_UNIT]
    last, last_t = chan[L.D_LAST], chan[L.D_LAST_T]
    chan[L.D_LAST], chan[L.D_LAST_T] = k, t
    if head < 0:
        req[L.K_NEXT] = -1
        req[L.K_FIRST] = k
        chan[L.D_QHEAD_R] = chan[L.D_QTAIL_R] = k
        return
    if last_t == t and chunk[U(last), L.K_ARRIVE] == arrive and chunk[U(last), L.K_UNIT] == u:
        cur = last  # queued in this cycle, so still queued (it arrives after t), and its run's last
    else:
        cur = chan[L.D_QTAIL_R]
        while chunk[U(cur), L.K_ARRIVE] > arrive or (chunk[U(cur), L.K_ARRIVE] == arrive
                                                     and chunk[U(cur), L.K_UNIT] > u):
            first = chunk[U(cur), L.K_FIRST]
            if first == head:  # first in the queue
                req[L.K_NEXT] = head
                req[L.K_FIRST] = k
                chunk[U(head), L.K_PREV] = k
                chan[L.D_QHEAD_R] = k
                return
            cur = chunk[U(first), L.K_PREV]
    same = chunk[U(cur), L.K_ARRIVE] == arrive and chunk[U(cur), L.K_UNIT] == u
    req[L.K_FIRST] = chunk[U(cur), L.K_FIRST] if same else k
    after = chunk[U(cur), L.K_NEXT]
    req[L.K_NEXT] = after
    req[L.K_PREV] = cur
    chunk[U(cur), L.K_NEXT] = k
    if after < 0:
        chan[L.D_QTAIL_R] = k
    else:
        chunk[U(after), L.K_PREV] = k


@njit(cache=True, _nrt=False)
def queue_write_nb(ch, chunk, c, k):
    """Append write request ``k`` to channel ``c``'s write queue (its data is all at the controller)."""
    chan = ch[U(c)]
    chunk[U(k), L.K_NEXT] = -1
    if chan[L.D_QHEAD_W] < 0:
        chan[L.D_QHEAD_W] = k
    else:
        chunk[U(chan[L.D_QTAIL_W]), L.K_NEXT] = k
    chan[L.D_QTAIL_W] = k


@njit(cache=True, _nrt=False)
def pick_nb(ch, chunk, c, t):
    """Take the channel's next request at cycle ``t``: (chunk id, is_write), or (-1, 0) if none waits. A read
    waits once it has arrived: the read queue holds requests still on their way, behind those that are not."""
    chan = ch[U(c)]
    r = chan[L.D_QHEAD_R]
    reads, writes = r >= 0 and chunk[U(r), L.K_ARRIVE] <= t, chan[L.D_QHEAD_W] >= 0
    if not reads and not writes:
        return -1, 0
    is_write = 1 if writes and (not reads or chan[L.D_LASTW] == 0) else 0
    head = L.D_QHEAD_W if is_write else L.D_QHEAD_R
    k = chan[head]
    chan[head] = chunk[U(k), L.K_NEXT]
    return k, is_write


@njit(cache=True, _nrt=False)
def _refresh_nb(cfg, ch, bank, c, start):
    """Take every refresh that fell due before ``start``; return when the channel is usable."""
    chan = ch[U(c)]
    while start >= chan[L.D_NEXTREF]:
        ref_end = max(chan[L.D_NEXTREF], chan[L.D_BUS]) + cfg[L.C_RFC]
        first = c * cfg[L.C_BANKS]
        for b in range(first, first + cfg[L.C_BANKS]):
            bank[U(b), L.B_ROW] = -1
            bank[U(b), L.B_ACTOK] = ref_end
        chan[L.D_NEXTREF] += cfg[L.C_REFI]
        chan[L.D_REFRESHES] += 1
        start = max(start, ref_end)
    return start


@njit(cache=True, _nrt=False)
def serve_nb(cfg, ch, bank, addr, sticks, is_write, now):
    """Serve one request of ``sticks`` sticks starting at ``addr``; return the data start cycle. The address
    map by shifts and masks: every divisor is a power of two (``Dram.problems``) and the address non-negative,
    so they equal ``//`` and ``%``, without a division by a run-time value (tens of cycles each, six per
    request: ×1.04 on the streaming read's loop, docs/speed.md, session 41)."""
    c = channel_of_nb(cfg, addr)
    line_shift = cfg[L.C_LINE_SHIFT]
    local = (addr >> (line_shift + cfg[L.C_CHANNEL_SHIFT]) << line_shift) + (addr & (cfg[L.C_INTERLEAVE] - 1))
    row_index = local >> cfg[L.C_ROW_SHIFT]
    b = c * cfg[L.C_BANKS] + ((row_index ^ (row_index >> cfg[L.C_BANK_SHIFT])) & (cfg[L.C_BANKS] - 1))
    row = row_index >> cfg[L.C_BANK_SHIFT]
    chan, bk = ch[U(c)], bank[U(b)]
    start = _refresh_nb(cfg, ch, bank, c, max(now, chan[L.D_CMD]))
    act = bk[L.B_ACT]
    if bk[L.B_ROW] == row:
        col = max(start, bk[L.B_COL])
        chan[L.D_HITS] += 1
    else:
        if bk[L.B_ROW] >= 0:
            pre = max(start, bk[L.B_ACT] + cfg[L.C_RAS], bk[L.B_WREND] + cfg[L.C_WR])
            act = pre + cfg[L.C_RP]
            chan[L.D_CONFLICTS] += 1
        else:
            act = max(start, bk[L.B_ACTOK])
            chan[L.D_MISSES] += 1
        bk[L.B_ROW] = row
        bk[L.B_ACT] = act
        col = act + cfg[L.C_RCD]
        bk[L.B_COL] = col
    latency = cfg[L.C_WL] if is_write else cfg[L.C_RL]
    data = max(col + latency, chan[L.D_BUS])
    if chan[L.D_LASTW] >= 0 and chan[L.D_LASTW] != is_write:
        turn = chan[L.D_BUS] + cfg[L.C_RTW] if is_write else chan[L.D_BUS] + cfg[L.C_WTR] + latency
        data = max(data, turn)
        chan[L.D_TURNS] += 1
    end = data + sticks * cfg[L.C_STICK_CYC]
    chan[L.D_CMD] = data - latency
    chan[L.D_BUS] = end
    chan[L.D_LASTW] = is_write
    chan[L.D_BUSY] += sticks * cfg[L.C_STICK_CYC]
    if is_write:
        bk[L.B_WREND] = end
        chan[L.D_WRITE_STICKS] += sticks
    else:
        chan[L.D_READ_STICKS] += sticks
    if cfg[L.C_CLOSED_PAGE]:
        done = end + cfg[L.C_WR] if is_write else col + sticks * cfg[L.C_STICK_CYC]
        bk[L.B_ROW] = -1
        bk[L.B_ACTOK] = max(act + cfg[L.C_RAS], done) + cfg[L.C_RP]
    return data
