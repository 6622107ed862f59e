"""Write the example folder ``examples/handbook``: one Markdown, one HTML, one PDF and one Word
file of a made-up company's handbook, with a metadata sidecar.

    python examples/make_handbook.py [OUT_DIR]     # default: examples/handbook beside this file

The README's "your own documents" walk-through indexes this folder; tests/test_newcomer.py
writes it afresh into a temporary folder.  The Word file needs python-docx (the ``ingest``
extra); the PDF is written by hand (one page, Helvetica, no dependency).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

TRAVEL_MD = """\
# Travel policy

## Booking

Trips abroad are booked through the travel desk of the Lyon office, at least ten days before departure.

Trips inside the country are booked by the traveller on the company portal.

## Approval

Every trip abroad needs the written approval of the traveller's department head.
"""

OFFICES_HTML = """\
<!doctype html>
<html lang="en"><head><title>Our offices</title><style>body { font-family: sans-serif; }</style></head>
<body>
<nav>Home | Offices | Contact</nav>
<h1>Our offices</h1>
<h2>Lyon</h2>
<dl>
  <dt>Head of office</dt>
  <dd><p>Claire Dubois heads the Lyon office.</p><p>She joined Northwind in 2015.</p></dd>
  <dt>Address</dt>
  <dd><p>12 Rue de la Republique, Lyon.</p></dd>
</dl>
<h2>Oslo</h2>
<p>The Oslo office is headed by Lars Berg and hosts the finance department.</p>
<footer>Northwind internal</footer>
</body></html>
"""

SECURITY_PDF_LINES = [
    "Laptops must use full-disk encryption.",
    "Lost devices are reported to the security team within one hour.",
]

METADATA_TOML = """\
# Metadata for the files in this folder (sleuth index build reads it; it is not indexed itself).
[defaults]
version = "2025"
region = "global"
acl = ["all"]

["travel-policy.md"]
region = "eu"

["expense-handbook.docx"]
acl = ["all", "finance"]
owner = "finance"

["security.pdf"]
acl = ["it"]
"""


def write_pdf(path: Path, lines: list[str]) -> None:
    """A minimal valid one-page PDF with one text line per entry (offsets computed)."""
    ops = ["BT /F1 12 Tf 50 740 Td 16 TL"]
    for ln in lines:
        ops.append("(" + ln.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ") Tj T*")
    ops.append("ET")
    content = "\n".join(ops).encode("latin-1")
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Title (Security rules) >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 6 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    path.write_bytes(bytes(out))


def write_docx(path: Path) -> None:
    import docx

    d = docx.Document()
    d.core_properties.title = "Expense handbook"
    d.add_heading("Expense handbook", 0)
    d.add_heading("Meals", 1)
    d.add_paragraph("The daily meal allowance on a trip abroad is 60 euros.")
    d.add_heading("Taxis", 1)
    d.add_paragraph("Taxi rides are refunded with a receipt.")
    table = d.add_table(rows=3, cols=2)
    for r, (city, cap) in enumerate([("city", "taxi cap"), ("Lyon", "40 euros"), ("Oslo", "60 euros")]):
        table.cell(r, 0).text = city
        table.cell(r, 1).text = cap
    fixed = datetime(2025, 1, 1, tzinfo=UTC)  # the same properties on every run
    d.core_properties.created = d.core_properties.modified = fixed
    d.save(str(path))


def make_handbook(out: Path) -> Path:
    """Write the four files and the sidecar into ``out`` (created); returns ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "travel-policy.md").write_text(TRAVEL_MD, encoding="utf-8")
    (out / "offices.html").write_text(OFFICES_HTML, encoding="utf-8")
    write_pdf(out / "security.pdf", SECURITY_PDF_LINES)
    write_docx(out / "expense-handbook.docx")
    (out / "sleuth-metadata.toml").write_text(METADATA_TOML, encoding="utf-8")
    return out


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "handbook"
    print(make_handbook(target))
