"""The console in a real browser: Debian's headless chromium driven by Playwright.

Screenshots of each page go to `test-screenshots/console/` (git-ignored) for a
reviewer. Playwright's sync API runs in a worker thread (its own event loop) while
the broker runs in the test's Trio loop.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import trio
from playwright.sync_api import Page, expect, sync_playwright

from broker.client.cli import main as client_main
from broker.server import KafkaServer
from tests.console.console_harness import (
    SECURED,
    admin_cli,
    allow,
    console_broker,
    console_url,
    produce_plain,
    produce_transaction,
)

CHROMIUM = "/usr/bin/chromium"
SHOTS = Path(__file__).resolve().parents[2] / "test-screenshots" / "console"
TIMEOUT_MS = 20_000


@contextmanager
def chromium_page() -> Iterator[Page]:
    """A laptop-sized page of Debian's chromium (no browser downloaded by Playwright)."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 800})
            page.set_default_timeout(TIMEOUT_MS)
            yield page
        finally:
            browser.close()


def _shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def _walk_through(
    url: str, produced: threading.Event, consumed: threading.Event, lag_zero_after: threading.Event
) -> None:
    with chromium_page() as page:
        page.goto(url + "/console/")
        expect(page.get_by_role("heading", name="Overview")).to_be_visible()
        expect(page.get_by_role("cell", name="127.0.0.1")).to_be_visible()
        _shot(page, "1-overview")

        page.get_by_role("link", name="Topics").click()
        page.get_by_label("Name").fill("orders")
        page.get_by_label("Partitions").fill("1")
        page.get_by_role("button", name="Create topic").click()
        expect(page.get_by_role("heading", name="Topic orders")).to_be_visible()
        _shot(page, "2-topic")

        page.get_by_role("link", name="Browse messages").click()
        form = page.get_by_role("form", name="Produce a test message")
        form.get_by_label("Key").fill("k1")
        form.get_by_label("Value").fill('{"item": "tea"}')
        form.get_by_role("button", name="Produce").click()
        expect(page.get_by_role("status")).to_contain_text("offset 0")
        produced.set()
        expect(page.locator("#records pre").filter(has_text='"item": "tea"')).to_be_visible()
        _shot(page, "3-messages")

        page.get_by_label("From offset").fill("5")
        page.get_by_role("button", name="Show").click()
        expect(page.get_by_role("alert")).to_contain_text("beyond the end")

        page.goto(url + "/console/#/messages/payments?order=oldest")
        states = page.locator("#records .txn")
        expect(states).to_have_text(["committed", "aborted"])
        expect(page.get_by_role("cell", name="no", exact=True)).to_be_visible()  # plain
        _shot(page, "3b-transactions")

        # By keyboard: a page link, then a group link that keeps the focus while the
        # table it is in is redrawn by the live refresh.
        assert consumed.wait(60)
        page.get_by_role("link", name="Consumer groups").focus()
        page.keyboard.press("Enter")
        readers = page.get_by_role("link", name="readers")
        expect(readers).to_be_visible()
        page.keyboard.press("Tab")
        expect(readers).to_be_focused()
        readers.evaluate("link => link.classList.add('drawn-before')")
        expect(page.locator("a.drawn-before")).to_have_count(0)
        expect(readers).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.locator("#lag")).to_have_text("1")
        lag_zero_after.set()
        expect(page.locator("#lag")).to_have_text("0")  # refreshed live
        expect(page.get_by_role("button", name="Reset offsets")).to_be_visible()
        _shot(page, "4-group")

        page.get_by_role("link", name="Overview").click()  # its readings since the start
        expect(page.get_by_role("img", name="bytes per second")).to_be_visible()
        produce = page.get_by_role("row").filter(
            has=page.get_by_role("cell", name="Produce", exact=True)
        )
        expect(produce).to_contain_text(re.compile(r"\d\.\d"))  # its p99
        _shot(page, "1-overview")


