"""The web page in headless Debian Chromium (driven by Playwright): ask a question with the
keyboard, watch the steps stream in, read the answer and open a citation's provenance.
A screenshot is kept in test-artifacts/web.png."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from fake_openai_server import FakeOpenAIServer
from serverkit import policy_model, running
from sleuth.llm.client import OpenAICompatLLM
from sleuth.search import open_retriever
from sleuth.server import ServerSettings, create_app
from sleuth.strategies.rat import unified_diff

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"


def wait_until(page: Any, js: str, timeout: float = 30) -> None:
    """Poll a JS expression (the page's CSP forbids eval, so no wait_for_function)."""
    end = time.monotonic() + timeout
    while not page.evaluate(f"() => Boolean({js})"):
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {js}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def browser() -> Any:
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def site(data_dir: Path, tiny_llm: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    llm = tiny_llm  # uncached: real model time between the streamed steps
    wiki = open_retriever(data_dir / "quickstart" / "wiki_passages.jsonl", cache_dir=tmp_path_factory.mktemp("idx"))
    app = create_app(ServerSettings(model="smollm2-135m", default_strategy="rag"), llm=llm, retrievers={"wiki": wiki})
    with running(app) as url:
        yield url


@pytest.mark.model
def test_ask_on_the_page_and_watch_the_answer_stream_in(browser: Any, site: str) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    console_errors: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    page.goto(site + "/")
    wait_until(page, "document.querySelectorAll('#strategy option').length > 1")
    assert page.get_by_label("Question").is_visible()
    page.get_by_label("Strategy").select_option("rag")
    page.get_by_label("Compare with").select_option("direct")
    page.get_by_label("Scope filters").fill("acl=all")
    page.locator("#settings summary").click()
    page.get_by_label("Passages per search").fill("2")
    # record when steps and answers appear, to prove the steps streamed in before the answer
    page.evaluate(
        """() => {
          window.__seen = [];
          new MutationObserver(() => {
            for (const col of document.querySelectorAll('.column')) {
              const steps = col.querySelectorAll('.step').length;
              const done = !col.querySelector('.answer').classList.contains('placeholder');
              window.__seen.push([col.id, steps, done]);
            }
          }).observe(document.getElementById('results'), {subtree: true, childList: true, attributes: true});
        }"""
    )
    q = page.get_by_label("Question")
    q.fill("Who was Evan Morris?")
    q.press("Control+Enter")  # the keyboard asks
    cols = page.locator("article.column")
    wait_until(page, "document.querySelectorAll('article.column').length === 2")
    assert cols.nth(0).locator("h2").inner_text() == "rag" and cols.nth(1).locator("h2").inner_text() == "direct"
    assert cols.nth(0).locator("ol.steps").get_attribute("aria-live") == "polite"
    wait_until(
        page,
        "[...document.querySelectorAll('article.column')].every(c => c.getAttribute('aria-busy') === 'false')",
        600,
    )
    seen = page.evaluate("window.__seen")
    rag = [s for s in seen if s[0] == "col1"]
    assert any(steps > 0 and not done for _, steps, done in rag), "no step was shown before the answer"

    rag_col = cols.nth(0)
    answer = rag_col.locator(".answer").inner_text()
    assert answer.strip() and "No answer" not in answer
    assert rag_col.locator(".finish").inner_text() == "finished"
    kinds = rag_col.locator(".step .kind").all_inner_texts()
    assert kinds[0] == "Start" and "Search" in kinds and "Model call" in kinds
    # a numbered citation opens the passage with its provenance
    cites = rag_col.locator("details.citation")
    assert cites.count() >= 1
    first = cites.nth(0)
    assert first.locator(".num").inner_text() == "[1]"
    first.locator("summary").click()
    assert first.get_attribute("open") is not None
    prov = first.locator("dl.prov").inner_text()
    assert "source" in prov and "wiki_passages.jsonl" in prov
    assert first.locator("blockquote.passage").inner_text().strip()
    assert cols.nth(1).locator(".finish").inner_text() == "finished"

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web.png"), full_page=True)
    assert all(u.startswith(site) for u in requests), [u for u in requests if not u.startswith(site)]
    assert not console_errors, console_errors
    page.close()


def test_rat_revisions_show_as_diffs_and_search_o1_documents_as_quotes(browser: Any) -> None:
    """The page's renderers on the event shapes the strategies emit (the page is served by a
    server without a model: rendering needs none)."""
    app = create_app(ServerSettings(), open_on_startup=False)
    with running(app) as url:
        page = browser.new_page()
        page.goto(url + "/")
        before, after = "Paris is in Germany.\nIt is old.", "Paris is in France.\nIt is old."
        page.evaluate(
            """([diff]) => {
              const col = newColumn('rat');
              document.getElementById('results').append(col.node);
              addStep(col, {kind: 'draft', t: 0.1, data: {text: 'Paris is in Germany.'}});
              addStep(col, {kind: 'revision', t: 0.5, data: {step: 1, query: 'Paris country', diff, changed: true}});
              addStep(col, {kind: 'revision', t: 0.6, data: {step: 2, skipped: true, reason: 'no passages', diff: ''}});
              addStep(col, {kind: 'reason_in_documents', t: 0.9,
                            data: {query: 'capital of France', info: 'Paris is the capital.', passages: ['d1#0']}});
            }""",
            [unified_diff(before, after)],
        )
        assert page.locator(".diff del").inner_text() == "Paris is in Germany."
        assert page.locator(".diff ins").inner_text() == "Paris is in France."
        assert "skipped" in page.locator(".step-revision").nth(1).inner_text()
        assert page.locator(".condensed blockquote").inner_text() == "Paris is the capital."
        assert "d1#0" in page.locator(".condensed").inner_text()
        page.close()


def test_page_works_with_an_api_key(browser: Any) -> None:
    app = create_app(ServerSettings(api_keys=("page-key",)), open_on_startup=False)
    with running(app) as url:
        page = browser.new_page()
        page.goto(url + "/")
        alert = page.get_by_role("alert")
        wait_until(page, "document.getElementById('form-error').textContent.includes('API key')")
        assert "API key" in alert.inner_text()
        page.get_by_label("API key").fill("page-key")
        page.get_by_label("API key").press("Tab")  # change event: reload the options with the key
        t = time.monotonic()
        wait_until(page, "document.querySelectorAll('#strategy option').length > 1")
        assert time.monotonic() - t < 10
        assert alert.inner_text() == ""
        page.close()


def test_a_conversation_on_the_page_over_a_chinese_index(browser: Any, data_dir: Path, tmp_path: Path) -> None:
    """Issue 54: the page is a thread with follow-ups and a "new conversation" button; issue 55: a
    Chinese index gets a Chinese placeholder and a CJK font stack, the header counts the run in progress,
    and no step reads "null"."""
    policy = open_retriever(data_dir / "policy_zh" / "corpus.jsonl", cache_dir=tmp_path / "idx")
    with FakeOpenAIServer(script=policy_model(1.0)) as srv:
        llm = OpenAICompatLLM(srv.base_url, "fake-model")
        app = create_app(ServerSettings(default_strategy="rag", max_concurrency=4), llm=llm,
                         retrievers={"policy": policy})  # fmt: skip
        with running(app) as url:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(url + "/")
            wait_until(page, "document.documentElement.lang === 'zh-CN'")
            q = page.get_by_label("Question")
            assert "例如" in q.get_attribute("placeholder")
            font = page.evaluate("getComputedStyle(document.body).fontFamily")
            for name in ("PingFang SC", "Microsoft YaHei", "Noto Sans CJK SC", "WenQuanYi Micro Hei"):
                assert name in font, font
            assert page.locator("#new").is_disabled()
            page.get_by_label("Scope filters").fill("version=2025 acl=all")

            q.fill("国内出差的报销期限是多久？")
            q.press("Control+Enter")
            wait_until(page, "document.getElementById('health').textContent.includes('1/4 running')", 20)
            wait_until(page, "document.querySelector('#turn1 article').getAttribute('aria-busy') === 'false'", 60)
            turn1 = page.locator("#turn1")
            assert "30个自然日" in turn1.locator(".answer").inner_text()
            wait_until(page, "document.getElementById('health').textContent.includes('0/4 running')", 10)
            assert q.input_value() == "" and "那出境的呢" in q.get_attribute("placeholder")

            q.fill("那出境的呢？")
            q.press("Control+Enter")
            wait_until(page, "document.querySelector('#turn2 article')?.getAttribute('aria-busy') === 'false'", 60)
            turn2 = page.locator("#turn2")
            assert turn2.locator(".you").inner_text().endswith("那出境的呢？")
            kinds = turn2.locator(".step .kind").all_inner_texts()
            assert kinds[:3] == ["Start", "Model call", "Follow-up read as"], kinds
            assert "境外出差的报销期限是多久？" in turn2.locator(".step-rewrite").inner_text()
            assert "回国后60个自然日" in turn2.locator(".answer").inner_text()
            assert "境外差旅费用管理细则" in turn2.locator(".citations").inner_text()
            assert "30个自然日" in turn1.locator(".answer").inner_text()  # the thread keeps turn 1
            rewrites = [r["body"] for r in srv.requests if "完整问题" in str(r["body"])]
            assert len(rewrites) == 1 and "用户：国内出差的报销期限是多久？" in rewrites[0]["messages"][0]["content"]
            steps = page.locator("#results").inner_text()
            assert "null" not in steps and "undefined" not in steps

            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "web-conversation.png"), full_page=True)
            page.locator("#new").click()
            assert page.locator("#results .turn").count() == 0 and page.locator("#new").is_disabled()
            n = len(srv.requests)
            q.fill("那出境的呢？")
            q.press("Control+Enter")
            wait_until(page, "document.querySelector('#turn3 article')?.getAttribute('aria-busy') === 'false'", 60)
            assert "Follow-up read as" not in page.locator("#turn3 .steps").inner_text()
            assert not any("完整问题" in str(r["body"]) for r in srv.requests[n:])
            # a step whose field is null shows nothing for it (was "Intermediate answer 是null")
            page.evaluate(
                """() => {
                  const col = newColumn('self-ask');
                  document.getElementById('results').append(col.node);
                  addStep(col, {kind: 'intermediate_answer', t: 0.1, data: {answer: '是', source: null}});
                  addStep(col, {kind: 'note', t: 0.2, data: {type: null, message: '好'}});
                }"""
            )
            assert page.locator(".step-intermediate_answer .step-body").inner_text() == "是"
            assert page.locator(".step-note .step-body").last.inner_text() == "好"
            assert not errors, errors
            page.close()


def test_the_quick_start_corpus_is_named_on_the_page(browser: Any, data_dir: Path, tmp_path: Path) -> None:
    """Issue 55: a server started with no --index serves the quick-start corpus and the page says so
    beside the source (the note comes from GET /v1/sources)."""
    from sleuth.server.settings import QUICKSTART_NOTE

    wiki = open_retriever(data_dir / "quickstart" / "wiki_passages.jsonl", cache_dir=tmp_path / "idx")
    with FakeOpenAIServer() as srv:
        llm = OpenAICompatLLM(srv.base_url, "fake-model")
        settings = ServerSettings(default_strategy="rag", quickstart_source="quickstart")
        with running(create_app(settings, llm=llm, retrievers={"quickstart": wiki})) as url:
            page = browser.new_page()
            page.goto(url + "/")
            wait_until(page, "!document.querySelector('#source-note').hidden")
            assert page.locator("#source-note").inner_text() == QUICKSTART_NOTE
            page.close()
