"""What every peer adapter shares (standard library only: it runs inside each peer's own venv).

An adapter is started as ``python <adapter>.py --row ROW --questions Q.jsonl --out OUT.jsonl
--llm URL --search URL --model NAME --k K`` and writes one JSON line per question:
``{qid, answer, llm_calls, prompt_tokens, processed_prompt_tokens, completion_tokens, model_ms,
seconds, failure, error, sitting}``.
Questions already in OUT are skipped (resume); with ``--deadline`` (epoch seconds) no question
starts after it, so a time-limited sitting ends between questions.  LLM figures are the counting proxy's
``/_counters`` before and after the question.
"""

from __future__ import annotations

import argparse
import json
import time
import traceback
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: failure kinds a row reports (besides "" for none)
FAILURES = ("parse_error", "loop", "step_limit", "exception")


class RowFailure(Exception):
    """A question the pipeline ended without a usable answer; ``kind`` is one of FAILURES."""

    def __init__(self, kind: str, message: str, answer: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.answer = answer


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--row", required=True)
    ap.add_argument("--questions", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--llm", required=True, help="the counting proxy's base URL (no /v1)")
    ap.add_argument("--search", required=True, help="the search endpoint for this dataset")
    ap.add_argument("--model", required=True)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--deadline", type=float, default=None, help="epoch seconds: start no question after it")
    ap.add_argument("--sitting", default="", help="the sitting's id, kept on every line")
    return ap.parse_args()


def search(url: str, query: str, k: int) -> list[dict[str, Any]]:
    """Sleuth's index over HTTP: ``[{id, title, text, score}, ...]``."""
    q = urllib.parse.urlencode({"q": query, "k": k})
    with urllib.request.urlopen(f"{url}?{q}", timeout=120) as r:
        return json.loads(r.read())["passages"]


def counters(llm_url: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{llm_url}/_counters", timeout=30) as r:
        return json.loads(r.read())


#: the proxy's counters a line keeps, as differences over its question
COUNTED = ("llm_calls", "prompt_tokens", "processed_prompt_tokens", "completion_tokens", "model_ms")


def counted(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The proxy's counters over one question (``model_ms`` rounded to a tenth)."""
    out = {k: after[k] - before[k] for k in COUNTED if k in after and k in before}
    if "model_ms" in out:
        out["model_ms"] = round(out["model_ms"], 1)
    return out


def done_ids(out: Path) -> set[str]:
    if not out.exists():
        return set()
    ids = set()
    for line in out.read_text(encoding="utf-8").splitlines():
        try:
            ids.add(str(json.loads(line)["qid"]))
        except (json.JSONDecodeError, KeyError):
            continue
    return ids


def append_line(path: Path, rec: dict[str, Any]) -> None:
    """Append one JSON line; a last line a kill cut short (no newline at its end) is closed first,
    so that it never swallows this one (it stays unreadable and its question runs again)."""
    with open(path, "a+b") as f:
        if f.seek(0, 2):
            f.seek(-1, 2)
            if f.read(1) != b"\n":
                f.write(b"\n")
        f.write((json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8"))


def run_questions(
    args: argparse.Namespace, answer: Callable[[str], str], classify: Callable[[BaseException], str] | None = None
) -> None:
    """Answer each question not yet in ``args.out`` with ``answer(question)``, one line each."""
    questions = [json.loads(x) for x in args.questions.read_text(encoding="utf-8").splitlines() if x.strip()]
    seen = done_ids(args.out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for q in questions:
        if str(q["qid"]) in seen:
            continue
        if args.deadline is not None and time.time() >= args.deadline:
            print(f"{args.row}: time limit reached; stopping before {q['qid']}", flush=True)
            return
        before = counters(args.llm)
        t0 = time.perf_counter()
        rec: dict[str, Any] = {"qid": q["qid"], "answer": "", "failure": "", "error": ""}
        try:
            rec["answer"] = str(answer(q["question"]) or "")
        except RowFailure as e:
            rec.update(answer=e.answer, failure=e.kind, error=str(e)[:2000])
        except Exception as e:  # one question's failure never stops the row
            rec["failure"] = classify(e) if classify else "exception"
            rec["error"] = f"{type(e).__name__}: {e}"[:2000]
            rec["traceback"] = traceback.format_exc(limit=8)[-3000:]
        rec["seconds"] = round(time.perf_counter() - t0, 3)
        after = counters(args.llm)
        rec.update(counted(before, after))
        if args.sitting:
            rec["sitting"] = args.sitting
        append_line(args.out, rec)
        print(f"{args.row} {q['qid']}: {rec['answer'][:80]!r} {rec['failure']}", flush=True)
