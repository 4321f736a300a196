"""`signoff sandbox` in a real browser: what a newcomer clicks, and what they see.

The sandbox runs as its own process (`python -m bot sandbox --port 0`), exactly
as the README's quickstart starts it, on a fresh SQLite file. Chromium (Debian's,
at /usr/bin/chromium) drives the page through Playwright. The screenshots the
README shows are taken here, into a temporary folder (a test run leaves the
tree as it was); ``make screenshots`` points SIGNOFF_SCREENSHOTS_DIR at
docs/screenshots to refresh the README's pictures. Their folder is printed.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPO = Path(__file__).resolve().parents[2]
README_PICTURES = REPO / "docs" / "screenshots"
ASK = "/signoff ask draft a quote for Henderson, 200 of SKU-4411"
APPROVE = "button[data-action-id='signoff.approve']"
DECLINE = "button[data-action-id='signoff.decline']"
#: Long enough for a click to go through the bot, the run and the outbox, on a slow CI box.
WAIT_MS = 20_000
#: A rich_text block with each kind of element and style the page renders.
RICH_TEXT = {"type": "rich_text", "block_id": "rt", "elements": [
    {"type": "rich_text_section", "elements": [
        {"type": "text", "text": "Quote "},
        {"type": "text", "text": "Q-1", "style": {"bold": True}},
        {"type": "text", "text": " for "},
        {"type": "user", "user_id": "U0RILEY"},
        {"type": "text", "text": " was "},
        {"type": "text", "text": "$2,375.00", "style": {"strike": True}},
        {"type": "text", "text": " "},
        {"type": "text", "text": "now", "style": {"italic": True}},
        {"type": "text", "text": " <script>x</script> & "},
        {"type": "text", "text": "SKU-4411", "style": {"code": True}},
        {"type": "emoji", "name": "white_check_mark", "unicode": "2705"},
        {"type": "emoji", "name": "tada", "unicode": "1f389"},
        {"type": "link", "url": "https://example.invalid/q", "text": "the quote"},
        {"type": "date", "timestamp": 1700000000, "format": "{date_num}", "fallback": "2023-11-14"},
    ]},
    {"type": "rich_text_section", "elements": [{"type": "text", "text": "second paragraph"}]},
    {"type": "rich_text_list", "style": "bullet", "elements": [
        {"type": "rich_text_section", "elements": [{"type": "text", "text": "gold (10%)"}]},
        {"type": "rich_text_section", "elements": [{"type": "text", "text": "silver (5%)"}]}]},
    {"type": "rich_text_list", "style": "ordered", "indent": 1, "elements": [
        {"type": "rich_text_section", "elements": [{"type": "text", "text": "first"}]}]},
    {"type": "rich_text_quote", "elements": [{"type": "text", "text": "quoted"}]},
    {"type": "rich_text_preformatted", "elements": [{"type": "text", "text": "a <b>\nb"}]},
]}
START_SECONDS = 60

# Variables that would point the sandbox somewhere else than its own offline world.
_FOREIGN = ("SLACK_", "DATABASE_URL", "SIGNOFF_APP", "SIGNOFF_APPROVALS_CHANNEL", "SIGNOFF_MODEL")

if not CHROMIUM.exists():
    if os.environ.get("SIGNOFF_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{CHROMIUM} is missing and SIGNOFF_REQUIRE_BROWSER=1: "
                    "apt-get install -y chromium", pytrace=False)
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)

sync_api = pytest.importorskip("playwright.sync_api")


class Sandbox:
    """A `signoff sandbox` process, and where its page is."""

    def __init__(self, tmp: Path, app: str | None = None,
                 settings: dict[str, str] | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(_FOREIGN)}
        env["PYTHONUNBUFFERED"] = "1"
        env.update(settings or {})
        self.db = tmp / "sandbox.db"
        args = [sys.executable, "-m", "bot", "sandbox", "--port", "0",
                "--database-url", f"sqlite+aiosqlite:///{self.db}"]
        if app:
            args += ["--app", app]
        self.output: list[str] = []
        self.proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self._found = threading.Event()
        self.url = ""
        threading.Thread(target=self._read, daemon=True).start()
        if not self._found.wait(START_SECONDS):
            self.stop()
            pytest.fail("the sandbox did not print its URL:\n" + "".join(self.output))

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            if not self.url and (match := re.search(r"open (http://127\.0\.0\.1:\d+/)", line)):
                self.url = match[1]
                self._found.set()

    def quotes_sent(self) -> int:
        """Quotes the quotes app's CRM has sent, read from the sandbox's own database."""
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True) as db:
            return int(db.execute(
                "SELECT count(*) FROM crm_quotes WHERE status = 'sent'").fetchone()[0])

    def latest_run(self) -> tuple[str, str]:
        """(id, state) of the run asked last, read from the sandbox's own database."""
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True) as db:
            found = db.execute("SELECT id, state FROM runs ORDER BY started_at DESC LIMIT 1")
            run_id, state = found.fetchone()
            return str(run_id), str(state)

    def latest_run_becomes(self, expected: tuple[str, str]) -> tuple[str, str]:
        """``latest_run()`` once it is ``expected``, or as it is after ``WAIT_MS``: the page can
        show a tool's effect before the run's last model turn has ended it."""
        deadline = time.monotonic() + WAIT_MS / 1000
        while (found := self.latest_run()) != expected and time.monotonic() < deadline:
            time.sleep(0.05)
        return found

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def quotes_sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    sandbox = Sandbox(tmp_path)
    yield sandbox
    sandbox.stop()
    assert sandbox.proc.returncode == 0, "".join(sandbox.output)


