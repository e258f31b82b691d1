"""The admin web view in a real headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by Selenium): the one-time login link, the person's page with
their memory graph and emotional timeline drawn, and the verify button."""

from __future__ import annotations

import asyncio
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from core.memory.structured import EXTRAS_KEY
from tests.akira_bot.http_api.conftest import ROOT, Bot
from tests.conftest import ask, make_message

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# AKIRA_SAVE_SCREENSHOT=1 also writes the screenshot the docs show.
DOCS_SHOT = ROOT / "docs" / "img" / "admin.png"

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
CHAT = [
    "oi! hoje estou muito feliz, passei na prova de cálculo",
    "obrigado pela ajuda de ontem, você é demais",
    "mas agora estou triste, meu gato está doente",
    "não entendi o que o veterinário disse, estou confuso",
    "isso é um absurdo, ninguém me responde, que raiva!",
    "desculpa, estava nervoso. o gato melhorou",
]


def browser() -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--window-size=1280,1700",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))


def drive(link: str, person_path: str, shot: Path) -> dict[str, Any]:
    driver = browser()
    try:
        driver.set_page_load_timeout(30)
        driver.get(link)  # the one-time link sets the session and sends us to /admin
        assert driver.current_url.endswith("/admin"), driver.current_url
        driver.find_element(By.CSS_SELECTOR, f'a[href="{person_path}"]').click()
        wait = WebDriverWait(driver, 30)
        try:
            wait.until(
                lambda d: d.execute_script("return !!window.akiraGraph && !!window.akiraTimeline")
            )
        except TimeoutException:
            raise AssertionError(
                f"not drawn: {driver.get_log('browser')} {driver.page_source[:2000]}"
            ) from None
        seen: dict[str, Any] = {
            "graph_nodes": driver.execute_script("return window.akiraGraph.nodes().length"),
            "graph_edges": driver.execute_script("return window.akiraGraph.edges().length"),
            "zoom_before": driver.execute_script("return window.akiraGraph.zoom()"),
            "timeline_points": driver.execute_script("return window.akiraTimeline.data[0].length"),
            "canvas": driver.execute_script(
                "return document.querySelectorAll('#graph canvas').length"
            ),
            "unverified_rows": len(driver.find_elements(By.CSS_SELECTOR, "tr.unverified")),
        }
        # Zoom works (what a scroll does), then back to fit for the screenshot.
        driver.execute_script("window.akiraGraph.zoom(window.akiraGraph.zoom() * 1.5)")
        seen["zoom_after"] = driver.execute_script("return window.akiraGraph.zoom()")
        driver.execute_script("window.akiraGraph.fit()")
        driver.save_screenshot(str(shot))
        page = driver.find_element(By.TAG_NAME, "main")
        driver.find_element(By.CSS_SELECTOR, "button.verify").click()
        wait.until(ec.staleness_of(page))  # the form posted and the page came back
        wait.until(lambda d: d.execute_script("return !!window.akiraGraph"))
        seen["unverified_after"] = len(driver.find_elements(By.CSS_SELECTOR, "tr.unverified"))
        seen["errors"] = [
            entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"
        ]
        return seen
    finally:
        driver.quit()


async def test_admin_page_draws_the_graph_and_verifies(http_bot: Bot, tmp_path: Path) -> None:
    for i, text in enumerate(CHAT):
        http_bot.script.append(f"resposta {i}")
        await ask(http_bot.engine, make_message(text, user="42", at=T0 + timedelta(minutes=7 * i)))
    key = await http_bot.acli("keys", "mind", "telegram:42")
    async with aiohttp.ClientSession() as session:
        for body in (
            {"category": "identity", "content": "Chama-se Rafa", "key": "name"},
            {"category": "fact", "content": "Tem um gato chamado Miau", "tags": ["pets"]},
        ):
            async with session.post(
                http_bot.url + "/memory", json=body, headers={"Authorization": f"Bearer {key}"}
            ) as resp:
                assert resp.status == 201
    storage = http_bot.engine.storage
    nodes = await storage.nodes.recent("telegram:42", limit=300)
    assert len(nodes) == 2 * len(CHAT)
    edges = await storage.graph.edges("telegram:42", [n.id for n in nodes])

    port = str(http_bot.adapter.server.port)  # type: ignore[union-attr]
    link = await http_bot.acli("admin-link", "discord:1", AKIRA_HTTP__PORT=port)
    assert link.startswith(f"http://127.0.0.1:{port}/admin/login?token=akl_")

    shot = tmp_path / "admin.png"
    seen = await asyncio.to_thread(drive, link, "/admin/person/telegram:42", shot)

    assert seen["graph_nodes"] == len(nodes)
    assert seen["graph_edges"] == len({(e.from_id, e.to_id, e.relation_type) for e in edges})
    assert seen["canvas"] > 0  # Cytoscape drew it
    assert seen["zoom_after"] > seen["zoom_before"]
    assert seen["timeline_points"] == len(CHAT)  # one reading per message of the person
    assert (seen["unverified_rows"], seen["unverified_after"]) == (2, 1)
    assert seen["errors"] == []
    verified = [
        m
        for m in await http_bot.engine.services.extras[EXTRAS_KEY].all("telegram:42")
        if m.verified
    ]
    assert [m.verified_by for m in verified] == ["discord:1"]
    assert shot.stat().st_size > 10_000
    if os.environ.get("AKIRA_SAVE_SCREENSHOT"):
        DOCS_SHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, DOCS_SHOT)

    # The link was for one use.
    async with aiohttp.ClientSession() as session, session.get(link, allow_redirects=False) as resp:
        assert resp.status == 403


async def test_admin_view_needs_an_admin(http_bot: Bot) -> None:
    person_token = await http_bot.acli("keys", "jwt", "telegram:42")
    mind_key = await http_bot.acli("keys", "mind", "telegram:42")
    async with aiohttp.ClientSession() as session:
        for headers in (
            {},
            {"Authorization": f"Bearer {person_token}"},
            {"Authorization": f"Bearer {mind_key}"},
        ):
            async with session.get(
                http_bot.url + "/admin/person/telegram:42", headers=headers
            ) as resp:
                assert resp.status == 401
                assert "admin-link" in await resp.text()
        admin = await http_bot.acli("keys", "jwt", "discord:1", "--admin")
        async with session.get(
            http_bot.url + "/admin", headers={"Authorization": f"Bearer {admin}"}
        ) as resp:
            assert resp.status == 200
        # A form post without the session's token is refused, and changes nothing.
        async with session.post(
            http_bot.url + "/admin/person/telegram:42/memory/mem_x/delete",
            headers={"Authorization": f"Bearer {admin}"},
            data={"csrf": "forged"},
        ) as resp:
            assert resp.status == 403
