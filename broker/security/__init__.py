"""Security of listeners: TLS contexts, SASL mechanisms, SCRAM credentials, principals.

Everything here is sans-IO (contexts, parsers and state machines over bytes); the
network layer (`broker/net/authenticator.py`, `broker/net/channel_security.py`)
drives it from each connection's task.
"""