def _open(browser: Any, url: str) -> Any:
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    # Offline: anything addressed beyond 127.0.0.1 fails the test instead of leaving the machine.
    leaks: list[str] = []

    def refuse(route: Any) -> None:
        leaks.append(route.request.url)
        route.abort()

    page.route(re.compile(r"^(?!http://127\.0\.0\.1[:/]).*"), refuse)
    page.leaks = leaks
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']")
    return page


def _ask(page: Any, text: str = ASK) -> None:
    page.fill("[data-testid=command-input]", text)
    page.press("[data-testid=command-input]", "Enter")


def _open_cards(page: Any) -> Any:
    """Cards still waiting for a decision: channel messages and thread replies with Approve."""
    return page.locator("[data-testid=message]").filter(has=page.locator(APPROVE))


def _card(page: Any, ts: str) -> Any:
    return page.locator(f"[data-testid=message][data-ts='{ts}']")


def _thread(page: Any, ts: str) -> Any:
    return page.locator(f"[data-testid=thread][data-parent='{ts}']")


def _sent(page: Any, account: str = "Henderson") -> int:
    cell = page.locator(f"[data-testid=quotes-sent][data-account='{account}']")
    return int(cell.inner_text())


def _new_card(page: Any, before: set[str]) -> Any:
    """Wait for a card with buttons that was not there before; return its locator."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while time.monotonic() < deadline:
        for ts in _open_cards(page).evaluate_all("ns => ns.map(n => n.dataset.ts)"):
            if ts not in before:
                return _card(page, ts)
        page.wait_for_timeout(100)
    raise AssertionError("no new approval card appeared:\n" + page.inner_text("#messages"))


def _open_ts(page: Any) -> set[str]:
    return set(_open_cards(page).evaluate_all("ns => ns.map(n => n.dataset.ts)"))


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SIGNOFF_SCREENSHOTS_DIR if set (``make screenshots``), else a temporary folder."""
    chosen = os.environ.get("SIGNOFF_SCREENSHOTS_DIR")
    return Path(chosen).resolve() if chosen else tmp_path_factory.mktemp("screenshots")


def _pictures() -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(README_PICTURES.glob("*.png"))}


def _shot(page: Any, folder: Path, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / name))


