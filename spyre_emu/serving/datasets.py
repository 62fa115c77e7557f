"""Request lengths (and arrival times) from public trace formats: ShareGPT JSON, the Azure LLM
inference trace CSV, BurstGPT CSV. Each gives (prompt tokens, output tokens[, time in s]) rows.

No tokenizer runs here: ShareGPT's texts count one token per 4 characters (assumed; vLLM counts
with the model's tokenizer), the CSV traces carry token counts.
"""

from __future__ import annotations

import csv
import json
from datetime import datetime
from pathlib import Path

from ..errors import ConfigError
from ..files import read_bytes

CHARS_PER_TOKEN = 4  # assumed: a common rule of thumb for English text and BPE tokenizers
AZURE = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
BURSTGPT = ("Timestamp", "Request tokens", "Response tokens")

Row = tuple[int, int, float]  # prompt tokens, output tokens, send time (s from the first row)


def load(path: Path, kind: str) -> list[Row]:
    """Rows of a trace of ``kind``: "sharegpt", "azure" or "burstgpt"."""
    try:
        text = read_bytes(path).decode("utf-8")  # a regular file: a FIFO or a device is refused, not waited on
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", str(path)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read: {exc}", str(path)) from None
    rows = _sharegpt(text, path) if kind == "sharegpt" else _csv(text, path, AZURE if kind == "azure" else BURSTGPT)
    if not rows:
        raise ConfigError("no usable requests in the trace", str(path))
    return rows


def _tokens(value: object, file: Path, where: str) -> int:
    if not isinstance(value, str):
        raise ConfigError("expected a string", str(file), where)
    return max(1, -(-len(value) // CHARS_PER_TOKEN))


def _sharegpt(text: str, path: Path) -> list[Row]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not JSON: {exc.msg} (line {exc.lineno})", str(path)) from None
    except RecursionError:
        raise ConfigError("not JSON: nested too deeply", str(path)) from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise ConfigError(f"not JSON: {exc}", str(path)) from None
    if not isinstance(data, list):
        raise ConfigError("expected a list of conversations", str(path), "$")
    rows = []
    for i, entry in enumerate(data):
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(turns, list):
            raise ConfigError("expected an object with a conversations list", str(path), f"$[{i}]")
        if len(turns) < 2:  # vLLM skips conversations without a reply
            continue
        where = f"$[{i}].conversations"
        values = [t.get("value") if isinstance(t, dict) else None for t in turns[:2]]
        rows.append((_tokens(values[0], path, f"{where}[0].value"), _tokens(values[1], path, f"{where}[1].value"), 0.0))
    return rows


def _csv(text: str, path: Path, columns: tuple[str, str, str]) -> list[Row]:
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in columns if c not in (reader.fieldnames or ())]
    if missing:
        raise ConfigError(f"expected the columns {', '.join(columns)}; missing {', '.join(missing)}", str(path),
                          "header")
    rows = []
    for line, record in enumerate(reader, start=2):
        try:
            stamp = record[columns[0]]
            t = datetime.fromisoformat(stamp[:26]).timestamp() if columns is AZURE else float(stamp)
            prompt, output = int(record[columns[1]]), int(record[columns[2]])
        except (TypeError, ValueError):
            raise ConfigError(f"expected a time and two token counts in {', '.join(columns)}", str(path),
                              f"line {line}") from None
        if prompt > 0 and output > 0:  # BurstGPT logs failed requests with 0 response tokens
            rows.append((prompt, output, t))
    start = min((r[2] for r in rows), default=0.0)
    return [(p, o, round(t - start, 6)) for p, o, t in rows]
