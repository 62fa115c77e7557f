"""The report as text for a terminal: the headline, one row per kernel, then the program's units,
DRAM channels and busiest ring links."""

from __future__ import annotations

from typing import Any

STALLS = {"stall_token_cycles": "waiting for a token (data not yet produced)",
          "stall_data_cycles": "waiting for data in the FIFO it reads",
          "stall_room_cycles": "waiting for room in the FIFO it writes",
          "stall_link_cycles": "sticks waiting for a ring link (stick-cycles)",
          "stall_dram_cycles": "requests waiting for DRAM beyond its latency (request-cycles)"}
NAME_WIDTH = 28


def render_text(d: dict[str, Any]) -> str:
    lines = [f"{d['program']}: {d['total_cycles']} cycles = {d['latency_us']:.3f} us at {d['clock_ghz']} GHz "
             f"(launch {d['launch_cycles']} + card {d['card_cycles']}; {d['instructions']} instructions)", ""]
    lines += _kernels(d["kernels"]) + [""] + _units(d) + [""] + _dram(d["dram"]) + [""] + _ring(d["ring"])
    return "\n".join(lines) + "\n"


def _kernels(kernels: list[dict[str, Any]]) -> list[str]:
    """One row per kernel; "most stalled" names the unit kind and cause with the most stalled cycles."""
    width = min(NAME_WIDTH, max([len(k["name"]) for k in kernels] + [6]))
    lines = [f"{'kernel':<{width}} {'op':<14}{'start':>9}{'cycles':>9}{'us':>9}{'cores':>6}{'PT %':>7}"
             f"{'SFU %':>7}{'DRAM GB/s':>10}{'ideal':>9}  {'bound':<8} most stalled"]
    for k in kernels:
        lines.append(f"{k['name'][:width]:<{width}} {k['op'][:13]:<14}{k['start_cycle']:>9}{k['cycles']:>9}"
                     f"{k['us']:>9.3f}{len(k['cores']):>6}{100 * k['pt_utilization']:>7.1f}"
                     f"{100 * k['sfu_utilization']:>7.1f}{k['dram_gb_per_s']:>10.1f}{k['ideal_cycles']:>9}  "
                     f"{k['roofline']['bound']:<8} {_most_stalled(k)}")
    return lines


def _most_stalled(kernel: dict[str, Any]) -> str:
    """The unit kind and stall cause with the largest share of that kind's unit-cycles in the span."""
    span = max(kernel["cycles"], 1)
    share, kind, cause = max(((cycles / (span * row["units_used"]), kind, cause)
                              for kind, row in kernel["units"].items()
                              for cause, cycles in row["stall_cycles"].items()), default=(0.0, "", ""))
    return f"{kind} {cause} {100 * share:.0f}%" if share else "-"


def _units(d: dict[str, Any]) -> list[str]:
    lines = [f"{'unit':<6}{'used':>6}{'busy cycles':>14}{'busy %':>8}  stalls"]
    for cls, row in d["units"].items():
        if not row["units_used"]:
            continue
        stalls = ", ".join(f"{k[6:-7]} {row[k]}" for k in STALLS if row[k]) or "none"
        lines.append(f"{cls:<6}{row['units_used']:>6}{row['busy_cycles']:>14}{100 * row['busy_share']:>7.1f}%  "
                     f"{stalls}")
    lines.append("  stalls: " + "; ".join(f"{k[6:-7]} = {why}" for k, why in STALLS.items()))
    pt = d["pt"]
    if pt["passes"]:
        lines.append(f"PT: {pt['passes']} passes, {pt['macs']} MACs on {pt['arrays_used']} arrays, "
                     f"{100 * pt['mac_utilization']:.1f}% of their peak")
    return lines


def _dram(dram: dict[str, Any]) -> list[str]:
    lines = [f"DRAM: read {dram['read_bytes']} B, write {dram['write_bytes']} B, "
             f"{dram['gb_per_s']:.1f} GB/s of {dram['peak_gb_per_s']:.1f} peak"]
    for ch in dram["channels"]:
        if ch["read_bytes"] or ch["write_bytes"]:
            lines.append(f"  ch{ch['channel']:<3}{ch['gb_per_s']:>8.2f} GB/s  hits {ch['row_hits']} "
                         f"misses {ch['row_misses']} conflicts {ch['row_conflicts']} "
                         f"turnarounds {ch['turnarounds']} refreshes {ch['refreshes']}")
    return lines


def _ring(ring: dict[str, Any]) -> list[str]:
    lines = [f"Ring: {ring['stick_hops']} stick-hops, busiest link {ring['busiest_link']}"]
    for link in sorted(ring["links"], key=lambda x: -x["sticks"])[:8]:
        lines.append(f"  {link['link']:<16}{link['gb_per_s']:>8.2f} GB/s  busy {100 * link['busy_share']:.1f}%  "
                     f"wait {link['wait_cycles']} cycles")
    return lines
