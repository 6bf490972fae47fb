"""Per-listener security settings: `listener.name.<l>.<key>` before `<key>`.

Kafka resolves a listener's channel configs with `valuesWithPrefixOverride`: each key
given with the listener's prefix (any case of the listener name) wins over the
broker-wide one. JAAS configs and the re-authentication lifetime may also carry a
mechanism: `listener.name.<l>.<mechanism>.<key>`.
"""

from __future__ import annotations

from broker.config import BrokerConfig


def effective_key(config: BrokerConfig, listener: str, key: str, mechanism: str = "") -> str:
    """The key whose value applies to `listener` (and `mechanism`, when given)."""
    candidates = []
    if mechanism:
        candidates.append(BrokerConfig.listener_key(listener, f"{mechanism.lower()}.{key}"))
    candidates.append(BrokerConfig.listener_key(listener, key))
    raw = config.raw
    for candidate in candidates:
        for raw_key in raw:
            if raw_key.lower() == candidate.lower():
                return raw_key
    return key
