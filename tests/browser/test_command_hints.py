"""The pages name the commands that exist in a pip install (issue 32): a run without declared
environments says how to declare them (`telescope declare-ranges`), the empty runs page how to
make a token (`telescope token`), in Chromium against a live server."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.browser.conftest import Dashboard, step

pytestmark = pytest.mark.browser


def test_the_pages_name_the_telescope_commands(page: Any, dashboard: Dashboard) -> None:
    page.goto(dashboard.url + "/")
    page.wait_for_selector(".help .snippet code")
    first = page.eval_on_selector_all(".help .snippet code", "els => els.map(e => e.textContent)")
    assert first[0] == "telescope token myproject"

    dashboard.post([{"v": 1, "id": "s", "type": "run.start", "run": "bare"},
                    step("bare", 0, {"loss": 1.0}, time=time.time())])
    page.goto(f"{dashboard.url}/runs/{dashboard.run_id('bare')}")
    hint = page.wait_for_selector("#environments p.muted")
    text = hint.text_content() or ""
    assert "telescope declare-ranges" in text and "manage.py" not in text
