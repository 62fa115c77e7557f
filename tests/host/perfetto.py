"""The rules Perfetto's JSON importer holds a Chrome trace to, checked on a file's events.

No trace processor can be installed here (the PyPI package fetches its binary at run time), so the
tests check what its JSON parser reads, as its source and documentation describe it:
- ``ph`` is one of the phases it imports; ``pid`` and ``tid`` are integers (a string is taken as a
  name, not an id; a missing tid is the pid); ``ts`` (and an "X"'s ``dur``) are numbers of µs, read
  as whole ns (truncated);
- "M" events name processes and threads with a non-empty ``args.name``; a "thread_name" event is
  applied by tid (the parser hands the tid, not the pid, to the process tracker), so a named tid
  belongs to one process;
- "X" slices on one thread nest: each starts after the last open one ends, or ends inside it;
- a flow v1 is one "s" and one "f" with the same id, cat and name; "s" binds to the slice open on its
  thread at its ts, "f" with ``bp: "e"`` to the slice enclosing its ts, so each lies inside a slice.
"""

from __future__ import annotations

from collections import defaultdict

PHASES = set("XBEMsfticCIbenR")


def ns(us: float) -> int:
    return int(us * 1000)


def problems(events: list[dict], unique_tids: bool = True) -> list[str]:
    """What the importer would drop or misread, one line each (empty: it reads everything).
    ``unique_tids``: check that a named thread's tid is used in no other process."""
    out: list[str] = []
    owner: dict[int, set[int]] = {}
    slices: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for i, event in enumerate(events):
        if event.get("ph") not in PHASES:
            out.append(f"event {i}: phase {event.get('ph')!r}")
        e = {"tid": event.get("pid"), **event}  # a counter's tid is optional: the parser takes the pid
        if not all(type(e.get(k)) is int for k in ("pid", "tid")):
            out.append(f"event {i}: pid and tid must be integers")
            continue
        if not isinstance(e.get("ts"), int | float) or e["ts"] < 0:
            out.append(f"event {i}: ts {e.get('ts')!r}")
        named = e["ph"] == "M" and e.get("name") in ("process_name", "thread_name")
        if named and not (isinstance(e.get("args", {}).get("name"), str) and e["args"]["name"]):
            out.append(f"event {i}: {e['name']} without a name")
        if e["ph"] != "M" or e.get("name") == "thread_name":
            owner.setdefault(e["tid"], set()).add(e["pid"])
        if e["ph"] == "X":
            if not isinstance(e.get("dur"), int | float) or e["dur"] < 0:
                out.append(f"event {i}: dur {e.get('dur')!r}")
                continue
            start = ns(e["ts"])
            slices[(e["pid"], e["tid"])].append((start, start + ns(e["dur"])))
    named_tids = {e["tid"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    if unique_tids:
        out += [f"thread {tid} is named, and used in pids {sorted(pids)}" for tid, pids in owner.items()
                if tid in named_tids and len(pids) > 1]
    for track, spans in slices.items():
        out += _nesting(track, spans)
    out += _flows(events, slices)
    return out


def _nesting(track: tuple[int, int], spans: list[tuple[int, int]]) -> list[str]:
    stack: list[tuple[int, int]] = []
    for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
        while stack and stack[-1][1] <= start:
            stack.pop()
        if stack and end > stack[-1][1]:
            return [f"track {track}: slice [{start}, {end}] ns overlaps [{stack[-1][0]}, {stack[-1][1]}] ns"]
        stack.append((start, end))
    return []


def _flows(events: list[dict], slices: dict[tuple[int, int], list[tuple[int, int]]]) -> list[str]:
    out: list[str] = []
    ends: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for e in events:
        if e.get("ph") in ("s", "f"):
            ends[(e.get("id"), e.get("cat"), e.get("name"))][e["ph"]] = e
    for key, pair in ends.items():
        if set(pair) != {"s", "f"}:
            out.append(f"flow {key}: needs one 's' and one 'f', has {sorted(pair)}")
            continue
        if pair["f"].get("bp") != "e":
            out.append(f"flow {key}: 'f' without bp 'e' binds to the next slice, not its own")
        for ph, e in pair.items():
            at = ns(e["ts"])
            if not any(start <= at < end for start, end in slices[(e["pid"], e["tid"])]):
                out.append(f"flow {key}: its '{ph}' at {at} ns is inside no slice of its thread")
        if pair["s"]["ts"] > pair["f"]["ts"]:
            out.append(f"flow {key}: ends before it starts")
    return out
