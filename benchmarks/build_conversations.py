"""Build the MuSiQue-derived follow-up benchmark: two-turn conversations from question decompositions.

For every MuSiQue question whose second hop refers to the first (``#1``):

* turn 1 (user): the first sub-question, asked as a question (``"X >> performer"`` ->
  ``"Who is the performer of X?"``, as ``--gap`` asks hops: :func:`sleuth.eval.gap.as_question`);
* turn 1 (assistant): its gold answer;
* turn 2 (user): the second sub-question with ``#1`` replaced by a *reference* to that answer
  ("that person", "that country", "that company", "it"), chosen by rule from the first hop's
  wording, never by hand;
* ``standalone``: the second sub-question with ``#1`` replaced by the answer (the upper bound);
* ``answers``: the second hop's answer and aliases; ``gold_ids``: its supporting paragraph;
  ``paragraphs``: all of the question's paragraphs, so ``--setting open`` pools the same corpus
  as the MuSiQue runs.

``--split tuning|reporting`` keeps one half of MuSiQue's file, as :mod:`sleuth.eval.splits` defines
the halves: tune the rewrite on the conversations of the tuning half
(``benchmarks/bench_rewrite.py``), report on those of the reporting half, and never look at the
reporting conversations' traces to design anything.

    python benchmarks/build_conversations.py ../shared/data/musique/train.json runs/conv/musique_conv_tuning.jsonl \\
        --split tuning
    python benchmarks/build_conversations.py ../shared/data/musique/train.json runs/conv/musique_conv.jsonl \\
        --split reporting
    sleuth eval --data runs/conv/musique_conv.jsonl --format jsonl --setting open \\
        --strategies rag,self-ask --out runs/conv/musique --time-limit 1h

Prints how many conversations were written and how many questions were skipped, and why.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sleuth.eval.datasets import DatasetError, load_dataset
from sleuth.eval.gap import _PERSON_RELATIONS, _TRIPLE, as_question, substitute
from sleuth.eval.items import Item
from sleuth.eval.splits import MUSIQUE_PARTS, musique_split

_REF = re.compile(r"#(\d+)")
#: a triple's relation -> the reference its answer gets ("that country")
_RELATION_REFS = {
    "country": "that country",
    "country of citizenship": "that country",
    "located in the administrative territorial entity": "that place",
    "location": "that place",
    "place of birth": "that place",
    "place of death": "that place",
    "headquarters location": "that city",
    "location of formation": "that place",
    "capital of": "that place",
    "record label": "that record label",
    "publisher": "that publisher",
    "manufacturer": "that manufacturer",
    "owned by": "that owner",
    "employer": "that employer",
    "educated at": "that school",
    "member of sports team": "that team",
    "member of political party": "that party",
    "continent": "that continent",
    "sport": "that sport",
    "conflict": "that conflict",
    "inception": "that year",
    "date of birth": "that date",
    "date of death": "that date",
    "publication date": "that date",
}
_AUX = {"is", "was", "are", "were", "does", "did", "do", "has", "had", "have", "can", "could", "will", "would"}
_WH = re.compile(r"^\s*(?:in |on |at |of |for |from |to )?(?P<wh>what|which|who|whom|whose|where|when|how)\b\s*(?P<noun>[\w-]+)?",
                 re.IGNORECASE)  # fmt: skip


def reference_for(hop: str) -> str:
    """The words turn 2 uses for the first hop's answer, from the first hop's wording."""
    text = " ".join(hop.split())
    m = _TRIPLE.match(text)
    if m:
        rel = m.group("relation").strip().lower()
        if rel in _PERSON_RELATIONS:
            return "that person"
        return _RELATION_REFS.get(rel, "it")
    w = _WH.match(text)
    if not w:
        return "it"
    wh, noun = w.group("wh").lower(), (w.group("noun") or "").lower()
    if wh in ("who", "whom"):
        return "that person"
    if wh == "where":
        return "that place"
    if wh == "when":
        return "that time"
    if wh in ("what", "which") and noun and noun not in _AUX and noun.isalpha():
        rest = text[w.end() :].split()
        nxt = rest[0].lower() if rest else ""
        if nxt.isalpha() and nxt not in _AUX and nxt not in ("of", "in", "on", "at") and not nxt.endswith(("ed", "s")):
            return f"that {noun} {nxt}"  # "What musical instrument does ..." -> "that musical instrument"
        return f"that {noun}"
    return "it"


def _capitalise_start(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


def conversation(item: Item) -> tuple[dict[str, Any] | None, str]:
    """One conversation record from a MuSiQue item, or (None, why it was skipped)."""
    hops = item.decomposition
    if len(hops) < 2:
        return None, "fewer than two hops"
    h1, h2 = hops[0], hops[1]
    if not h1.answer or not h2.answer:
        return None, "a hop without a gold answer"
    if _REF.search(h1.question):
        return None, "the first hop refers to another"
    refs = set(_REF.findall(h2.question))
    if refs != {"1"}:
        return None, "the second hop does not refer to the first alone"
    ref = reference_for(h1.question)
    follow_up = _capitalise_start(as_question(_REF.sub(ref, re.sub(r"\b[Tt]he #1\b", "#1", h2.question))))
    standalone = as_question(substitute(h2.question, [h1.answer]))
    record = {
        "id": item.id,
        "messages": [
            {"role": "user", "content": as_question(h1.question)},
            {"role": "assistant", "content": h1.answer.rstrip(".") + "."},
            {"role": "user", "content": follow_up},
        ],
        "standalone": standalone,
        "answers": list(dict.fromkeys([h2.answer, *h2.aliases])),
        "gold_ids": [h2.support_id] if h2.support_id else [],
        "paragraphs": [{"id": p.id, "title": p.title, "text": p.text} for p in item.paragraphs],
        "metadata": {"source_id": item.id, "reference": ref},
    }
    return record, ""


def build(items: Iterable[Item]) -> tuple[list[dict[str, Any]], Counter[str]]:
    out, skipped = [], Counter()
    for item in items:
        rec, why = conversation(item)
        if rec is None:
            skipped[why] += 1
        else:
            out.append(rec)
    return out, skipped


def write_jsonl(records: Iterable[Mapping[str, Any]], path: Path) -> None:
    """Atomically: a temporary file beside ``path``, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("musique", type=Path, help="MuSiQue JSON (e.g. ../shared/data/musique/train.json)")
    ap.add_argument("out", type=Path, help="the conversations JSONL to write")
    ap.add_argument(
        "--split",
        choices=MUSIQUE_PARTS,
        help="only this half of MuSiQue's file (sleuth.eval.splits); default: every question",
    )
    args = ap.parse_args(argv)
    try:
        ds = load_dataset(args.musique, "musique")
    except DatasetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.split:
        ds = musique_split(ds, args.split)
    records, skipped = build(ds.items)
    for r in records:
        r["metadata"]["split"] = args.split or "all"
    write_jsonl(records, args.out)
    refs = Counter(r["metadata"]["reference"] for r in records)
    part = f" ({args.split} half)" if args.split else ""
    print(f"{len(records)} conversations from {len(ds.items)} MuSiQue questions{part} -> {args.out}")
    for why, n in skipped.most_common():
        print(f"  skipped {n}: {why}")
    print("  references: " + ", ".join(f"{r!r} {n}" for r, n in refs.most_common()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
