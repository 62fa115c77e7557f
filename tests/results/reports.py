"""A hand-made report: the sections the plots read, with numbers small enough to check by eye."""


def _kernel(name, start, end, flops, nbytes, attained, bound="memory"):
    return {"name": name, "op": "add", "start_cycle": start, "end_cycle": end,
            "roofline": {"flops": flops, "bytes": nbytes, "intensity": flops / nbytes if nbytes else 0.0,
                         "attained_flops_per_cycle": attained, "bound": bound}}


TRACKS = {"core0.load": [1.0, 0.5, 0.0, 0.0], "core0.pt0": [0.0, 1.0, 1.0, 0.25], "core1.sfu1": [0.0, 0.0, 0.5, 1.0]}
LINKS = {"core0->core1": [0.5, 0.0, 0.0, 1.0], "core1->core0": [0.0, 0.25, 0.0, 0.0]}
REPORT = {
    "program": "hand.json", "total_cycles": 100, "clock_ghz": 2.0, "latency_us": 0.05,
    "machine": {"peak_flops_per_cycle": 1000.0, "peak_dram_bytes_per_cycle": 10.0},
    "kernels": [_kernel("mm", 0, 60, 6000, 600, 100.0), _kernel("add", 40, 100, 50, 300, 0.8),
                _kernel("copy", 60, 100, 0, 400, 0.0), _kernel("dense", 0, 50, 50000, 100, 1000.0, "compute")],
    "activity": {"bin_cycles": 25,
                 "tracks": [{"name": n, "busy": b} for n, b in TRACKS.items()],
                 "links": [{"name": n, "busy": b} for n, b in LINKS.items()]},
}
