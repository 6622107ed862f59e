"""What every parser of model output shares: the cap on how much of a completion it reads.

The parsers (:mod:`sleuth.strategies.parsing` and the per-strategy ``parse_*`` modules) take
any model output and return a small value; none raises, and none looks at more than
:data:`MAX_IN` characters, so a runaway completion costs bounded time.
"""

from __future__ import annotations

MAX_IN = 20_000  # parsers look at most at this many characters


def cap(text: object) -> str:
    """``text`` as a string (``None`` -> ``""``), cut to :data:`MAX_IN` characters."""
    s = text if isinstance(text, str) else ("" if text is None else str(text))
    return s[:MAX_IN]
