"""Stop strings applied client-side, to a whole text or to a stream of pieces.

Some servers ignore ``stop`` (and OpenAI takes at most four); cutting on the
client makes every backend, and the in-process scripted model, behave the same.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["StopCutter", "cut_at_stop"]


def cut_at_stop(text: str, stop: Sequence[str] | None) -> tuple[str, bool]:
    """Cut ``text`` at the earliest stop string; returns the text and whether a cut happened."""
    if not stop:
        return text, False
    cut = len(text)
    for s in stop:
        if not s:
            continue
        i = text.find(s)
        if i != -1 and i < cut:
            cut = i
    return text[:cut], cut < len(text)


class StopCutter:
    """Cuts a stream of text pieces at the first stop string, holding back a possible prefix of one."""

    def __init__(self, stop: Sequence[str] | None) -> None:
        self.stop = [s for s in (stop or ()) if s]
        self.hold = max((len(s) for s in self.stop), default=1) - 1
        self.buf = ""
        self.done = False

    def feed(self, delta: str) -> str:
        """The text that can be released now (``""`` while a stop string may be starting)."""
        if self.done:
            return ""
        self.buf += delta
        text, cut = cut_at_stop(self.buf, self.stop)
        if cut:
            self.done = True
            self.buf = ""
            return text
        if self.hold <= 0:
            out, self.buf = self.buf, ""
        elif len(self.buf) <= self.hold:
            out = ""
        else:
            out, self.buf = self.buf[: -self.hold], self.buf[-self.hold :]
        return out

    def flush(self) -> str:
        """The held-back rest at the end of the stream (nothing once a stop string was found)."""
        out, self.buf = ("" if self.done else self.buf), ""
        return out
