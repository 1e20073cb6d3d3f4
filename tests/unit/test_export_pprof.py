"""pprof export: the hand-encoded protobuf, decoded by the importer's protobuf reader.

Field numbers are written out here as profile.proto gives them, so a wrong
constant in collectors/formats/protobuf.py fails; the integration tests check
the same bytes with `go tool pprof`.
"""

from __future__ import annotations

import gzip
from collections import defaultdict

from proftui.collectors.formats.export.pprof import encode_profile, export_pprof
from proftui.collectors.formats.protobuf import ints, read_varint, varint
from proftui.collectors.model.profile import CPU_NS, SAMPLES, Frame, Profile, ProfileMeta

from tests.helpers.profiles import sample_profile
from tests.helpers.protobuf import decode


def test_varint_encoding() -> None:
    assert varint(0) == b"\x00"
    assert varint(1) == b"\x01"
    assert varint(300) == b"\xac\x02"
    assert varint(-1) == b"\xff" * 9 + b"\x01"  # int64 two's complement, 10 bytes
    assert read_varint(varint(2**63 + 5), 0)[0] == 2**63 + 5


def test_pprof_decodes_to_the_profiles_stacks() -> None:
    profile = sample_profile()
    doc = decode(encode_profile(profile))
    strings = [s.decode() for s in doc[6]]
    assert strings[0] == ""
    sample_types = [decode(v) for v in doc[1]]
    assert [(strings[t[1][0]], strings[t[2][0]]) for t in sample_types] == [("samples", "count")]
    functions = {decode(f)[1][0]: strings[decode(f)[2][0]] for f in doc[5]}
    locations = {}
    for raw in doc[4]:
        loc = decode(raw)
        line = decode(loc[4][0])
        locations[loc[1][0]] = functions[line[1][0]]
    stacks: dict[str, int] = {}
    for raw in doc[2]:
        sample = decode(raw)
        names = [locations[i] for i in ints(sample[1][0])]
        stacks[";".join(reversed(names))] = ints(sample[2][0])[0]
    assert stacks == {"main;a;leaf": 60, "main;b;leaf": 30, "main": 10, "main;rec;rec;rec": 5}


def test_mappings_say_already_symbolized() -> None:
    doc = decode(encode_profile(sample_profile()))
    assert len(doc[3]) == 1
    mapping = decode(doc[3][0])
    strings = [s.decode() for s in doc[6]]
    assert strings[mapping[5][0]] == "/bin/prog"
    for flag in (7, 8, 9, 10):  # has_functions, has_filenames, has_line_numbers, inline
        assert mapping[flag] == [1]


def test_pprof_fields_of_a_two_metric_gzipped_profile() -> None:
    profile = Profile(ProfileMeta(mode="sampler", period_ns=1_000_000, start_time=10.0,
                                  end_time=12.5), (SAMPLES, CPU_NS))
    fid = profile.frames.intern(Frame("f", module="/m", file="f.c", line=3, address=0x40))
    profile.tree.add_stack([fid], [7, 7_000_000])
    profile.finalize()
    raw = export_pprof(profile)
    assert raw[:2] == b"\x1f\x8b"
    doc = decode(gzip.decompress(raw))
    strings = [s.decode() for s in doc[6]]
    units = [strings[decode(t)[2][0]] for t in doc[1]]
    assert units == ["count", "nanoseconds"]
    assert ints(decode(doc[2][0])[2][0]) == [7, 7_000_000]
    assert doc[12] == [1_000_000] and doc[10] == [2_500_000_000]
    assert strings[doc[14][0]] == "samples"  # default_sample_type: the primary metric
    function = decode(doc[5][0])
    assert strings[function[4][0]] == "f.c" and function[5] == [3]
    location = decode(doc[4][0])
    assert location[3] == [0x40]


def test_leaf_cost_goes_to_the_locations_it_was_recorded_at() -> None:
    """mid (out of line) holds an inlined leaf; costs split by address keep their lines."""
    from proftui.collectors.model.lines import add_code_cost
    from proftui.collectors.model.profile import CodeSite

    profile = Profile(ProfileMeta(mode="sampler"), (SAMPLES,))
    main = profile.frames.intern(Frame("main", "/m", "p.c", 1, address=0x10))
    mid = profile.frames.intern(Frame("mid", "/m", "p.c", 10, address=0x100))
    leaf = profile.frames.intern(Frame("leaf", "/m", "leaf.h", 3, inlined=True))
    profile.tree.add_stack([main, mid], [4])
    profile.tree.add_stack([main, mid, leaf], [6])
    add_code_cost(profile, "/m", 0x104, CodeSite(0x100, "p.c", 12), [3])
    add_code_cost(profile, "/m", 0x108, CodeSite(0x100, "p.c", 13), [1])
    add_code_cost(profile, "/m", 0x110, CodeSite(0x100, "leaf.h", 5), [6])
    profile.finalize()
    doc = decode(encode_profile(profile))
    strings = [s.decode() for s in doc[6]]
    names = {decode(f)[1][0]: strings[decode(f)[2][0]] for f in doc[5]}
    locations = {}
    for raw in doc[4]:
        loc = decode(raw)
        lines = [decode(line) for line in loc.get(4, [])]
        locations[loc[1][0]] = (loc.get(3, [0])[0],
                                [(names[ln[1][0]], ln.get(2, [0])[0]) for ln in lines])
    flat: dict[tuple[str, int], int] = defaultdict(int)
    total = 0
    for raw in doc[2]:
        sample = decode(raw)
        ids, value = ints(sample[1][0]), ints(sample[2][0])[0]
        total += value
        address, lines = locations[ids[0]]
        flat[lines[0]] += value
        if lines[0][0] == "leaf":
            assert lines == [("leaf", 5), ("mid", 10)] and address == 0x110  # inline chain
        assert [locations[i][1][-1][0] for i in ids[1:]] == ["main"]
    assert total == 10
    assert dict(flat) == {("mid", 12): 3, ("mid", 13): 1, ("leaf", 5): 6}
