"""The message registry imports a message's module only when it is used."""

from __future__ import annotations

import subprocess
import sys

import pytest

from broker.protocol.messages import registry
from broker.protocol.messages.metadata_response import MetadataResponseBroker


def test_importing_the_codec_does_not_import_every_message_module() -> None:
    script = (
        "import sys, broker.protocol.api as api\n"
        "before = {m for m in sys.modules if m.startswith('broker.protocol.messages.')}\n"
        "api.REQUEST_TYPES[0]\n"
        "after = {m for m in sys.modules if m.startswith('broker.protocol.messages.')}\n"
        "print(len(before), sorted(after - before))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    loaded, newly = result.stdout.split(" ", 1)
    assert int(loaded) <= 4  # registry, the two headers, and little else
    assert "broker.protocol.messages.produce_request" in newly


def test_lookups_give_the_generated_classes() -> None:
    from broker.protocol.messages import ProduceRequest, ProduceResponse

    assert registry.REQUEST_TYPES[0] is ProduceRequest
    assert registry.RESPONSE_TYPES.get(0) is ProduceResponse
    assert registry.REQUEST_TYPES.get(9999) is None
    readers, writers = registry.CODECS[ProduceRequest]
    low, high = registry.SUPPORTED_VERSIONS[0]
    assert set(readers) == set(writers) == set(range(low, high + 1))


def test_nested_structs_and_foreign_classes_have_no_codec() -> None:
    assert MetadataResponseBroker not in registry.CODECS
    assert int not in registry.CODECS
    with pytest.raises(KeyError):
        registry.CODECS[MetadataResponseBroker]


def test_iterating_the_tables_covers_every_definition() -> None:
    assert len(registry.CODECS) == len(list(registry.CODECS)) == 186
    assert len(registry.REQUEST_TYPES) == len(registry.RESPONSE_TYPES) == len(registry.API_NAMES)
