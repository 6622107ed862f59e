"""Documents as people have them: Word (.docx, headings as sections), reStructuredText, .gz of
every type, HTML with nested blocks read once, metadata from a sidecar file or front matter;
listing and removing documents through the Index API (atomic: all or nothing)."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import pytest

from sleuth.search import Index, UnknownDocument
from sleuth.search.chunking import chunk_doc
from sleuth.search.ingest import Doc, IngestReport, read_inputs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

from make_handbook import OFFICES_HTML, TRAVEL_MD, make_handbook, write_docx, write_pdf  # noqa: E402


def _read(paths: list[Path]) -> tuple[dict[str, Doc], IngestReport]:
    rep = IngestReport()
    return {d.doc_id: d for d in read_inputs(paths, report=rep)}, rep


def test_docx_headings_become_sections_and_tables_rows(tmp_path: Path) -> None:
    pytest.importorskip("docx")
    write_docx(tmp_path / "h.docx")
    docs, rep = _read([tmp_path / "h.docx"])
    assert rep.skipped == []
    doc = docs["h.docx"]
    assert doc.title == "Expense handbook"
    ps = [(p.section, p.text) for p in chunk_doc(doc)]
    assert ps[0] == ("Meals", "The daily meal allowance on a trip abroad is 60 euros.")
    assert ps[1][0] == "Taxis" and "Taxi rides are refunded with a receipt." in ps[1][1]
    assert "Lyon | 40 euros" in ps[1][1] and "Oslo | 60 euros" in ps[1][1]


def test_a_damaged_docx_is_skipped_by_name(tmp_path: Path) -> None:
    pytest.importorskip("docx")
    (tmp_path / "bad.docx").write_bytes(b"PK\x03\x04 not really a zip")
    (tmp_path / "ok.md").write_text("# Ok\n\nKept.\n")
    docs, rep = _read([tmp_path])
    assert set(docs) == {"ok.md"}
    assert rep.skipped[0][0].endswith("bad.docx") and "docx" in rep.skipped[0][1]


def test_rst_sections_and_markup(tmp_path: Path) -> None:
    (tmp_path / "g.rst").write_text(
        "=====\nGuide\n=====\n\nIntro line one\ncontinues.\n\nSetup\n-----\n\n.. note:: Be careful.\n\n"
        ".. _target:\n\nInstall it with pip.\n\nUsage\n~~~~~\n\nRun it.\n"
    )
    docs, _ = _read([tmp_path])
    doc = docs["g.rst"]
    assert doc.title == "Guide"
    assert [(p.section, p.text) for p in chunk_doc(doc)] == [
        ("Guide", "Intro line one continues."),
        ("Setup", "Be careful.\n\nInstall it with pip."),
        ("Usage", "Run it."),
    ]


def test_gz_of_every_document_type(tmp_path: Path) -> None:
    pytest.importorskip("docx")
    src = tmp_path / "src"
    make_handbook(src)
    gz = tmp_path / "gz"
    gz.mkdir()
    for f in src.iterdir():
        if f.name != "sleuth-metadata.toml":
            (gz / (f.name + ".gz")).write_bytes(gzip.compress(f.read_bytes()))
    (gz / "notes.txt.gz").write_bytes(gzip.compress(b"Plain notes about owls."))
    (gz / "guide.rst.gz").write_bytes(gzip.compress(b"Title\n=====\n\nBody.\n"))
    plain, _ = _read([src])
    docs, rep = _read([gz])
    assert rep.skipped == []
    assert set(docs) == {f"{k}.gz" for k in plain} | {"notes.txt.gz", "guide.rst.gz"}
    for k, d in plain.items():
        assert [(p.section, p.text) for p in chunk_doc(docs[k + ".gz"])] == [(p.section, p.text) for p in chunk_doc(d)]
    assert docs["notes.txt.gz"].title == "notes" and docs["guide.rst.gz"].title == "Title"


def test_nested_html_blocks_are_read_once(tmp_path: Path) -> None:
    (tmp_path / "o.html").write_text(OFFICES_HTML)
    (tmp_path / "n.html").write_text(
        "<html><body><ul><li>Item one <p>inner para</p><ul><li>sub item</li></ul></li></ul>"
        "<blockquote><p>Quoted once.</p></blockquote><table><tr><td><p>Cell text.</p></td></tr></table></body></html>"
    )
    docs, _ = _read([tmp_path])
    text = " ".join(p.text for p in chunk_doc(docs["o.html"]))
    assert text.count("Claire Dubois heads the Lyon office.") == 1
    assert text.count("She joined Northwind in 2015.") == 1
    assert "Home | Offices" not in text and "Northwind internal" not in text
    nested = " ".join(p.text for p in chunk_doc(docs["n.html"]))
    for once in ("inner para", "sub item", "Quoted once.", "Cell text."):
        assert nested.count(once) == 1, (once, nested)


def test_sidecar_and_front_matter_metadata(tmp_path: Path) -> None:
    pytest.importorskip("docx")
    d = make_handbook(tmp_path / "h")
    (d / "sub").mkdir()
    (d / "sub" / "sleuth-metadata.toml").write_text('["*.md"]\nversion = "2026"\nteam = "ops"\n')
    (d / "sub" / "fm.md").write_text(
        "---\ntitle: Front matter wins\nregion: 'apac'\nacl: [hr, finance]\n---\n# Heading\n\nBody text.\n"
    )
    (d / "sub" / "plain.md").write_text(TRAVEL_MD)
    docs, rep = _read([d])
    assert rep.skipped == [] and "sleuth-metadata.toml" not in docs
    fm = docs["sub/fm.md"]
    # the deeper sidecar over the top one, the file's own front matter over both
    assert (fm.title, fm.version, fm.region, fm.acl, fm.metadata) == (
        "Front matter wins", "2026", "apac", ["finance", "hr"], {"team": "ops"},
    )  # fmt: skip
    assert "title:" not in " ".join(p.text for p in chunk_doc(fm))
    plain = docs["sub/plain.md"]
    assert (plain.version, plain.region, plain.acl) == ("2026", "global", ["all"])
    assert docs["security.pdf"].acl == ["it"]
    assert docs["travel-policy.md"].region == "eu"
    ix = Index.build([d], tmp_path / "ix")
    from sleuth.search import Filters

    hits = ix.search("body text heading", 5, Filters.parse(["acl=hr", "region=apac"]))
    assert [p.doc_id for p in hits] == ["sub/fm.md"]
    assert not ix.search("encryption laptops", 5, Filters.parse(["acl=all"]))  # security.pdf is acl=it only


def test_a_bad_sidecar_skips_its_files_by_name(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\nText.\n")
    (tmp_path / "sleuth-metadata.toml").write_text("[defaults\nversion = 1\n")
    docs, rep = _read([tmp_path])
    assert docs == {}
    assert "sleuth-metadata.toml is not valid TOML" in rep.skipped[0][1]


def test_index_documents_and_atomic_remove(tmp_path: Path) -> None:
    pytest.importorskip("docx")
    d = make_handbook(tmp_path / "h")
    write_pdf(d / "extra.pdf", ["An extra page about owls."])
    ix = Index.build([d], tmp_path / "ix")
    listed = {x["id"]: x for x in ix.documents()}
    assert set(listed) == {"travel-policy.md", "offices.html", "security.pdf", "expense-handbook.docx", "extra.pdf"}
    assert sum(x["passages"] for x in listed.values()) == ix.manifest["passages"]
    gen = ix.gen.name
    with pytest.raises(UnknownDocument, match=r"'nope\.md'"):
        ix.remove(["offices.html", "nope.md"])
    assert (ix.root / "CURRENT").read_text().strip() == gen, "nothing is published when a name matches nothing"
    assert len(Index.open(ix.root).documents()) == 5
    # by id, by absolute path and by a path relative to the input folder
    rep = ix.remove(["offices.html", str(d / "extra.pdf")])
    assert (rep.docs_removed, ix.manifest["docs"]) == (2, 3)
    assert not [p for p in ix.search("Claire Dubois Lyon office", 5) if p.doc_id == "offices.html"]
    again = Index.open(ix.root)
    assert {x["id"] for x in again.documents()} == {"travel-policy.md", "security.pdf", "expense-handbook.docx"}
    # the removed file comes back with add (it is a new document again)
    rep = again.add([d])
    assert rep.docs_added == 2 and rep.docs_unchanged == 3
    # a folder removes everything read from below it
    again.remove([str(d)])
    assert again.documents() == [] and again.manifest["passages"] == 0
