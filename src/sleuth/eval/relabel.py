"""Records another code version made that the running code would make the same: restamped, not
run again (``sleuth eval relabel DIR``).

A change of behaviour changes a strategy's fingerprint (:mod:`sleuth.eval.fingerprint`), and
then every record of that strategy is stale, though the change may touch only some questions
(an option switched on that acts on comparison questions leaves the bridge questions' records as
they were). Running them all again costs hours of model time.  A replay costs none: each stale
record's own model replies and search results are served to the running code
(:mod:`sleuth.eval.replay`); a record whose replay is the same, step by step (every call asked
from the same prompt, every search the same query, the same answer, short answer, citations and
finish reason), is what the running code makes, and gets its fingerprint.  The record keeps what
it was (``relabelled``: the fingerprint it had, when, and how its prompts were compared); the
records that differ stay stale for ``sleuth eval ... --redo-stale``.

A replay tells the prompt it is asked from the recorded one by its digest (``prompt_sha``,
recorded with every call since stop 43).  A record made before then has only each prompt's
length; such records are relabelled only with ``by_length`` (``--by-length``), for a change that
is known to leave the prompt templates' text alone, and their stamp says so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sleuth.eval.store import read_records, rewrite_records, run_lock
from sleuth.eval.verify import SAME, Check, Verification, verify_run

BY_DIGEST, BY_LENGTH = "digest", "length"


@dataclass
class Relabelling:
    """What :func:`relabel_run` did: the replay's checks, and per strategy the records restamped, those
    whose replay differs, and those left stale because their prompts could be compared by length
    only (without ``by_length``)."""

    verification: Verification
    relabelled: Counter[str] = field(default_factory=Counter)
    differ: Counter[str] = field(default_factory=Counter)
    length_only: Counter[str] = field(default_factory=Counter)


def prompts_compared(rec: Mapping[str, Any]) -> str:
    """How a replay compares the record's prompts: by digest when every call has one, else by length."""
    calls = [ev.get("data") or {} for ev in (rec.get("result") or {}).get("trace") or [] if ev.get("kind") == "llm"]
    return BY_DIGEST if all(d.get("prompt_sha") for d in calls) else BY_LENGTH


def _key(rec: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (str(rec["strategy"]), str(rec["qid"]), str(rec.get("code")), str(rec.get("finished_at")))


def relabel_run(
    out: str | Path,
    *,
    strategies: Sequence[str] | None = None,
    from_code: str | None = None,
    by_length: bool = False,
    data: str | Path | None = None,
    corpus: str | Path | None = None,
    index: str | None = None,
    on_check: Callable[[Check], None] | None = None,
) -> Relabelling:
    """Replay every record of ``out`` that other code made (of ``strategies``; None: all; only those
    of fingerprint ``from_code`` when given) and give the running code's fingerprint to those whose
    replay is the same.  Writes the run's results files atomically, under the run's lock."""
    out = Path(out)
    with run_lock(out):
        records = {(str(r["strategy"]), str(r["qid"])): r for r in read_records(out)}
        ver = verify_run(
            out,
            sample=None,
            strategies=strategies,
            data=data,
            corpus=corpus,
            index=index,
            replay=True,
            other_code=True,
            from_code=from_code,
            on_check=on_check,
        )
        done = Relabelling(ver)
        stamp: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        at = datetime.now(UTC).isoformat(timespec="seconds")
        for c in ver.checks:
            if c.verdict != SAME:
                done.differ[c.strategy] += 1
                continue
            rec = records[(c.strategy, c.qid)]
            how = prompts_compared(rec)
            if how == BY_LENGTH and not by_length:
                done.length_only[c.strategy] += 1
                continue
            stamp[_key(rec)] = {"from": rec.get("code"), "at": at, "prompts": how}
            done.relabelled[c.strategy] += 1

        def change(rec: dict[str, Any]) -> dict[str, Any]:
            mark = stamp.get(_key(rec))
            if mark is None:
                return rec
            return {**rec, "code": ver.code[str(rec["strategy"])], "relabelled": mark}

        if stamp:
            rewrite_records(out, change)
    return done
