"""The pages offer the free colours of the server's run palette (static/js/runs/colors.js):
the same colours, in the same order, as a new run is given (ingest/write/runs.py)."""

from __future__ import annotations

import re

from devtools.live_server import ROOT
from ingest.write.runs import PALETTE


def test_the_pages_palette_is_the_servers() -> None:
    text = (ROOT / "static/js/runs/colors.js").read_text()
    block = re.search(r"export const PALETTE = \[(.*?)\];", text, re.S)
    assert block is not None
    assert tuple(re.findall(r"'(#[0-9a-f]{6})'", block.group(1))) == PALETTE