def test_sandbox__quote_approved_stale_double_click_refused(
    browser: Any, quotes_sandbox: Sandbox, screenshots: Path
) -> None:
    expect = sync_api.expect
    expect.set_options(timeout=WAIT_MS)
    pictures = _pictures()
    page = _open(browser, quotes_sandbox.url)
    expect(page.locator("[data-testid=app-ref]")).to_have_text("examples.quotes:app")
    expect(page.locator("[data-testid=acting-user]")).to_have_value("U0RILEY")
    assert _sent(page) == 0

    # 1. Ask; the card shows the terms; approve; the card says so and the answer is in its thread.
    _ask(page)
    card = _new_card(page, set())
    ts = card.get_attribute("data-ts")
    expect(card).to_contain_text("send_quote needs approval")
    expect(card).to_contain_text("@Riley asked:")
    expect(card).to_contain_text("Discount tier: gold (10%)")
    expect(card).to_contain_text("Total: $2,250.00")
    expiry = card.locator("time.date")
    expect(expiry).to_contain_text("expires")
    expect(card).not_to_contain_text("<!date")
    _shot(page, screenshots, "quickstart-card.png")

    card.locator(APPROVE).click()
    expect(card.locator(APPROVE)).to_have_count(0)
    expect(card).to_contain_text("Approved by @Riley")
    answer = _thread(page, ts)
    expect(answer).to_contain_text("answered")
    expect(answer).to_contain_text("Evidence")
    expect(answer).to_contain_text("send_quote")
    expect(page.locator("[data-testid=quotes-sent][data-account='Henderson']")).to_have_text("1")
    _shot(page, screenshots, "quickstart-approved.png")

    # 2. Ask again; the tier changes while the card waits; approving shows the difference
    #    as a new card in the thread, and sends nothing.
    _ask(page)
    waiting = _new_card(page, set())
    waiting_ts = waiting.get_attribute("data-ts")
    page.select_option("[data-testid=crm-tier][data-account='Henderson']", "silver")
    expect(page.locator("[data-testid=log-entry]").first).to_contain_text("tier silver")
    waiting.locator(APPROVE).click()
    expect(waiting).to_contain_text("Details changed while waiting")
    expect(waiting.locator(APPROVE)).to_have_count(0)
    diff = _thread(page, waiting_ts).locator("[data-testid=message]").filter(
        has=page.locator(APPROVE))
    expect(diff).to_have_count(1)
    expect(diff).to_contain_text("Discount tier")
    expect(diff).to_contain_text("gold (10%) → silver (5%)")
    page.wait_for_timeout(1500)  # a send, if one were coming, would show by now
    expect(page.locator("[data-testid=quotes-sent][data-account='Henderson']")).to_have_text("1")
    diff_ts = diff.get_attribute("data-ts")
    diff.scroll_into_view_if_needed()
    _shot(page, screenshots, "quickstart-diff.png")

    # 3. A double-click on a fresh card sends exactly one quote.
    _ask(page)
    fresh = _new_card(page, {diff_ts})
    fresh_ts = fresh.get_attribute("data-ts")
    fresh.locator(APPROVE).dblclick()
    expect(fresh).to_contain_text("Approved by @Riley")
    expect(_thread(page, fresh_ts)).to_contain_text("answered")
    page.wait_for_timeout(1500)
    expect(page.locator("[data-testid=quotes-sent][data-account='Henderson']")).to_have_text("2")
    expect(page.locator("[data-testid=quotes-sent-total]")).to_have_text("2")

    # 4. Someone who is not an approver clicks Approve: refused, privately; nothing changes.
    page.select_option("[data-testid=acting-user]", "U0SAM")
    still_open = _card(page, diff_ts)
    expect(still_open.locator(APPROVE)).to_have_count(1)
    still_open.locator(APPROVE).click()
    refusal = page.locator("[data-testid=ephemeral]").filter(has_text="can't decide")
    expect(refusal).to_have_count(1)
    expect(refusal).to_contain_text("Only visible to you")
    expect(refusal).to_contain_text("only @Riley can")
    expect(still_open.locator(APPROVE)).to_have_count(1)
    refusal.scroll_into_view_if_needed()
    _shot(page, screenshots, "quickstart-refusal.png")
    assert _sent(page) == 2

    # Riley does not see Sam's refusal; Riley declines with a reason through the modal.
    page.select_option("[data-testid=acting-user]", "U0RILEY")
    expect(page.locator("[data-testid=ephemeral]").filter(has_text="can't decide")).to_have_count(0)
    _card(page, diff_ts).locator(DECLINE).click()
    modal = page.locator("[data-testid=modal]")
    expect(modal).to_be_visible()
    modal.locator("[data-testid=modal-input]").fill("Silver pricing needs a new quote")
    modal.locator("[data-testid=modal-submit]").click()
    expect(modal).to_be_hidden()
    expect(_card(page, diff_ts)).to_contain_text("Declined by @Riley")
    expect(_card(page, diff_ts)).to_contain_text("Silver pricing needs a new quote")
    # The agent is told the reason, and its thread says so; nothing more is sent.
    expect(_thread(page, waiting_ts)).to_contain_text("declined")
    expect(_thread(page, waiting_ts).locator("[data-testid=message]").last).to_contain_text(
        "Silver pricing needs a new quote")
    assert _sent(page) == 2

    assert page.leaks == [], f"requests beyond 127.0.0.1: {page.leaks}"
    print(f"\nscreenshots: {screenshots}")
    assert (screenshots / "quickstart-card.png").exists()
    if screenshots != README_PICTURES.resolve():
        assert _pictures() == pictures, "a test run rewrote the README's pictures"
    page.close()


