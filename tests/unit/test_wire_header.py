"""mmpi/wire/mmpi_wire.h, the C parts' copy of the wire's constants, says what protocol.py says."""

import re
import struct
from pathlib import Path

from mmpi.wire import protocol as P

ROOT = Path(__file__).resolve().parents[2]
HEADER = ROOT / "mmpi" / "wire" / "mmpi_wire.h"


def _defines() -> dict[str, int]:
    found = {}
    for name, value in re.findall(r"^#define (WIRE_\w+) (.+?)(?:\s*/\*.*)?$", HEADER.read_text(),
                                  re.M):
        found[name] = eval(value, {})  # integer expressions such as ((1 << 28) - 1)
    return found


def test_every_constant_matches_the_protocol():
    d = _defines()
    assert d["WIRE_VERSION"] == P.VERSION
    assert d["WIRE_ENVELOPE_SIZE"] == P.ENVELOPE_SIZE
    assert d["WIRE_MAX_XFER"] == P.MAX_XFER
    for name, value in d.items():
        short = name.removeprefix("WIRE_")
        if short.startswith(("T_", "K_", "F_")):
            assert getattr(P, short) == value, name


def test_the_offsets_are_the_envelopes_layout():
    d = _defines()
    fmt = P._ENVELOPE.format
    assert fmt.startswith("<") and len(fmt) - 1 == len(P.WIRE_FIELDS)
    for i, field in enumerate(P.WIRE_FIELDS):
        assert d[f"WIRE_OFF_{field.upper()}"] == struct.calcsize(fmt[: i + 1]), field
    # and protocol's own packing puts each field there
    env = P.Envelope(P.K_P2P, src=11, dst=22, tag=33, context=44, nbytes=55, chunk=66,
                     xfer=77, flags=8, aux=99)
    raw = env.pack()
    values = dict(zip(P.WIRE_FIELDS, P._ENVELOPE.unpack(raw), strict=True))
    assert values["version"] == P.VERSION
    for field in ("kind", "flags", "src", "dst", "tag", "context", "nbytes", "chunk", "xfer",
                  "aux"):
        expected = P.K_P2P if field == "kind" else getattr(env, field)
        assert values[field] == expected, field


def test_every_c_file_takes_the_wire_from_the_header():
    # No C file defines a wire constant of its own: each that uses one includes the header.
    sources = [*(ROOT / "mmpi" / "_backend").glob("*.c"), ROOT / "forwarder" / "_crelay.c"]
    assert len(sources) >= 7
    names = ("VERSION", "ENVELOPE_SIZE", "T_EAGER", "T_LARGE", "T_COLL", "K_P2P", "MAX_XFER",
             "OFF_")
    for path in sources:
        text = path.read_text()
        own = [line for line in text.splitlines() if line.startswith("#define")
               and any(n in line.split()[1] for n in names)]
        assert not own, f"{path.name} defines wire constants itself: {own}"
        if "WIRE_" in text:
            assert '#include "mmpi_wire.h"' in text, path.name
