"""Hypothesis strategies that break valid programs and configs: the fuzz tests' raw material.

A case is a seed (a valid program or config) plus one or two mutations drawn here: an integer made
huge, negative or misaligned, a value replaced by one of the wrong type, a key deleted or added, a list
shuffled, a token cycle between two instructions, a random layout or work division, or the
serialized text truncated or with a byte flipped.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

from hypothesis import strategies as st

Path = tuple[str | int, ...]

NASTY_INTS = [0, -1, 1, 3, 64, 127, 129, 4095, 2**31, 2**53 + 1, 2**62, 2**63 - 1, 2**63, 2**64, 10**30, -(2**63)]
SCALARS = st.one_of(st.none(), st.booleans(), st.sampled_from(NASTY_INTS), st.integers(-(2**70), 2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
                    st.sampled_from(["", "fifo", "x+1", "x+99999999999", "fp16", "nan", "-1", "a\nb", "ü"]))
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3), st.dictionaries(st.text(max_size=4), SCALARS, max_size=2))


def paths(node: Any, at: Path = ()) -> list[Path]:
    """Every position in a JSON tree below the root."""
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    out = []
    for key, child in children:
        out.append((*at, key))
        out += paths(child, (*at, key))
    return out


def _parent(tree: Any, path: Path) -> Any:
    for key in path[:-1]:
        tree = tree[key]
    return tree


def _number(draw: st.DrawFn, value: int | float) -> Any:
    """A number near ``value`` that breaks alignment, sign or size."""
    if isinstance(value, bool) or not isinstance(value, int):
        return draw(VALUES)
    return draw(st.sampled_from([value + 1, value - 1, value + 64, value + 128, value - 128, 2 * value, value // 2,
                                 -value, value * 2**20, value + 2**40]))


def replace(draw: st.DrawFn, tree: Any) -> None:
    spots = paths(tree)
    if spots:
        path = draw(st.sampled_from(spots))
        _parent(tree, path)[path[-1]] = draw(VALUES)


def renumber(draw: st.DrawFn, tree: Any) -> None:
    """An integer moved off by one, by half a stick, doubled, negated, made huge: still an integer."""
    spots = [p for p in paths(tree) if type(_parent(tree, p)[p[-1]]) is int]
    if spots:
        path = draw(st.sampled_from(spots))
        parent = _parent(tree, path)
        parent[path[-1]] = _number(draw, parent[path[-1]])


def delete(draw: st.DrawFn, tree: Any) -> None:
    spots = [p for p in paths(tree) if isinstance(_parent(tree, p), dict | list)]
    if spots:
        path = draw(st.sampled_from(spots))
        del _parent(tree, path)[path[-1]]


def add_key(draw: st.DrawFn, tree: Any) -> None:
    tables = [p for p in [(), *paths(tree)] if isinstance(_parent(tree, (*p, None)), dict)]
    path = draw(st.sampled_from(tables))
    table = _parent(tree, (*path, None))
    known = sorted({k for p in paths(tree) for k in p if isinstance(k, str)}) or ["x"]
    table[draw(st.one_of(st.sampled_from(known), st.text(max_size=5)))] = draw(VALUES)


def reorder(draw: st.DrawFn, tree: Any) -> None:
    lists = [p for p in paths(tree) if isinstance(_parent(tree, (*p, None)), list) and _parent(tree, (*p, None))]
    if lists:
        items = _parent(tree, (*draw(st.sampled_from(lists)), None))
        i, j = draw(st.integers(0, len(items) - 1)), draw(st.integers(0, len(items) - 1))
        items[i], items[j] = items[j], items[i]
        if draw(st.booleans()):
            items.append(copy.deepcopy(items[i]))


def token_cycle(draw: st.DrawFn, tree: Any) -> None:
    """Two instructions that each wait for the other's signal (the same one twice: a self-wait)."""
    found = [_parent(tree, (*p, None)) for p in paths(tree)]
    found = [node for node in found if isinstance(node, dict) and "op" in node]
    if found:
        a, b = draw(st.sampled_from(found)), draw(st.sampled_from(found))
        for node, field, token in ((a, "wait", "fuzz_ab"), (b, "signal", "fuzz_ab"), (b, "wait", "fuzz_ba"),
                                   (a, "signal", "fuzz_ba")):
            node[field] = [*(node[field] if isinstance(node.get(field), list) else []), token]


