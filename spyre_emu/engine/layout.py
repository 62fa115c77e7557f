"""Array layouts shared by the packer (Python) and the jitted loop: one place for every index.

The engine state is a handful of int64 matrices with named columns, so the jitted
functions take few arguments and numba can cache them. Columns are module constants,
which numba freezes at compile time; the cache is keyed on these sources.
"""

# Instruction table ``ins[i, :]``. A load's I_A3 is its multicast mask (bit s: ring stop s gets a
# copy; 0: its own core) and I_A4 its number of destinations (0 for a plain load); a DMA's I_A5 is its
# piece size and I_A6 the DRAM stride between pieces (strided loads and stores; else one piece).
I_OP, I_UNIT, I_A0, I_A1, I_A2, I_A3, I_A4, I_A5, I_A6, I_DUR, I_W0, I_W1, I_S0, I_S1 = range(14)
I_COLS = 14

# Engine opcodes (same numbers as unit_program.opcodes.Op).
OP_LOAD, OP_STORE, OP_SEND, OP_LX2FIFO, OP_FIFO2LX, OP_MATMUL, OP_SFU, OP_H2D, OP_D2H = range(9)

# Unit state ``us[u, :]``: program counter and end, run state, DMA and stream progress,
# and the unit's statistics (the last columns, copied into the event log).
(U_PC, U_END, U_BUSY, U_STOP, U_CORE, U_CORELET, U_PORT_FP, U_INTERVAL_FP,
 U_WAITTOK, U_WAITSINCE, U_BLOCK, U_BLOCKSINCE,
 U_ADDR, U_ISSUE_LEFT, U_INFLIGHT, U_LEFT, U_DEST, U_CHUNK, U_PIECE_LEFT, U_OLDEST, U_LASTEND, U_PIECE_AT, U_WAKE,
 S_BUSY, S_STALL_TOKEN, S_STALL_DATA, S_STALL_ROOM, S_STALL_LINK, S_STALL_DRAM, S_STICKS) = range(30)
U_COLS = 30
# U_PC is the instruction a unit runs or will start next; U_OLDEST the oldest not yet ended. They
# differ only on DMA units, which start an instruction once the previous one has issued its last
# request (their descriptors queue) and end them in order. U_PIECE_AT: when the DMA unit's current
# piece is set up (it issues no request of it before); U_WAKE: the cycle of its pending EV_ISSUE.
# U_CHUNK: the first of the DMA unit's free request slots, listed through their K_NEXT, the one freed last
# first: its row is likely still in the cache (docs/speed.md, session 43). A slot never taken (K_STICKS 0: a
# request has a stick or more) is followed by the next one, also never taken. A unit's slots are as many as
# sticks fit in its in-flight budget, so one is always free and a unit never takes more than its own.
STAT_FIRST = S_BUSY

# Block reasons of a streaming unit.
BLOCK_NONE, BLOCK_DATA, BLOCK_ROOM = 0, 1, 2

# Machine parameters ``cfg[:]``.
(C_HOP, C_BURST, C_INFLIGHT, C_INTERLEAVE, C_CHANNELS, C_BANKS, C_ROW, C_STICK_CYC,
 C_RCD, C_RL, C_WL, C_RP, C_RAS, C_WR, C_WTR, C_RTW, C_REFI, C_RFC,
 C_FIFO_DEPTH, C_STOPS, C_UNITS, C_MAX_CYCLES, C_CLOSED_PAGE, C_CHAIN, C_HASH_GROUPS, C_SEND_HOLD,
 C_LINE_SHIFT, C_CHANNEL_SHIFT,  # log2 of interleave_bytes and of channels (both powers of two)
 C_PIECE_SETUP,
 C_ROW_SHIFT, C_BANK_SHIFT,  # log2 of row_bytes and of banks
 C_SERVE_AHEAD) = range(32)  # a channel serves reads ahead of their pick cycles (dma.channel_nb): 0 or 1
C_COLS = 32

# DRAM channel state ``ch[c, :]`` (state, then statistics).
# Queues are linked lists of chunk ids, one for reads (head, tail) and one for writes. ``D_ARMED``: the
# cycle of the channel's pending pick (NEVER: none); ``D_ARMS`` counts the picks armed, each event carrying
# its number, so that a pick superseded by an earlier one is recognised and ignored (dma.channel_nb).
# ``D_LAST``: the read queued last, and ``D_LAST_T`` the cycle it was (dram.queue_read_nb).
(D_CMD, D_BUS, D_LASTW, D_NEXTREF, D_QHEAD_R, D_QTAIL_R, D_QHEAD_W, D_QTAIL_W, D_ARMED, D_ARMS, D_LAST, D_LAST_T,
 D_READ_STICKS, D_WRITE_STICKS, D_BUSY, D_HITS, D_MISSES, D_CONFLICTS, D_REFRESHES, D_TURNS) = range(20)
