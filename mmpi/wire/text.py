"""Reading the user's text files (job files, host files, rank maps): UTF-8, or a clear error.

YAML and JSON are Unicode: a file is taken as UTF-8, or as UTF-16/UTF-32 when it starts with
that encoding's byte-order mark (what editors on Windows write). Anything else - a stray
byte of another code page, a binary file given by mistake - is refused with one sentence that
says where the first bad byte is, never with a decoding traceback.
"""

from __future__ import annotations

import codecs
from pathlib import Path

# Longest marks first: UTF-32's little-endian mark starts with UTF-16's.
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
         (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
         (codecs.BOM_UTF16_BE, "utf-16"))


class NotText(ValueError):
    """A file that is not Unicode text; the message says why, without the file's name."""


def decode(data: bytes) -> str:
    """The text of a file's bytes; NotText if they are not UTF-8 (or UTF-16/32 with a BOM)."""
    encoding = next((enc for bom, enc in _BOMS if data.startswith(bom)), "utf-8")
    if encoding == "utf-8" and b"\0" in data:
        line = data.count(b"\n", 0, data.index(b"\0")) + 1
        raise NotText(f"not a text file: it holds a NUL byte at line {line} (binary, or "
                      "UTF-16 without a byte-order mark? save it as UTF-8)")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        byte = data[exc.start]
        raise NotText(f"not {encoding.upper().removesuffix('-SIG')} text: byte 0x{byte:02x} at "
                      f"line {line}, column {column} cannot be decoded (save it as UTF-8)"
                      ) from None
    if "\0" in text:
        line = text.count("\n", 0, text.index("\0")) + 1
        raise NotText(f"not a text file: it holds a NUL character at line {line}")
    return text


def read(path: str | Path) -> str:
    """The text of the file at `path` (OSError if unreadable, NotText if not text)."""
    return decode(Path(path).read_bytes())


__all__ = ["NotText", "decode", "read"]