def layout(draw: st.DrawFn, tree: Any) -> None:
    tensors = tree.get("tensors") if isinstance(tree, dict) else None
    if isinstance(tensors, dict) and tensors:
        spec = tensors[draw(st.sampled_from(sorted(tensors)))]
        small = st.integers(-2, 70)
        if isinstance(spec, dict):
            spec["layout"] = draw(st.one_of(
                st.fixed_dictionaries({"dim_order": st.lists(small, max_size=4)}),
                st.fixed_dictionaries({"device_size": st.lists(small, max_size=5),
                                       "stride_map": st.lists(st.integers(-2, 4096), max_size=5)}),
                VALUES))


def work_division(draw: st.DrawFn, tree: Any) -> None:
    kernels = tree.get("kernels") if isinstance(tree, dict) else None
    if isinstance(kernels, list) and kernels and isinstance(kernels[0], dict):
        kernel = kernels[draw(st.integers(0, len(kernels) - 1))]
        if isinstance(kernel, dict):
            dims = sorted(kernel.get("dims", {})) if isinstance(kernel.get("dims"), dict) else []
            kernel["work_division"] = draw(st.dictionaries(st.sampled_from([*dims, "zz"]),
                                                           st.one_of(st.integers(-1, 40), VALUES), max_size=3))


MUTATORS = [renumber, renumber, renumber, replace, delete, add_key, reorder, token_cycle, layout, work_division]


@st.composite
def mutated(draw: st.DrawFn, seeds: dict[str, Any]) -> tuple[str, bytes, list[str]]:
    """(seed name, the broken file's bytes, what was done) for a seed drawn from ``seeds``."""
    name = draw(st.sampled_from(sorted(seeds)))
    tree = copy.deepcopy(seeds[name])
    done = []
    for _ in range(draw(st.integers(1, 2))):
        mutator = draw(st.sampled_from(MUTATORS))
        mutator(draw, tree)
        done.append(mutator.__name__)
    text = json.dumps(tree, indent=1).encode()
    cut = draw(st.sampled_from(["none"] * 8 + ["truncate", "flip"]))
    if cut == "truncate":
        text = text[:draw(st.integers(0, max(len(text) - 1, 0)))]
    elif cut == "flip" and text:
        i = draw(st.integers(0, len(text) - 1))
        text = text[:i] + bytes([draw(st.integers(0, 255))]) + text[i + 1:]
    return name, text, [*done, cut]


def toml_text(tree: dict[str, Any]) -> str:
    """A config dict as TOML; values TOML cannot hold come out as invalid TOML, which is fine here."""
    lines: list[str] = []

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
        if isinstance(v, int):
            return str(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{json.dumps(str(k))} = {value(x)}" for k, x in v.items()) + "}"
        return ""

    def table(name: str, node: dict[str, Any]) -> None:
        lines.append(f"[{name}]")
        subs = {k: v for k, v in node.items() if isinstance(v, dict) and name.count(".") == 0 and v}
        lines.extend(f"{json.dumps(str(k))} = {value(v)}" for k, v in node.items() if k not in subs)
        for k, v in subs.items():
            table(f"{name}.{k}", v)

    for name, node in tree.items():
        if isinstance(node, dict):
            table(name, node)
        else:
            lines.insert(0, f"{json.dumps(str(name))} = {value(node)}")
    return "\n".join(lines) + "\n"
