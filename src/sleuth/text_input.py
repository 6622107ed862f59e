"""Text that comes from a user, checked in one place for every door (Python API, CLI, HTTP, and any
future door such as an MCP server: call :func:`check_text` on each text argument, or :func:`check_tree`
on a JSON-like value, and turn :class:`BadText` into that door's "invalid argument" answer).

The rule (refuse, never repair): text is accepted exactly as given, or refused with a reason that
names the field, the kind of character and its position (0-based, in code points).  Refused:

* a lone surrogate (U+D800 to U+DFFF): not a Unicode character at all; UTF-8 cannot carry it.
  JSON may spell one with an escape (``"\\ud800"``), typically from text cut inside an emoji, and
  Python holds undecodable command-line bytes as U+DC80 to U+DCFF;
* NUL (U+0000);
* every other control character (Unicode category Cc: U+0001 to U+001F, U+007F to U+009F)
  except tab, line feed and carriage return.

Everything else passes unchanged (no normalisation, no trimming here): format characters, private
use, unassigned code points and noncharacters are all valid Unicode that encodes as UTF-8.  Invalid
UTF-8 bytes never reach this module: the JSON parser or the operating system refuses or escapes them first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: control characters allowed in text
ALLOWED_CONTROLS = "\t\n\r"
_REFUSED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


class BadText(ValueError):
    """Text a user gave that Sleuth refuses: ``field`` says which, ``reason`` why (one sentence)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field} {reason}")
        self.field = field
        self.reason = reason


def text_problem(text: str) -> str | None:
    """Why ``text`` is refused (``"contains a lone surrogate U+D800 at position 3 (...)"``), or ``None``."""
    m = _REFUSED.search(text)
    if m is None:
        return None
    cp, at = ord(m.group()), m.start()
    if 0xD800 <= cp <= 0xDFFF:
        return (
            f"contains a lone surrogate U+{cp:04X} at position {at} "
            "(not valid Unicode: text cut inside a character, or bytes that are not UTF-8)"
        )
    if cp == 0:
        return f"contains the binary control character NUL (U+0000) at position {at}"
    return (
        f"contains the binary control character U+{cp:04X} at position {at} "
        "(only tab, line feed and carriage return are allowed)"
    )


def without_refused(text: str) -> str:
    """``text`` with the characters :func:`check_text` refuses removed (for text Sleuth itself
    produced and gets back, such as a model's answer returned as a conversation's assistant turn)."""
    return _REFUSED.sub("", text)


def check_text(value: Any, field: str) -> str:
    """``value`` unchanged when it is acceptable text; else :class:`BadText` naming ``field``."""
    if not isinstance(value, str):
        raise BadText(field, "must be text")
    why = text_problem(value)
    if why is not None:
        raise BadText(field, why)
    return value


def check_tree(value: Any, field: str) -> Any:
    """``value`` unchanged after checking every string in it (mapping keys included), recursively.

    The field of a refused string is its path (``filters.acl[1]``, ``a key of filters``);
    numbers, booleans and ``None`` pass; the shape itself is the caller's business."""
    if isinstance(value, str):
        return check_text(value, field)
    if isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, str):
                why = text_problem(k)
                if why is not None:
                    raise BadText(f"a key of {field}" if field else "a key", why)
            check_tree(v, f"{field}.{k}" if field else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_tree(v, f"{field}[{i}]")
    return value
