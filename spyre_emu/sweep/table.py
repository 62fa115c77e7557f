"""A sweep's results: one flat table, a row per point (its parameters, then its figures).

Written as CSV (always), JSON (always) or Parquet (with pandas and pyarrow installed). Only
deterministic figures are columns (no wall time), so the same space and seed give the same file,
byte for byte, on every executor.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

FORMATS = (".csv", ".json", ".parquet")


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]

    def column(self, name: str) -> list[Any]:
        return [row[self.columns.index(name)] for row in self.rows]

    def ok(self) -> Table:
        """The rows the card could run."""
        e = self.columns.index("error")
        return Table(self.columns, tuple(r for r in self.rows if not r[e]))

    def best(self, metric: str = "latency_us", by: tuple[str, ...] = ()) -> Table:
        """The row with the least ``metric`` (the first on ties), per group of the ``by`` columns."""
        good = self.ok()
        m, keys = self.columns.index(metric), [self.columns.index(b) for b in by]
        best: dict[str, tuple] = {}
        for row in good.rows:
            group = json.dumps([row[k] for k in keys])
            if group not in best or row[m] < best[group][m]:
                best[group] = row
        return Table(self.columns, tuple(best.values()))

    def text(self) -> str:
        """Aligned columns, for a terminal."""
        cells = [list(self.columns)] + [["" if v is None else json.dumps(v) if isinstance(v, list) else str(v)
                                         for v in row] for row in self.rows]
        widths = [max(len(r[j]) for r in cells) for j in range(len(self.columns))]
        return "".join("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n" for r in cells)

    def to_pandas(self) -> Any:
        import pandas  # noqa: PLC0415 -- optional
        return pandas.DataFrame(self.records(), columns=list(self.columns))

    def encode(self, suffix: str) -> bytes:
        """The table as a file of type ``suffix`` (.csv, .json or .parquet)."""
        if suffix == ".json":
            return (json.dumps(self.records(), indent=1) + "\n").encode()
        if suffix == ".parquet":
            return self._parquet()
        if suffix != ".csv":
            raise ConfigError(f"unknown output type {suffix!r}; expected one of {', '.join(FORMATS)}", None, "--output")
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(self.columns)
        writer.writerows([json.dumps(v) if isinstance(v, list) else "" if v is None else v for v in row]
                         for row in self.rows)
        return out.getvalue().encode()

    def _parquet(self) -> bytes:
        try:
            frame = self.to_pandas()
            out = io.BytesIO()
            for name in frame.columns:  # a list-valued parameter is stored as its JSON text
                if any(isinstance(v, list) for v in frame[name]):
                    frame[name] = [json.dumps(v) for v in frame[name]]
            frame.to_parquet(out, index=False)
        except ImportError:
            raise ConfigError("Parquet output needs pandas and pyarrow: pip install pandas pyarrow", None,
                              "--output") from None
        return out.getvalue()


def table_of(points: list[dict[str, Any]], figures: list[dict[str, Any]]) -> Table:
    columns = tuple(dict.fromkeys(k for p in points for k in p)) + tuple(figures[0]) if figures else ()
    return Table(columns, tuple(tuple({**p, **f}.get(c) for c in columns) for p, f in zip(points, figures,
                                                                                         strict=True)))
