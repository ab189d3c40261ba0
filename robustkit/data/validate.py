"""Validation at the data boundary: readers that keep where each record came from, and field
checks that turn a wrong value into a ``DataError`` naming file, line, field, value and what was
expected.

Every loader reads through these once, before it builds records, so a bad row fails where it is
(``questions.jsonl:7: field 'aliases' must be a list of strings, got str 'Octavian'``) rather than
later as a bare library traceback or, worse, as a silently wrong score: a string where a list
belongs is iterated as its characters, and answer matching then accepts any reply containing an
'O', a 'c' or a 't'.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Callable, Sequence

from robustkit.data.records import DataError, decoded_text, read_jsonl

_REQUIRED = object()  # "no default": a missing field is an error


class Row:
    """One input record and where it is: ``file:line``, or ``file [index]`` where there is no
    line (a JSON array, a hub split). Accessors check a field and name the culprit on failure;
    ``prefix`` names the enclosing field of a nested object (``ctxs[0].``)."""

    def __init__(self, source: str, place: int | str, data: Any, prefix: str = ""):
        self.source, self.place, self.prefix = source, place, prefix
        self.where = f"{source}:{place}" if isinstance(place, int) else f"{source} {place}"
        if not isinstance(data, dict):
            what = f"field {prefix[:-1]!r} must be" if prefix else "expected"
            raise DataError(f"{self.where}: {what} an object, got {_describe(data)}")
        self.data = data

    @property
    def at(self) -> str:
        """The place alone, for messages that already name the file."""
        return f"line {self.place}" if isinstance(self.place, int) else str(self.place)

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def error(self, key: str, expected: str, value: Any) -> DataError:
        return DataError(f"{self.where}: field {self.prefix + key!r} must be {expected}, "
                         f"got {_describe(value)}")

    def get(self, key: str, default: Any = _REQUIRED) -> Any:
        if key in self.data:
            return self.data[key]
        if default is _REQUIRED:
            raise DataError(f"{self.where}: missing field {self.prefix + key!r}")
        return default

    def text(self, key: str, empty: bool = False) -> str:
        """A string field; empty only where ``empty`` says it may be (titles, answer types)."""
        value = self.get(key)
        if not isinstance(value, str) or not (empty or value.strip()):
            raise self.error(key, "a string" if empty else "a non-empty string", value)
        return value

    def optional_text(self, key: str) -> str | None:
        value = self.get(key, None)
        if value is not None and not isinstance(value, str):
            raise self.error(key, "a string or null", value)
        return value

    def strings(self, key: str, nonempty: bool = False, default: Any = _REQUIRED) -> tuple:
        """A list-of-strings field (see ``strings``); ``default`` if the field may be absent."""
        value = self.get(key, default)
        if value is default:
            return value
        return strings(value, self.where, self.prefix + key, nonempty)

    def choice(self, key: str, allowed: Sequence[str]) -> str:
        """A value from a closed set: a near miss ("Train") would otherwise drop the row from
        every split without a word."""
        value = self.get(key)
        if value not in allowed:
            raise self.error(key, f"one of {list(allowed)}", value)
        return value

    def parsed(self, key: str, parse: Callable[[Any], Any], expected: str) -> Any:
        """A cell holding an encoded value (a Python or JSON literal, a number)."""
        value = self.get(key)
        try:
            return parse(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise self.error(key, expected, value) from None

    def sub(self, key: str) -> Row:
        """A nested object, reported as ``key.field``."""
        return Row(self.source, self.place, self.get(key), f"{self.prefix}{key}.")

    def items(self, key: str, nonempty: bool = False) -> list:
        """A list field whose items the caller checks."""
        value = self.get(key)
        if not isinstance(value, list) or (nonempty and not value):
            raise self.error(key, "a non-empty list" if nonempty else "a list", value)
        return value

    def objects(self, key: str, nonempty: bool = False) -> list[Row]:
        """A list of nested objects, reported as ``key[i].field``."""
        return [Row(self.source, self.place, item, f"{self.prefix}{key}[{i}].")
                for i, item in enumerate(self.items(key, nonempty))]

    def build(self, record_type: type, *args, **kwargs):
        """The record; whatever its constructor still refuses is reported at this row."""
        try:
            return record_type(*args, **kwargs)
        except (TypeError, ValueError) as err:
            raise DataError(f"{self.where}: {err}") from None


def strings(value: Any, where: str, name: str, nonempty: bool = False) -> tuple[str, ...]:
    """The one check for list-of-strings fields (answers, aliases, passage ids). A bare string
    is refused rather than split into characters; ``nonempty`` for answer lists, since a question
    without a gold answer cannot be scored."""
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value) \
            and (value or not nonempty):
        return tuple(value)
    expected = "a non-empty list of strings" if nonempty else "a list of strings"
    got = _describe(value)
    if isinstance(value, (list, tuple)):  # point at the item of the wrong type, if one is
        got = next((f"item {i} of type {type(v).__name__} ({v!r:.60})"
                    for i, v in enumerate(value) if not isinstance(v, str)), got)
    raise DataError(f"{where}: field {name!r} must be {expected}, got {got}")


class Unique:
    """Refuses a key seen before, naming both places: a repeated id would make one record
    shadow another wherever records are looked up by id."""

    def __init__(self, what: str = "id"):
        self.what, self.first = what, {}

    def add(self, key, row: Row):
        if key in self.first:
            raise DataError(f"{row.where}: duplicate {self.what} {key!r} "
                            f"(first at {self.first[key].at})")
        self.first[key] = row
        return key


def jsonl_rows(path: str | Path, required: Sequence[str] = ()) -> list[Row]:
    """``read_jsonl``'s rows, each with its 1-based line (blank lines are skipped there too)."""
    lines = io.StringIO(decoded_text(path), newline=None)  # the same line breaks as read_jsonl
    numbers = [n for n, line in enumerate(lines, start=1) if line.strip()]
    return [Row(str(path), n, row) for n, row in zip(numbers, read_jsonl(path, required))]


