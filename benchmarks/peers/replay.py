"""Sleuth's rows again, with no model: each kept record's replies and search results served to the running code.

    PYTHONPATH=src:. python -m benchmarks.peers.run --work-dir DIR --replay

A Sleuth row keeps each question's whole record beside its answer line (``records/<row>.<dataset>
.jsonl.gz``).  When Sleuth's code changes after a row ran (say, how a short answer is read out of
a reply), :func:`replay_rows` runs each question again through the eval worker on a
:class:`sleuth.eval.replay.Replay` of its record: the running code is handed the replies and the
passages the model and the index gave then.  Where the code asks what it asked then, the answer it
now gives is what it would give on the model, and the line's answer, short answer and ending are
updated (its calls, tokens and seconds are the sitting's and stay).  Where the code now asks
something else (another prompt, a call more, another query), or stops before the record's last
call, the record cannot say what the model would answer: the line stays and the question is
named, to be run again on the model (delete its line; the next sitting answers it).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.peers.questions import Benchmark
from benchmarks.peers.report import read_lines
from benchmarks.peers.rows import ROWS, answer_fields, sleuth_config

from sleuth.eval.store import iter_lines

__all__ = ["RowReplay", "read_records", "records_path", "replay_rows"]

#: the fields of an answer line that a replay may change (the rest are the sitting's measurements)
CHANGED_BY_CODE = ("answer", "short_answer", "failure", "reason", "error")


def records_path(work: Path, row: str, dataset: str) -> Path:
    return work / "records" / f"{row}.{dataset}.jsonl.gz"


def read_records(path: Path) -> dict[str, dict[str, Any]]:
    """The last record of each question in ``path`` (a later one is the question run again); a
    member cut short by a kill ends the reading there (:func:`sleuth.eval.store.iter_lines`)."""
    if not path.exists():
        return {}
    return {str(rec["qid"]): rec for rec in iter_lines(path)}


@dataclass
class RowReplay:
    """What a replay of one row on one dataset found."""

    row: str
    dataset: str
    same: int = 0
    changed: list[tuple[str, str, str]] = field(default_factory=list)  # (qid, before, after)
    needs_model: list[tuple[str, str]] = field(default_factory=list)  # (qid, why)
    no_record: list[str] = field(default_factory=list)

    def summary(self) -> str:
        n = self.same + len(self.changed) + len(self.needs_model) + len(self.no_record)
        parts = [f"{self.row} on {self.dataset}: {n} answers, {self.same} the same, {len(self.changed)} changed"]
        if self.needs_model:
            parts.append(f"{len(self.needs_model)} need the model")
        if self.no_record:
            parts.append(f"{len(self.no_record)} without a record (answered before records were kept)")
        lines = [", ".join(parts)]
        lines += [f"  changed {qid}: {before!r} -> {after!r}" for qid, before, after in self.changed]
        lines += [f"  needs the model {qid}: {why}" for qid, why in self.needs_model]
        return "\n".join(lines)


def replay_line(
    line: dict[str, Any], rec: dict[str, Any], payload: dict[str, Any]
) -> tuple[dict[str, Any] | None, str]:
    """``line`` as the running code answers ``rec`` again: (the new line, "") or (None, why the
    record cannot tell)."""
    from sleuth.eval.replay import Replay
    from sleuth.eval.worker import run_task

    replay = Replay(rec)
    fresh = run_task(payload, replay=replay)
    parted = str(fresh.get("replay_parted") or "")
    if parted:
        return None, parted
    if replay.calls_served < replay.calls_recorded:
        # the code now stops sooner: the answer is known, but not the calls and tokens it would cost
        return None, f"the running code makes {replay.calls_served} of the record's {replay.calls_recorded} model calls"
    return {**line, **answer_fields(fresh)}, ""


def replay_row(row: str, bench: Benchmark, work: Path, model: str, k: int) -> RowReplay:
    """Replay one Sleuth row's answers on one dataset and rewrite its answer file where they changed."""
    out = work / "answers" / f"{row}.{bench.name}.jsonl"
    lines = read_lines(out)
    records = read_records(records_path(work, row, bench.name))
    items = {it.id: it for it in bench.dataset.items}
    # no model is reached: the replay answers every call (a port nothing listens on, never the embedded model)
    config = sleuth_config(model, "http://127.0.0.1:9/v1", k, bench)
    found = RowReplay(row, bench.name)
    new_lines = []
    for line in lines:
        qid = str(line.get("qid"))
        rec, item = records.get(qid), items.get(qid)
        if rec is None or item is None:  # no record, or a question of another selection (left as the report leaves it)
            if item is not None:
                found.no_record.append(qid)
            new_lines.append(line)
            continue
        payload = {"item": item.to_dict(), "strategy": ROWS[row].pipeline, "config": config}
        new, why = replay_line(line, rec, payload)
        if new is None:
            found.needs_model.append((qid, why))
            new_lines.append(line)
        elif any(new.get(key) != line.get(key) for key in CHANGED_BY_CODE):
            before, after = line.get("short_answer") or line.get("answer"), new["short_answer"] or new["answer"]
            found.changed.append((qid, str(before)[:80], str(after)[:80]))
            new_lines.append(new)
        else:
            found.same += 1
            new_lines.append(line)
    if found.changed:  # all or nothing: a stop mid-write never leaves half a file
        tmp = out.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in new_lines), encoding="utf-8")
        os.replace(tmp, out)
    return found


def replay_rows(rows: list[str], benches: list[Benchmark], work: Path, model: str, k: int) -> list[RowReplay]:
    """Replay every Sleuth row among ``rows`` on every benchmark (peer rows have no records)."""
    sleuth_rows = [name for name in rows if ROWS[name].system == "sleuth"]
    if sleuth_rows:
        for b in benches:
            b.plan.prepare()  # the index the records' passages are looked up in
    return [replay_row(name, b, work, model, k) for name in sleuth_rows for b in benches]