def test_sandbox__credit_hold_blocks_the_send(
    browser: Any, quotes_sandbox: Sandbox, screenshots: Path
) -> None:
    """Put the account on credit hold while its card waits: Approve is refused by the guard."""
    expect = sync_api.expect
    expect.set_options(timeout=WAIT_MS)
    page = _open(browser, quotes_sandbox.url)
    hold = page.locator("[data-testid=crm-hold][data-account='Henderson']")
    expect(hold).not_to_be_checked()

    _ask(page)
    card = _new_card(page, set())
    ts = card.get_attribute("data-ts")
    expect(card).to_contain_text("Total: $2,250.00")

    hold.check()
    expect(page.locator("[data-testid=log-entry]").first).to_contain_text(
        "CRM Henderson: credit hold on")
    expect(hold).to_be_checked()

    card.locator(APPROVE).click()
    expect(card.locator(APPROVE)).to_have_count(0)
    expect(card).to_contain_text("Blocked by a check")
    expect(card).to_contain_text("Henderson is on credit hold")
    expect(card).not_to_contain_text("Approved by")
    page.wait_for_timeout(1500)  # a send, if one were coming, would show by now
    expect(page.locator("[data-testid=quotes-sent][data-account='Henderson']")).to_have_text("0")
    expect(page.locator("[data-testid=quotes-sent-total]")).to_have_text("0")
    assert quotes_sandbox.quotes_sent() == 0
    # No quote went out, so the run failed, whatever the agent's last word: the thread
    # says what never ran, what the agent said, and what did run.
    answer = _thread(page, ts)
    expect(answer).to_contain_text("failed")
    expect(answer).not_to_contain_text("answered")
    expect(answer).to_contain_text("Never ran: send_quote")
    expect(answer).to_contain_text("I did not finish: Henderson is on credit hold")
    expect(answer).to_contain_text("draft_quote")
    card.scroll_into_view_if_needed()
    _shot(page, screenshots, "quickstart-credit-hold.png")

    assert page.leaks == [], f"requests beyond 127.0.0.1: {page.leaks}"
    page.close()


