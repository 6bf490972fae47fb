"""The configuration reference is generated from the code and must be current."""

from __future__ import annotations

from broker.config import CONFIG_DEFS
from tools.generate_config_docs import OUTPUT, render


def test_the_configuration_reference_is_up_to_date() -> None:
    assert OUTPUT.read_text(encoding="utf-8") == render(), (
        "docs/configuration.md is stale: run python tools/generate_config_docs.py"
    )


def test_the_reference_lists_every_supported_key() -> None:
    text = render()
    for name in CONFIG_DEFS:
        assert f"| `{name}` |" in text
    assert "| `num.io.threads` | int | `8` | yes |" in text
    assert "| `queued.max.requests` | int | `500` | no |" in text