D_COLS = 20
D_STAT_FIRST = D_READ_STICKS

# DRAM bank state ``bank[c * banks + b, :]``.
B_ROW, B_ACT, B_COL, B_WREND, B_ACTOK = range(5)
B_COLS = 5

# FIFO state ``fifo[f, :]``: f = 2 * corelet_global + (0 input, 1 output).
F_OCC, F_VIS, F_WDATA, F_WROOM = range(4)
F_COLS = 4

# Ring link statistics ``link[l, :]``: l = 2 * stop + direction (0 clockwise, 1 counter-clockwise).
L_FREE, L_STICKS, L_WAIT = range(3)
L_COLS = 3

# DRAM requests (one per channel chunk of a burst) ``chunk[k, :]``: sticks still to arrive
# (writes), address, size, issuing unit, next request in its channel queue (of a free slot: the next free
# slot of its unit, layout.U_CHUNK), instruction;
# a read's arrival cycle at its controller, the request before it in its channel's read queue and the
# first of the reads of its unit and arrival there (dram.queue_read_nb).
K_LEFT, K_ADDR, K_STICKS, K_UNIT, K_NEXT, K_INS, K_ARRIVE, K_PREV, K_FIRST = range(9)
K_COLS = 9

# Events ``ev[slot, :]``: eight columns, so that a row is one 64-byte cache line (queue.new_queue aligns
# the table).
E_TIME, E_KIND, E_P0, E_P1, E_P2, E_P3, E_P4, E_NEXT = range(8)
E_COLS = 8
# A read request's arrival at its controller is no event: it enters the channel's read queue at issue
# (dma.issue_nb, dram.queue_read_nb). EV_LAND: a read stick of a core's load unit reaching its destination,
# handled like EV_STICK but last in its cycle, where its push is an append (ring.travel_nb).
EV_TRY, EV_DONE, EV_STICK, EV_STEP, EV_FIFO_VIS, EV_WRITE_ACK, EV_CHANNEL, EV_ISSUE, EV_LAND = range(9)

# Roles of a stick on the ring. Read, send and multicast sticks carry their instruction, written
# sticks their request slot. ROLE_LAND: a multicast copy being written at a destination it passed
# on without stopping (ring.travel_nb); an event of its own, ordered where the copy's arrival would be.
ROLE_READ, ROLE_WRITE, ROLE_SEND, ROLE_MCAST, ROLE_LAND = range(5)

# Run status returned by the loop (RUNNING: its event budget is spent, call it again).
STATUS_DONE, STATUS_DEADLOCK, STATUS_MAX_CYCLES, STATUS_QUEUE_FULL, STATUS_RUNNING = range(5)

# Per-instruction rows of ``times``: start, end, first FIFO push, cycles stalled on FIFO data and room;
# a DMA's sticks (copies) still to deliver and when its last is written.
T_START, T_END, T_FIRST_PUSH, T_STALL_DATA, T_STALL_ROOM, T_LEFT, T_READY = range(7)
T_ROWS = 7

# Members of the state tuple ``st`` that ``pack`` builds and every jitted function receives.
(ST_INS, ST_TOKS, ST_US, ST_TOK, ST_CFG, ST_CH, ST_BANK, ST_FIFO, ST_LINK, ST_CHUNK, ST_CHAN_STOP,
 ST_RX_PORT, ST_EV, ST_QA, ST_TIMES, ST_ORDER, ST_PENDING, ST_STOPS, ST_WRITES) = range(19)

# DRAM writes still to come ``writes[:]`` (dma.write_horizon_nb): store instructions not yet ended, those of them
# started, host-to-device transfers not yet ended.
W_STORES, W_STORES_STARTED, W_H2D = range(3)
W_COLS = 3

# Ring stops ``stops[s, :]``: what can put sticks on the ring there, and which units.
R_KIND, R_INJ0, R_INJ1 = range(3)
STOP_QUIET, STOP_UNITS, STOP_MEMORY = range(3)  # nothing injects; DMA units R_INJ0/1; a memory controller

# Arguments that are constants: a call passing a bare ``0`` or ``1`` to a jitted function gets a version
# compiled for that literal (numba types it ``Literal[int]``), one passing a module attribute does not.
ONE_STICK = 1  # a stick's delivery (dma.delivered_nb)

NEVER = 1 << 62  # a cycle later than any run's

FP_ONE = 1024  # fixed-point scale of port intervals (PCIe moves a stick every ~2.34 cycles)