def test_sandbox__purchase_app_selectable(browser: Any, tmp_path: Path) -> None:
    sandbox = Sandbox(tmp_path, app="examples.purchase:app")
    try:
        expect = sync_api.expect
        expect.set_options(timeout=WAIT_MS)
        page = _open(browser, sandbox.url)
        expect(page.locator("[data-testid=app-ref]")).to_have_text("examples.purchase:app")
        expect(page.locator("[data-testid=world-panel]")).to_be_hidden()
        # The page offers the purchase app's own questions, and nothing of the quotes app's.
        box = page.locator("[data-testid=command-input]")
        expect(box).to_have_attribute("placeholder", "/signoff ask buy 2 of KB-100 and 1 of MN-300")
        examples = page.locator("[data-testid=example]")
        expect(examples).to_have_text(["/signoff ask buy 2 of KB-100 and 1 of MN-300",
                                       "/signoff ask is MN-300 in stock?"])
        assert "Henderson" not in page.locator("[data-testid=hint]").inner_text()
        assert "Henderson" not in (box.get_attribute("placeholder") or "")
        examples.first.click()  # an example fills the box; Enter sends it
        expect(box).to_have_value("/signoff ask buy 2 of KB-100 and 1 of MN-300")
        page.press("[data-testid=command-input]", "Enter")
        card = _new_card(page, set())
        expect(card).to_contain_text("approve_cart_mandate needs approval")
        expect(card).to_contain_text("Total: $457.00")
        # The mandate is marked dangerous: Approve asks "are you sure?" first, as Slack does.
        card.locator(APPROVE).click()
        confirm = page.locator("[data-testid=confirm]")
        expect(confirm).to_contain_text("is marked dangerous")
        confirm.locator("[data-testid=confirm-ok]").click()
        expect(card).to_contain_text("Approved by @Riley")
        expect(_thread(page, card.get_attribute("data-ts"))).to_contain_text("complete_checkout")
        assert page.leaks == [], f"requests beyond 127.0.0.1: {page.leaks}"
        page.close()
    finally:
        sandbox.stop()
    assert sandbox.proc.returncode == 0, "".join(sandbox.output)


def test_sandbox__mrkdwn_and_rich_text_render_markup_and_keep_text_inert(
    browser: Any, quotes_sandbox: Sandbox
) -> None:
    page = _open(browser, quotes_sandbox.url)
    html = page.evaluate(
        "t => mrkdwn(t)",
        "*Total* _now_ ~was~ `x&lt;y` &lt;script&gt;alert(1)&lt;/script&gt; &amp; "
        "<@U0RILEY> <https://example.invalid/q|the quote> :white_check_mark:\n>quoted "
        "<!date^1700000000^{date_num}|2023-11-14 UTC> no_longer_permitted",
    )
    assert "<b>Total</b>" in html and "<i>now</i>" in html and "<s>was</s>" in html
    assert "<code>x&lt;y</code>" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp;" in html and "<script" not in html
    assert '<span class="mention">@Riley</span>' in html
    assert '<a href="https://example.invalid/q"' in html and ">the quote</a>" in html
    assert 'title=":white_check_mark:"' in html
    assert '<div class="quote">quoted ' in html
    assert re.search(r'<time class="date"[^>]*>2023-11-1[345]</time>', html)
    assert "no_longer_permitted" in html  # underscores inside a word are not italics

    # A rich_text block, among the other blocks of a card, as the page shows it.
    html, text = page.evaluate(
        """blocks => {
            const node = renderMessage({channel: "C0APPROVALS", ts: "1700000000.000100",
                                        text: "fallback", blocks});
            node.dataset.testid = "probe";
            document.getElementById("messages").appendChild(node);
            const rich = node.querySelector(".b-rich_text");
            return [rich.innerHTML, node.querySelector(".content").innerText];
        }""",
        [{"type": "header", "text": {"type": "plain_text", "text": "Quote terms"}},
         {"type": "section", "fields": [{"type": "mrkdwn", "text": "*Account*: Henderson"}]},
         RICH_TEXT,
         {"type": "context", "elements": [{"type": "mrkdwn", "text": "after the rich text"}]}],
    )
    assert "<b>Q-1</b>" in html and "<i>now</i>" in html and "<s>$2,375.00</s>" in html
    assert "<code>SKU-4411</code>" in html
    assert '<span class="mention">@Riley</span>' in html
    assert '<a href="https://example.invalid/q"' in html and ">the quote</a>" in html
    assert 'title=":white_check_mark:"' in html and "\U0001f389" in html
    assert re.search(r'<time class="date">2023-11-1[345]</time>', html)
    assert "&lt;script&gt;x&lt;/script&gt; &amp;" in html and "<script" not in html
    assert '<ul style="margin-left:0em"><li><div>gold (10%)</div></li>' in html
    assert '<ol style="margin-left:1.2em"><li><div>first</div></li></ol>' in html
    assert '<div class="quote">quoted</div>' in html
    assert "<pre>a &lt;b&gt;<br>b</pre>" in html
    # What a reader sees: each section and list item on its own line, between the other blocks.
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    assert lines[:2] == ["Quote terms", "Account: Henderson"], lines
    assert lines[2].startswith("Quote Q-1 for @Riley was $2,375.00 now <script>x</script> & ")
    assert lines[3:10] == ["second paragraph", "gold (10%)", "silver (5%)", "first", "quoted",
                           "a <b>", "b"], lines
    assert lines[10:] == ["after the rich text"], lines
    assert "unsupported" not in html and "[rich_text block]" not in text
    page.close()


