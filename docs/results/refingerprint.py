"""Re-label a committed run directory's current records with the running code's fingerprints.

A record's ``code`` says which version of its strategy made it.  When the fingerprint
scheme changes (until commit 5074b63 it hashed source files: the strategy's module and
prompts, all of ``sleuth/llm`` and ``sleuth/search``; later the behaviour fingerprint
gained the strategy's full typed options; then it became per answer language) while the
behaviour stays the same, the committed records are still the running code's, but under
the earlier scheme's values.
This maps any earlier scheme's current codes to the running code's: records whose
``code`` equals the run's ``run.json`` ``code[strategy]`` were made by that code, which
is also the code this script must run with (the fingerprint is computed by the running
code, :mod:`sleuth.eval.fingerprint`); their ``code`` and ``run.json`` get the running
code's fingerprint in the run's language.  That language is ``run.json``'s ``code_lang``
where it has one, else the one ``sleuth eval`` would give the run now: the languages of the
questions its tasks ask (the data file named in ``run.json``, sampled and expanded as the
run was), stored as ``code_lang``.  Records with any other ``code`` are superseded older versions and
keep theirs, as do those in ``replaced.jsonl.gz``.  Then the directory is compacted
(``sleuth eval compact``): ``results.jsonl.gz`` holds the newest record per task,
``replaced.jsonl.gz`` the superseded ones, and ``results.jsonl`` is removed.  It works on
either form (``results.jsonl`` or the compacted gzip files) and running it twice changes
nothing.

    python docs/results/refingerprint.py docs/results/hotpotqa-open [...]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sleuth.eval.fingerprint import code_fingerprint
from sleuth.eval.rundir import run_code_lang
from sleuth.eval.store import compact_run, read_manifest, rewrite_records, run_lock, write_manifest
from sleuth.eval.verify import config_from_manifest


def run_lang(run_dir: Path, manifest: dict[str, Any]) -> str:
    """The run's fingerprint language: the stored one, else that of the questions its tasks ask."""
    if manifest.get("code_lang"):
        return str(manifest["code_lang"])
    from sleuth.eval.datasets import load_dataset
    from sleuth.eval.tasks import build_tasks

    cfg = config_from_manifest(manifest, run_dir)
    dataset = load_dataset(cfg.data, cfg.format, cfg.corpus).sample(cfg.limit, cfg.seed)
    if [it.id for it in dataset.items] != list((manifest.get("data") or {}).get("question_ids") or []):
        raise SystemExit(f"{run_dir}: the sample drawn now is not the run's sample (question ids differ)")
    return run_code_lang(cfg, build_tasks(dataset, cfg.strategies, cfg.gap))


def migrate(run_dir: Path) -> str:
    manifest = read_manifest(run_dir)
    if manifest is None:
        raise SystemExit(f"{run_dir} has no run.json")
    lang = run_lang(run_dir, manifest)
    old: dict[str, str] = manifest.get("code") or {}
    new = {s: code_fingerprint(s, lang) for s in old}
    counts = dict.fromkeys(old, 0)

    def change(rec: dict[str, Any]) -> dict[str, Any]:
        s = rec["strategy"]
        if s in old and rec.get("code") == old[s]:
            rec["code"] = new[s]
            counts[s] += 1
        return rec

    with run_lock(run_dir):
        rewrite_records(run_dir, change)
        write_manifest(run_dir, {**manifest, "code_lang": lang, "code": new})
    kept, moved = compact_run(run_dir)
    moves = ", ".join(f"{s} {old[s]} -> {new[s]} ({counts[s]})" for s in old)
    return f"{run_dir} ({lang}): {moves}; {kept} records kept, {moved} replaced ones moved aside"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", type=Path, nargs="+")
    for d in ap.parse_args().run_dirs:
        print(migrate(d))


if __name__ == "__main__":
    main()