def table_rows(path: str | Path, required: Sequence[str] = (), delimiter: str = ",") -> list[Row]:
    """Rows of a CSV (or TSV) file with a header, each with the line it starts on (a quoted
    cell may span lines). Like ``read_csv``, missing or empty ``required`` cells are refused;
    so is a row with more cells than the header, the mark of an unquoted delimiter."""
    path = Path(path)
    reader = csv.reader(io.StringIO(decoded_text(path, "utf-8-sig"), newline=""),
                        delimiter=delimiter)
    try:
        header = next(reader, None) or []
        if missing := [key for key in required if key not in header]:
            raise DataError(f"{path}:1: header lacks column(s) {missing}")
        rows, start = [], reader.line_num + 1
        for cells in reader:
            if cells:
                if len(cells) > len(header):
                    raise DataError(f"{path}:{start}: {len(cells)} cells, the header has "
                                    f"{len(header)} (an unquoted {delimiter!r}?)")
                row = Row(str(path), start, dict(zip(header, cells)))
                if empty := [key for key in required if not row.data.get(key, "").strip()]:
                    raise DataError(f"{path}:{start}: empty value in column(s) {empty}")
                rows.append(row)
            start = reader.line_num + 1
    except csv.Error as err:
        raise DataError(f"{path}:{reader.line_num}: malformed CSV ({err})") from None
    return rows


def json_document(path: str | Path) -> Any:
    """A whole JSON file; a truncated or malformed one is a DataError at its line."""
    try:
        return json.loads(decoded_text(path))
    except json.JSONDecodeError as err:
        problem = err.msg.removesuffix(" at")  # "Unterminated string starting at"
        raise DataError(f"{path}:{err.lineno}: malformed JSON ({problem} at column "
                        f"{err.colno})") from None


def array_rows(value: Any, source: str, name: str = "") -> list[Row]:
    """The objects of a JSON array, placed by index (``Data[3]``) since there is no line."""
    if not isinstance(value, list):
        what = f"field {name!r} must be" if name else "expected"
        raise DataError(f"{source}: {what} a JSON array of records, got {_describe(value)}")
    return [Row(source, f"{name}[{i}]", item) for i, item in enumerate(value)]


def _describe(value: Any) -> str:
    """Type and a short repr: enough to find the value in the file."""
    return f"{type(value).__name__} {value!r:.60}"