#: Short enough that a card expires while the test waits, long enough to click one first.
SHORT_TTL_MINUTES = 0.25


def test_sandbox__cancel_expiry_and_continue(browser: Any, tmp_path: Path) -> None:
    """Cancel a waiting run; let another card expire, continue that run, and approve."""
    sandbox = Sandbox(tmp_path, settings={
        "SIGNOFF_SUSPENSION_TTL_MINUTES": str(SHORT_TTL_MINUTES),
        "SIGNOFF_EXPIRY_INTERVAL_SECONDS": "1"})
    try:
        expect = sync_api.expect
        expect.set_options(timeout=WAIT_MS)
        page = _open(browser, sandbox.url)

        # Cancel: the card loses its buttons and says who cancelled; nothing is sent.
        _ask(page)
        cancelled = _new_card(page, set())
        run_id, state = sandbox.latest_run()
        assert state == "suspended"
        _ask(page, f"/signoff cancel {run_id}")
        expect(cancelled.locator(APPROVE)).to_have_count(0)
        expect(cancelled).to_contain_text("Cancelled by @Riley")
        told = page.locator("[data-testid=ephemeral]").filter(has_text=run_id)
        expect(told).not_to_have_count(0)
        assert sandbox.latest_run() == (run_id, "failed")  # failed, for the reason "cancelled"

        # Expiry: nobody decides in time; the card says so and its thread tells the requester.
        _ask(page)
        expiring = _new_card(page, _open_ts(page))
        expiring_ts = expiring.get_attribute("data-ts")
        run_id, _ = sandbox.latest_run()
        expect(expiring.locator(APPROVE)).to_have_count(
            0, timeout=SHORT_TTL_MINUTES * 60_000 + WAIT_MS)
        expect(expiring).to_contain_text("Expired")
        expect(_thread(page, expiring_ts)).to_contain_text("expired")
        assert sandbox.latest_run() == (run_id, "halted")
        assert _sent(page) == 0

        # Continue: the same run asks again with a fresh card, and an approval sends once.
        before = _open_ts(page)
        _ask(page, f"/signoff continue {run_id}")
        fresh = _new_card(page, before)
        fresh.locator(APPROVE).click()
        expect(fresh).to_contain_text("Approved by @Riley")
        expect(page.locator("[data-testid=quotes-sent-total]")).to_have_text("1")
        assert sandbox.latest_run_becomes((run_id, "answered")) == (run_id, "answered")
        assert page.leaks == [], f"requests beyond 127.0.0.1: {page.leaks}"
        page.close()
    finally:
        sandbox.stop()
    assert sandbox.proc.returncode == 0, "".join(sandbox.output)
