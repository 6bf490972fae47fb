"""The `sasl.jaas.config` format, for the PLAIN users of a listener.

Kafka takes one JAAS login module entry per listener and mechanism, e.g.
`listener.name.sasl_plaintext.plain.sasl.jaas.config=` followed by
`org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="secret";`
PlainLoginModule's `user_<name>="<password>"` options are the users the broker
accepts; `username`/`password` are its own (inter-broker) identity.
"""

from __future__ import annotations

import re

import attrs

from broker.config import ConfigError

_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(
    r"""\s*(?:
        (?P<quoted>"(?:[^"\\]|\\.)*")
      | (?P<word>[A-Za-z0-9_$.\-]+)
      | (?P<punct>[=;])
    )""",
    re.VERBOSE | re.DOTALL,
)


@attrs.frozen
class JaasEntry:
    """One login module with its control flag and options."""

    login_module: str
    flag: str
    options: dict[str, str]

    def plain_users(self) -> dict[str, str]:
        """PlainLoginModule's `user_<name>` options: user name to password."""
        return {k[len("user_") :]: v for k, v in self.options.items() if k.startswith("user_")}


def _tokens(text: str, key: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            if text[pos:].strip() == "":
                break
            raise ConfigError(f"{key}: unexpected character {text[pos]!r} in the JAAS config")
        pos = match.end()
        if match.group("quoted") is not None:
            tokens.append(("quoted", re.sub(r"\\(.)", r"\1", match.group("quoted")[1:-1])))
        elif match.group("word") is not None:
            tokens.append(("word", match.group("word")))
        else:
            tokens.append(("punct", match.group("punct")))
    return tokens


def parse_jaas_config(text: str, key: str = "sasl.jaas.config") -> JaasEntry:
    """Parse exactly one `Module flag k=v ...;` entry, as Kafka's JaasConfig requires."""
    tokens = _tokens(text, key)
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise ConfigError(f"{key}: expected '<LoginModule> <flag> [key=value ...];'")
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in _FLAGS:
        raise ConfigError(f"{key}: invalid login module control flag {tokens[1][1]!r}")
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i] != ("punct", ";"):
        if (
            i + 2 >= len(tokens)
            or tokens[i][0] != "word"
            or tokens[i + 1] != ("punct", "=")
            or tokens[i + 2][0] == "punct"
        ):
            raise ConfigError(f"{key}: expected key=value options after the control flag")
        options[tokens[i][1]] = tokens[i + 2][1]
        i += 3
    if i >= len(tokens):
        raise ConfigError(f"{key}: the JAAS config entry must end with ';'")
    if i + 1 != len(tokens):
        raise ConfigError(f"{key}: must contain exactly one login module")
    return JaasEntry(module, flag, options)
