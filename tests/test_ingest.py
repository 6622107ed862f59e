"""Readers and chunking on real files: every corpus shape in ../shared/data, folders of
documents, bad files reported by name and skipped."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from sleuth.search.chunking import chunk_doc, passage_hash, split_sentences
from sleuth.search.ingest import Doc, IngestReport, read_inputs
from sleuth.search.read_json import detect_format


def _read(paths: list[Path], **kw: object) -> tuple[list[Doc], IngestReport]:
    rep = IngestReport()
    docs = list(read_inputs(paths, report=rep, **kw))  # type: ignore[arg-type]
    return docs, rep


@pytest.mark.parametrize(
    ("rel", "fmt", "min_docs", "doc_id", "title"),
    [
        ("quickstart/wiki_passages.jsonl", "flashrag", 1000, "0", "Evan Morris"),
        ("hotpotqa/test.jsonl", "hotpotqa", 4900, "Gerry Shamray", "Gerry Shamray"),
        ("hotpotqa/train.jsonl", "hotpotqa", 2900, None, None),
        ("musique/train.json", "musique", 1800, None, "Journal of Mathematical Physics"),
        ("musique/train_corpus.json", "generic", 1800, None, "Journal of Mathematical Physics"),
        ("timeqa/train_hard.json.gz", "timeqa", 300, "/wiki/Newton_D._Baker_House", "Newton D . Baker House"),
        ("strategyqa/train.json", "strategyqa", 2200, "b8677742616fef051f00", "Genghis Khan"),
        ("policy_zh/corpus.jsonl", "policy", 12, "trv-2025-01", "差旅费用管理办法（2025版）"),
    ],
)
def test_every_shared_corpus_reads(
    data_dir: Path, rel: str, fmt: str, min_docs: int, doc_id: str | None, title: str | None
) -> None:
    docs, rep = _read([data_dir / rel])
    assert rep.skipped == [] and rep.bad_lines == {}
    assert len(docs) >= min_docs
    # explicit format gives the same documents as auto-detection
    docs2, _ = _read([data_dir / rel], format=fmt)
    assert [d.doc_id for d in docs2] == [d.doc_id for d in docs]
    if doc_id is not None:
        assert docs[0].doc_id == doc_id
    if title is not None:
        assert docs[0].title == title
    assert len({d.doc_id for d in docs}) == len(docs), "pooled corpora are deduplicated"
    assert all(d.text or d.blocks for d in docs)


def test_hotpot_pooled_by_title_and_policy_metadata(data_dir: Path) -> None:
    docs, _ = _read([data_dir / "hotpotqa/test.jsonl"])
    titles = [d.title for d in docs]
    assert len(titles) == len(set(titles))
    assert "Harvey Pekar" in titles and "Denise Levertov" in titles
    pol, _ = _read([data_dir / "policy_zh/corpus.jsonl"])
    audit = next(d for d in pol if d.doc_id == "fin-audit-2025")
    assert (audit.acl, audit.version, audit.region, audit.section) == (["finance"], "2025", "境内", "第三章 审计程序")


def test_format_detection() -> None:
    assert detect_format({"id": "1", "contents": '"T"\nx'}) == "flashrag"
    assert detect_format({"context": [["T", ["a"]]]}) == "hotpotqa"
    assert detect_format({"id": 1, "title": "t", "text": "x", "year": 2001}) == "generic"
    assert detect_format({"question": "q", "answer": "a"}) == "unknown"


def test_generic_jsonl_metadata_and_gzip(tmp_path: Path) -> None:
    recs = [
        {"id": "a", "title": "Alpha", "text": "alpha text", "year": 2001, "tags": ["x", "y"], "acl": "hr, finance"},
        {"doc_id": "b", "title": "Beta", "body": "beta text", "region": "EU"},
        {"title": "Gamma", "content": "gamma text"},
    ]
    p = tmp_path / "c.jsonl.gz"
    p.write_bytes(gzip.compress("\n".join(json.dumps(r) for r in recs).encode()))
    docs, rep = _read([p])
    assert rep.skipped == []
    assert [d.doc_id for d in docs][:2] == ["a", "b"] and docs[2].doc_id.startswith("Gamma~")
    assert docs[0].metadata == {"year": 2001, "tags": ["x", "y"]}
    assert docs[0].acl == ["finance", "hr"]
    assert docs[1].region == "EU" and docs[1].acl is None


_MINI_PDF_TEXT = "Sleuth reads portable documents"


def _write_pdf(path: Path, text: str) -> None:
    """A minimal valid one-page PDF with one line of text (offsets computed)."""
    content = f"BT /F1 18 Tf 40 700 Td ({text}) Tj ET".encode()
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    path.write_bytes(bytes(out))


def test_document_folder_all_types(tmp_path: Path) -> None:
    d = tmp_path / "docs"
    (d / "sub").mkdir(parents=True)
    (d / "a.txt").write_text("First paragraph about owls.\n\nSecond paragraph about hawks.", encoding="utf-8")
    (d / "sub" / "b.md").write_text(
        "# Birds\n\nIntro.\n\n## Owls\n\nOwls hunt at night.\n\n## Hawks\n\nHawks hunt by day.\n"
    )
    (d / "c.html").write_text(
        "<html><head><title>Fish page</title><script>var x=1;</script></head><body>"
        "<h2>Salmon</h2><p>Salmon swim upstream.</p><nav>menu</nav><h2>Trout</h2><p>Trout like cold water.</p></body></html>"
    )
    _write_pdf(d / "d.pdf", _MINI_PDF_TEXT)
    (d / ".hidden.txt").write_text("never read")
    docs, rep = _read([d])
    by_id = {doc.doc_id: doc for doc in docs}
    assert set(by_id) == {"a.txt", "sub/b.md", "c.html", "d.pdf"}, rep.skipped
    assert rep.skipped == []
    md = chunk_doc(by_id["sub/b.md"])
    assert [(p.section, p.text) for p in md] == [
        ("Birds", "Intro."),
        ("Owls", "Owls hunt at night."),
        ("Hawks", "Hawks hunt by day."),
    ]
    assert md[0].title == "Birds"
    html = chunk_doc(by_id["c.html"])
    assert html[0].title == "Fish page"
    assert [(p.section, p.text) for p in html] == [
        ("Salmon", "Salmon swim upstream."),
        ("Trout", "Trout like cold water."),
    ]
    assert "var x" not in " ".join(p.text for p in html) and "menu" not in " ".join(p.text for p in html)
    pdf = chunk_doc(by_id["d.pdf"])
    assert _MINI_PDF_TEXT in pdf[0].text and pdf[0].section == "page 1"
    txt = chunk_doc(by_id["a.txt"])
    assert txt[0].text == "First paragraph about owls.\n\nSecond paragraph about hawks."
    assert txt[0].source.endswith("a.txt")


def test_bad_files_are_named_and_skipped_rest_kept(tmp_path: Path) -> None:
    d = tmp_path / "mixed"
    d.mkdir()
    (d / "good.jsonl").write_text(
        '{"id": "g1", "text": "good one"}\nnot json at all\n{"id": "g2", "text": "good two"}\n', encoding="utf-8"
    )
    (d / "binary.txt").write_bytes(b"\x00\x01\x02\x03" * 100)
    (d / "latin1.txt").write_bytes("caf\xe9 cr\xe8me br\xfbl\xe9e".encode("latin-1"))
    (d / "empty.md").write_bytes(b"")
    (d / "huge.txt").write_text("x " * 600_000)
    (d / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (d / "data.csv").write_text("a,b\n1,2\n")
    (d / "questions.jsonl").write_text('{"question": "q?", "answer": "a"}\n')
    (d / "broken.json").write_text('[{"id": 1, "text": "x"')
    docs, rep = _read([d, tmp_path / "missing.jsonl"], max_file_mb=1)
    assert [doc.doc_id for doc in docs] == ["g1", "g2"]
    reasons = {Path(p).name: r for p, r in rep.skipped}
    assert set(reasons) == {
        "binary.txt",
        "latin1.txt",
        "empty.md",
        "huge.txt",
        "broken.pdf",
        "data.csv",
        "questions.jsonl",
        "broken.json",
        "missing.jsonl",
    }
    assert "binary" in reasons["binary.txt"]
    assert "UTF-8" in reasons["latin1.txt"]
    assert "empty" in reasons["empty.md"]
    assert "too large" in reasons["huge.txt"]
    assert "PDF" in reasons["broken.pdf"]
    assert "unsupported" in reasons["data.csv"]
    assert "unrecognised" in reasons["questions.jsonl"]
    assert "JSON" in reasons["broken.json"]
    assert rep.bad_lines == {str(d / "good.jsonl"): 1}


def test_chunking_paragraphs_sentences_and_chinese() -> None:
    assert split_sentences("第一条 规定。第二条？好！第三条；End. Next one") == [
        "第一条 规定。",
        "第二条？",
        "好！",
        "第三条；",
        "End.",
        "Next one",
    ]
    long_en = " ".join(f"Sentence number {i} is here." for i in range(200))
    doc = Doc(doc_id="d", title="T", text=long_en + "\n\nShort tail.", acl=["x"], version="2", metadata={"year": 3})
    ps = chunk_doc(doc, max_chars=300)
    assert all(len(p.text) <= 300 for p in ps)
    assert [p.id for p in ps] == [f"d#{i}" for i in range(len(ps))]
    assert all(p.text.rstrip().endswith(".") for p in ps), "splits fall on sentence ends"
    assert ps[0].acl == ["x"] and ps[0].version == "2" and ps[0].metadata == {"year": 3}
    zh = Doc(doc_id="z", text="这是一个很长的中文句子，用来测试分块。" * 40)
    zps = chunk_doc(zh, max_chars=300)
    assert len(zps) > 1 and all(len(p.text) <= 150 for p in zps)
    assert all(p.text.endswith("。") for p in zps)
    assert zps[0].acl == ["all"], "the default ACL applies when the source gives none"


def test_chunk_ids_stable_and_hash_covers_scope() -> None:
    doc = Doc(doc_id="s", title="T", text="\n\n".join(f"Paragraph {i}. " * 30 for i in range(6)))
    a, b = chunk_doc(doc, max_chars=400), chunk_doc(doc, max_chars=400)
    assert [(p.id, p.text) for p in a] == [(p.id, p.text) for p in b]
    p1, p2 = (
        chunk_doc(Doc(doc_id="x", text="same text", acl=["hr"]))[0],
        chunk_doc(Doc(doc_id="y", text="same  text", acl=["hr"]))[0],
    )
    assert passage_hash(p1) == passage_hash(p2), "whitespace and provenance do not make a passage different"
    p3 = chunk_doc(Doc(doc_id="z", text="same text", acl=["finance"]))[0]
    assert passage_hash(p3) != passage_hash(p1), "different scope: stored separately"


def test_a_jsonl_file_is_read_a_line_at_a_time(tmp_path: Path) -> None:
    """JSONL (plain or gzipped) is streamed: the first documents arrive before a damaged line far
    below is read, so a corpus of millions of lines never sits in memory whole."""
    import gzip

    from sleuth.search.doc import BadFile, IngestReport
    from sleuth.search.read_json import read_json_file

    good = "".join(json.dumps({"id": f"d{i}", "text": f"passage {i}"}) + "\n" for i in range(3))
    for name, opener in (("c.jsonl", open), ("c.jsonl.gz", gzip.open)):
        path = tmp_path / name
        with opener(path, "wb") as f:
            f.write(good.encode() + b"\n" + b'{"id": "bad", "text": "\xff\xfe"}\n')
        docs = read_json_file(path, "auto", IngestReport(), {})
        assert [next(docs).doc_id for _ in range(3)] == ["d0", "d1", "d2"]
        with pytest.raises(BadFile, match="line 5"):
            next(docs)
