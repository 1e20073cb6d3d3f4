"""Save and load profiles: gzip-compressed, versioned, self-contained.

Version 2 (written): one gzip stream holding

    MAGIC (b"PROFTUI-PROFILE\x02\n", 17 bytes)
    u64 little-endian: length of the document
    the document: UTF-8 JSON, the fields of version 1 below, `version` 2, with
        each tree given as columns: {"nodes": N, "parents": REF, "frames": REF,
        "selfs": [REF per metric], "calls": REF or null}; a part whose tree is
        the whole profile's (one thread) is the string "tree"
    the blob area: the columns' bytes, little-endian; a REF is [offset, length]
        into it; parents and frames int32 (node 0 the root, -1 and -1; every
        parent an earlier node), selfs float64, calls int64 (-1: unknown)

so loading costs a decompression and a memcpy per column: time in proportion to
the distinct calling contexts, never to the samples behind them.

Version 1 (read, `profile_to_dict` still makes it: tests compare profiles by
it), one JSON object:

    format    "proftui-profile"
    version   1
    meta      ProfileMeta fields
    metrics   [[name, unit], ...]
    frames    [[function, module, file, line, address, raw_name, build_id, inlined], ...]
    tree      encoded tree (below); parts {label: encoded tree}
    arcs      [[caller_frame, callee_frame, count], ...]
    line_costs     [[file, line, [cost per metric]], ...]
    address_costs  [[module, address, [cost per metric]], ...]
    address_sites  optional [[module, address, function, file, line], ...]: each
                   costed address's function start and source line (CodeSite);
                   absent in files written before it existed, which still load.
    functions      null or [[frame, [self...], [total...], calls], ...]
    sources        optional {path: text}: source files referenced by frames and
                   line_costs that sourcefiles.py lets `save` read (debug info
                   named them, under their unit's compile directory, readable
                   by the profiled process's owner), bounded in size, so the
                   profile opens on a machine without the sources.
    timeline       optional {"names": [...], "times": [...], "values": [[...], ...]}:
                   whole-process quantities over time (Timeline); absent or null
                   when not recorded.
    leaks          optional [[bytes, blocks, [[function, module, file, line, inlined], ...]],
                   ...]:
                   the stacks that leaked, frames innermost first at their call's
                   line (LeakStack); absent when there are none.

An encoded tree is a pre-order list of nodes `[parent_index, frame, [self...], calls]`
where parent_index indexes the same list and -1 means the root.  Flat lists keep
100,000-deep trees loadable (nested JSON would hit recursion limits).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import struct
import sys
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import CallTree, Profile
from proftui.collectors.model.slices import Slices
from proftui.collectors.model.sourcefiles import read_source, reader_of
from proftui.collectors.safefile import write_fallback, write_output

FORMAT = "proftui-profile"
VERSION = 2  # written; VERSIONS are read
VERSIONS = (1, 2)
MAGIC = b"PROFTUI-PROFILE\x02\n"
_LENGTH = struct.Struct("<Q")
_PIECE = 1 << 20  # bytes of a column read at a time (a multiple of every item size)
MAX_DOCUMENT_BYTES = 1 << 32  # the JSON part of a version 2 file: a bigger length is corrupt
MAX_SOURCE_BYTES = 1 << 20  # a bigger file is not embedded (generated code, amalgamations)
MAX_SOURCES_BYTES = 8 << 20  # all embedded sources together


def encode_tree(tree: CallTree) -> list[list[Any]]:
    rows: list[list[Any]] = []
    row_of = {0: -1}  # node -> its row; pre-order keeps children in their order
    frames, parents, calls = tree.frames, tree.parents, tree.calls
    selfs = tree.selfs
    for node in tree.preorder():
        row_of[node] = len(rows)
        count = calls[node]
        rows.append([row_of[parents[node]], frames[node], [c[node] for c in selfs],
                     None if count < 0 else count])
    return rows


def decode_tree(rows: Any, n_metrics: int, n_frames: int) -> CallTree:
    """A CallTree from `encode_tree` rows (InvalidProfile if malformed)."""
    from proftui.collectors.model import validate  # reading only: `record` never loads it

    return validate.decode_tree(rows, "tree", n_metrics, n_frames)


class _Blobs:
    """The blob area being written: columns appended, each named by [offset, length].
    A column already of the wire's type and byte order is kept as a view of itself, not
    copied (the profile is not changed while it is encoded)."""

    def __init__(self) -> None:
        self.chunks: list[bytes | memoryview] = []
        self.size = 0

    def add(self, column: array, typecode: str) -> list[int]:
        data = column if column.typecode == typecode else array(typecode, column)
        if sys.byteorder == "big":
            data = array(typecode, data)
            data.byteswap()
        raw = memoryview(data).cast("B")
        ref = [self.size, len(raw)]
        self.chunks.append(raw)
        self.size += len(raw)
        return ref


def _tree_columns(tree: CallTree, blobs: _Blobs) -> dict[str, Any]:
    """A tree as version 2 column references (totals are recomputed on load)."""
    return {"nodes": len(tree), "parents": blobs.add(tree.parents, "i"),
            "frames": blobs.add(tree.frames, "i"),
            "selfs": [blobs.add(column, "d") for column in tree.selfs],
            "calls": None if (calls := tree.known_calls()) is None else blobs.add(calls, "q")}


def _slices_columns(slices: Slices, blobs: _Blobs) -> dict[str, Any]:
    """The timeline as version 2 column references (docs/profile-format.md); the index
    first, as `validate.decode_slices` reads it (the load reads the stream once)."""
    index = slices.index
    index_doc = {"labels": index.labels, "stacks": len(index),
                 "leaf": blobs.add(index.leaf, "q"), "part": blobs.add(index.part, "q"),
                 "part_leaf": blobs.add(index.part_leaf, "q"),
                 "code": blobs.add(index.code, "q"),
                 "code_keys": [[m, a] for m, a in index.code_keys]}
    return {"start": slices.start, "width": slices.width,
            "offsets": blobs.add(slices.offsets, "q"), "stacks": blobs.add(slices.stacks, "q"),
            "costs": [blobs.add(column, "d") for column in slices.costs],
            "index": index_doc}


def _document(profile: Profile) -> dict[str, Any]:
    """Every field of a saved profile but its trees (see module docstring)."""
    meta = asdict(profile.meta)
    meta["threads"] = {str(tid): name for tid, name in profile.meta.threads.items()}
    return {
        "format": FORMAT,
        "meta": meta,
        "metrics": [[m.name, m.unit] for m in profile.metrics],
        "frames": [
            [f.function, f.module, f.file, f.line, f.address, f.raw_name, f.build_id, f.inlined]
            for f in profile.frames
        ],
        "arcs": [[a, b, n] for (a, b), n in profile.arcs.items()],
        "line_costs": [[f, line, c] for (f, line), c in profile.line_costs.items()],
        "address_costs": [[m, a, c] for (m, a), c in profile.address_costs.items()],
        "address_sites": [[m, a, s.function, s.file, s.line]
                          for (m, a), s in profile.address_sites.items()],
        "functions": None if profile.functions is None else [
            [fid, c.self_cost, c.total_cost, c.calls] for fid, c in profile.functions.items()
        ],
        "sources": dict(profile.sources),
        "timeline": None if profile.timeline is None else {
            "names": profile.timeline.names, "times": profile.timeline.times,
            "values": profile.timeline.values},
        **({"leaks": [[leak.leaked_bytes, leak.blocks,
                       [[f.function, f.module, f.file, f.line, f.inlined]
                        for f in leak.frames]]
                      for leak in profile.leaks]} if profile.leaks else {}),
    }


def profile_to_dict(profile: Profile) -> dict[str, Any]:
    """The version 1 document for `profile`: all JSON, trees as node lists (tests
    compare profiles by it; `profile_from_dict` reads it back)."""
    doc = _document(profile)
    doc["version"] = 1
    doc["tree"] = encode_tree(profile.tree)
    doc["parts"] = {label: encode_tree(tree) for label, tree in profile.parts.items()}
    return doc


def referenced_sources(profile: Profile) -> list[str]:
    """Source paths named by frames and line costs, in first-seen order."""
    paths: dict[str, None] = {}
    for frame in profile.frames:
        if frame.file:
            paths[frame.file] = None
    for path, _line in profile.line_costs:
        paths[path] = None
    for site in profile.address_sites.values():
        if site.file:
            paths[site.file] = None
    return list(paths)


def gather_sources(profile: Profile) -> dict[str, str]:
    """Text of every referenced source file: already embedded ones, else read from disk.

    Only files collectors/model/sourcefiles.py allows are read: named by debug
    info this process read, under their unit's compile directory, readable by
    the profiled process's owner, regular, text; or readable by every user.
    Files bigger than MAX_SOURCE_BYTES are skipped, and so is everything past
    MAX_SOURCES_BYTES, which goes to the files with the most line cost first (a
    C++ program names many headers, most of them cold).
    """
    sources: dict[str, str] = {}
    budget = MAX_SOURCES_BYTES
    reader = reader_of(profile.meta.mode, profile.meta.pids)
    cost: dict[str, float] = {}
    for (path, _line), costs in profile.line_costs.items():
        cost[path] = cost.get(path, 0.0) + (costs[0] if costs else 0.0)
    for path in sorted(referenced_sources(profile), key=lambda p: -cost.get(p, 0.0)):
        text = profile.sources.get(path)
        if text is None:
            text = read_source(path, reader)
            if text is None:
                continue
        size = len(text.encode("utf-8", errors="replace"))
        if size > budget or (path not in profile.sources and size > MAX_SOURCE_BYTES):
            continue
        budget -= size
        sources[path] = text
    return sources


def profile_from_dict(doc: Any) -> Profile:
    """Rebuild a Profile from a version 1 document, checking every field
    (validate.InvalidProfile if malformed)."""
    from proftui.collectors.model import validate

    return validate.profile_from_document(doc, FORMAT, (1,))


def save(profile: Profile, path: Path, *, embed_sources: bool = True) -> Path:
    """Write `profile` to `path` (gzip JSON) with `safefile.write_output`: atomic,
    0600 unless replacing a file of ours; returns the file written.

    With `embed_sources`, the text of the source files the profile refers to is
    stored too (see `gather_sources`), so `load` gives them back in `Profile.sources`.
    """
    return write_output(path, encode(profile, embed_sources=embed_sources))


def encode(profile: Profile, *, embed_sources: bool = True) -> bytes:
    """The bytes `save` writes: version 2, gzip-compressed."""
    doc = _document(profile)
    doc["version"] = VERSION
    blobs = _Blobs()
    doc["tree"] = _tree_columns(profile.tree, blobs)
    doc["parts"] = {label: "tree" if tree is profile.tree else _tree_columns(tree, blobs)
                    for label, tree in profile.parts.items()}
    if profile.slices is not None and not profile.slices.totals_only:
        # a fleet profile's per-part totals could not give a range's profile once saved
        doc["slices"] = _slices_columns(profile.slices, blobs)
    if embed_sources:
        doc["sources"] = gather_sources(profile)
    text = json.dumps(doc, separators=(",", ":")).encode()
    # Level 1: the columns are mostly small integers; a higher level costs seconds on
    # big profiles for a few percent of size.  Compressed part by part (wbits 31: a
    # gzip stream), so the parts are never joined into one more copy of the profile.
    compressor = zlib.compressobj(1, zlib.DEFLATED, 31)
    out = [compressor.compress(part)
           for part in (MAGIC, _LENGTH.pack(len(text)), text, *blobs.chunks)]
    out.append(compressor.flush())
    for chunk in blobs.chunks:  # the columns' exports end here (they may grow again)
        if isinstance(chunk, memoryview):
            chunk.release()
    return b"".join(out)


def save_or_fallback(profile: Profile, path: Path, *,
                     regular_only: bool = False) -> tuple[Path, str]:
    """`save`, and when `path` cannot be written, a new file in the current or the
    home directory instead, so a finished run is never lost.  `regular_only`: a
    device or FIFO at `path` is refused (safefile.write_output).

    Returns (file written, "" or a one-line note saying why it is not `path`);
    ProftuiError only when no file at all could be written.
    """
    data = encode(profile)
    try:
        return write_output(path, data, regular_only=regular_only), ""
    except ProftuiError as exc:
        failure = str(exc)
    fallback = write_fallback(data, _fallback_directories(), f"proftui-{os.getpid()}")
    if fallback is None:
        raise ProftuiError(f"{failure}; no fallback file could be written either "
                           "(current and home directories)")
    return fallback, f"{failure}; profile saved to {fallback} instead"


def _fallback_directories() -> list[Path]:
    """The current directory, then home (never TMPDIR: the run directory's cleanup
    and tmp cleaners would take the profile with them)."""
    places: list[Path] = []
    with contextlib.suppress(OSError):  # the working directory may have been deleted
        places.append(Path.cwd())
    with contextlib.suppress(RuntimeError, KeyError):
        places.append(Path.home())
    return places


def _shown(path: Path) -> str:
    """`path` for a one-line message: control characters (a newline in a name) escaped."""
    text = str(path)
    return text if text.isprintable() else ascii(text)


def load(path: Path) -> Profile:
    """Read a profile written by `save` (ProftuiError on any problem, in one line)."""
    name = _shown(path)
    try:
        with gzip.open(path, "rb") as f:
            return _read(f, name)
    except FileNotFoundError:
        raise ProftuiError(f"{name}: no such file") from None
    except OSError as exc:
        if isinstance(exc, gzip.BadGzipFile) or exc.errno is None:
            raise ProftuiError(f"{name}: not a proftui profile (not gzip data)") from None
        raise ProftuiError(f"{name}: cannot read: {exc.strerror}") from None
    except (EOFError, zlib.error):
        raise ProftuiError(f"{name}: truncated or corrupt profile file") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ProftuiError(f"{name}: corrupt profile file (bad JSON)") from None
    except RecursionError:
        raise ProftuiError(f"{name}: not a valid proftui profile: JSON nested too deeply") \
            from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise ProftuiError(f"{name}: not a valid proftui profile: {exc}") from None
    except MemoryError:
        raise ProftuiError(f"{name}: profile file too big for memory") from None


class _StreamBlobs:
    """The blob area of a version 2 file, read from the gzip stream a column at a
    time as the columns are decoded (in the order `encode` wrote them, so the stream
    is decompressed once): the whole decompressed file is never in memory at once."""

    def __init__(self, stream: gzip.GzipFile, start: int) -> None:
        self._stream = stream
        self._start = start

    def read(self, offset: int, length: int) -> Iterator[bytes]:
        """The `length` bytes at `offset` of the blob area, in pieces of whole items
        (fewer in all at its end)."""
        self._stream.seek(self._start + offset)  # forward: skips; backward: rewinds
        while length > 0:
            piece = self._stream.read(min(length, _PIECE))
            if not piece:
                return
            length -= len(piece)
            yield piece


def _read(f: gzip.GzipFile, name: str) -> Profile:
    from proftui.collectors.model import validate  # reading only: `record` never loads it

    head = f.read(len(MAGIC) + _LENGTH.size)
    blobs: _StreamBlobs | None = None
    if head.startswith(MAGIC):
        if len(head) < len(MAGIC) + _LENGTH.size:
            raise ProftuiError(f"{name}: truncated or corrupt profile file")
        length = _LENGTH.unpack_from(head, len(MAGIC))[0]
        text = f.read(length) if length <= MAX_DOCUMENT_BYTES else b""
        if len(text) != length:
            raise ProftuiError(f"{name}: truncated or corrupt profile file")
        doc = json.loads(text)
        del text
        blobs = _StreamBlobs(f, len(head) + length)
    else:
        doc = json.loads(head + f.read())
    try:
        return validate.profile_from_document(doc, FORMAT, VERSIONS, blobs)
    except validate.NotAProfile as exc:
        raise ProftuiError(f"{name}: {exc}") from None
    except validate.InvalidProfile as exc:
        raise ProftuiError(f"{name}: not a valid proftui profile: {exc}") from None
