"""`ssl.principal.mapping.rules`: from a certificate subject DN to a user name.

Kafka's SslPrincipalMapper: a comma-separated list of `DEFAULT` (the DN as it is) and
`RULE:<regex>/<replacement>/[LU]` entries; the first rule whose regex matches the
whole DN gives the name (`$1` refers to a group; L/U lower- or upper-case it). When
no rule matches, the DN is refused, as Kafka refuses it.
"""

from __future__ import annotations

import re

import attrs

from broker.config import ConfigError

_RULE = re.compile(r"\s*((DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?)\s*(,\s*|$)")


@attrs.frozen
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str
    case: str

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        match = self.pattern.fullmatch(dn)
        if match is None:
            return None
        result = match.expand(self.replacement)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result


class NoMatchingRule(Exception):
    """No rule of ssl.principal.mapping.rules matches the certificate's DN."""


class SslPrincipalMapper:
    def __init__(self, rules: str = "DEFAULT", key: str = "ssl.principal.mapping.rules") -> None:
        self._rules = _parse_rules(rules, key)

    def name(self, dn: str) -> str:
        for rule in self._rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRule(f"No rules apply to {dn}, rules {self._rules}")


def _java_replacement(replacement: str) -> str:
    """Java's `$1` group references to Python's `\\g<1>`; other backslashes literal."""
    out: list[str] = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1].replace("\\", "\\\\"))
            i += 2
        elif c == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            j = i + 1
            while j < len(replacement) and replacement[j].isdigit():
                j += 1
            out.append(f"\\g<{replacement[i + 1 : j]}>")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _parse_rules(text: str, key: str) -> list[_Rule]:
    rules: list[_Rule] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _RULE.match(text, pos)
        if match is None or match.end() == pos:
            raise ConfigError(f"{key}: invalid rule at {text[pos:]!r}")
        pos = match.end()
        if match.group(2):
            rules.append(_Rule(None, "", ""))
            continue
        try:
            pattern = re.compile(match.group(3))
        except re.error as exc:
            raise ConfigError(
                f"{key}: invalid regular expression {match.group(3)!r}: {exc}"
            ) from None
        rules.append(_Rule(pattern, _java_replacement(match.group(5)), match.group(7)))
    if not rules:
        raise ConfigError(f"{key}: at least one rule is required (DEFAULT)")
    return rules