def _restricted_user(url: str) -> list[str]:
    with chromium_page() as page:
        page.goto(url + "/console/#/topics")
        page.get_by_label("User").fill("alice")
        page.get_by_label("Password").fill("wrong")
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("alert")).to_have_text("wrong user name or password")
        expect(page.get_by_role("table")).to_have_count(0)
        _shot(page, "5-wrong-password")
        page.get_by_label("Password").fill("alice-secret")
        page.get_by_role("button", name="Log in").click()
        page.get_by_role("link", name="Topics").click()
        expect(page.get_by_role("link", name="public")).to_be_visible()
        expect(page.get_by_role("button", name="Create topic")).to_have_count(0)
        _shot(page, "6-restricted-topics")
        shown = [str(x) for x in page.locator("table a").all_inner_texts()]
        page.get_by_role("link", name="Security").click()
        expect(page.locator("main .error").first).to_contain_text("AUTHORIZATION_FAILED")
        expect(page.get_by_role("button", name="Add ACL")).to_have_count(0)
        expect(page.get_by_role("button", name="Delete user alice")).to_have_count(0)
        _shot(page, "7-restricted-security")
        page.goto(url + "/console/#/messages/public")
        expect(page.get_by_role("form", name="Browse messages")).to_be_visible()
        expect(page.get_by_role("form", name="Produce a test message")).to_have_count(0)
        page.get_by_role("button", name="Log out").click()

        page.get_by_label("User").fill("admin")
        page.get_by_label("Password").fill("admin-secret")
        page.get_by_role("button", name="Log in").click()
        page.get_by_role("link", name="Security").click()
        page.once("dialog", lambda dialog: dialog.accept())
        page.get_by_role("button", name="Delete user alice").click()
        expect(page.get_by_role("status")).to_have_text("user alice deleted")
        expect(page.get_by_role("cell", name="alice", exact=True)).to_have_count(0)
        quota = page.get_by_role("form", name="Set a client quota")
        quota.get_by_label("Entity").select_option("user and client id")
        quota.get_by_label("User (empty: default)").fill("bob")
        quota.get_by_label("Client id (empty: default)").fill("app")
        quota.get_by_label("Value (empty: remove)").fill("1024")
        quota.get_by_role("button", name="Set quota").click()
        expect(page.get_by_role("cell", name="client-id=app, user=bob", exact=True)).to_be_visible()
        _shot(page, "8-admin-security")
        return shown


async def _consume(server: KafkaServer, count: int) -> None:
    argv = ["-b", f"127.0.0.1:{server.bound_port()}", "consume", "orders", "-g", "readers"]
    code = await trio.to_thread.run_sync(
        client_main, [*argv, "--from-beginning", "-e", "-c", str(count)]
    )
    assert code == 0


def _transactions(bootstrap: str) -> None:
    """payments: a plain record, then a committed and an aborted transaction."""
    produce_plain(bootstrap, "payments", b"plain")
    produce_transaction(bootstrap, "payments", "payer", [b"paid"], commit=True)
    produce_transaction(bootstrap, "payments", "canceller", [b"cancelled"], commit=False)


async def test_a_user_creates_produces_browses_and_watches_lag_fall(tmp_path: Path) -> None:
    async with console_broker(tmp_path) as (server, _):
        await trio.to_thread.run_sync(admin_cli, server, "topics", "create", "payments")
        await trio.to_thread.run_sync(_transactions, f"127.0.0.1:{server.bound_port()}")
        produced, consumed, lag_wanted_zero = (threading.Event() for _ in range(3))
        async with trio.open_nursery() as nursery:

            async def consumer() -> None:
                assert await trio.to_thread.run_sync(produced.wait, 60)
                # One more record than the page produced, consumed one short: lag 1.
                await trio.to_thread.run_sync(
                    lambda: admin_cli(server, "produce", "orders", stdin=b"second\n")
                )
                await _consume(server, 1)
                consumed.set()
                assert await trio.to_thread.run_sync(lag_wanted_zero.wait, 60)
                await _consume(server, 1)

            nursery.start_soon(consumer)
            await trio.to_thread.run_sync(
                _walk_through, console_url(server), produced, consumed, lag_wanted_zero
            )


async def test_a_restricted_user_sees_only_what_it_may(tmp_path: Path) -> None:
    async with console_broker(tmp_path, SECURED) as (server, _):
        for user in ("alice", "admin"):
            await trio.to_thread.run_sync(
                admin_cli, server, "users", "scram", "set", user, "--password", f"{user}-secret"
            )
        for topic in ("public", "secret"):
            await trio.to_thread.run_sync(admin_cli, server, "topics", "create", topic)
        await trio.to_thread.run_sync(
            allow, server, "User:alice", "--topic", "public", "Describe", "Read"
        )
        shown = await trio.to_thread.run_sync(_restricted_user, console_url(server))
        assert shown == ["public"]
