"""An SSL client's principal from its certificate's name: ``ssl.principal.mapping.rules``, as
Kafka's ``SslPrincipalMapper`` reads and applies them (pure; no I/O).

Kafka names an mTLS client ``User:`` + its certificate's subject in RFC 2253 form
(``X500Principal.getName()``: ``CN=alice,OU=eng,O=Acme,C=GB``, most specific first), unless a
rule maps it. Rules are tried in order and the first that matches gives the name::

    RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?)$/$1@$2/L,DEFAULT

``RULE:pattern/replacement/`` matches the whole name against ``pattern`` (a regular expression;
``\\/`` is a slash in it) and replaces with ``replacement`` (``$1`` is group 1), then ``L`` or
``U`` lower- or upper-cases the result; ``DEFAULT`` is the name unchanged. A name no rule
matches is refused (Kafka's ``NoMatchingRule``): the connection fails authentication.

Java and Python regular expressions agree on what such rules use (groups, classes, lazy
quantifiers, anchors); ``$n`` replacements are translated, ``\\x`` in a replacement is ``x``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509

DEFAULT_RULES = "DEFAULT"

# SslPrincipalMapper.RULE_PATTERN and RULE_SPLITTER, unchanged.
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)


class PrincipalMappingError(ValueError):
    """No rule maps a certificate's name (Kafka's ``NoMatchingRule``)."""


@dataclass(frozen=True)
class Rule:
    """One rule: ``pattern`` None is DEFAULT."""

    pattern: re.Pattern[str] | None
    replacement: str = ""
    case: str = ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        groups = self.pattern.groups
        result = self.pattern.sub(lambda m: _expand(self.replacement, m, groups), name)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result


def _expand(replacement: str, match: re.Match[str], groups: int) -> str:
    """Java's ``Matcher.replaceAll`` replacement: ``$n`` a group (a group number beyond the
    pattern's is literal, as Kafka's ``escapeLiteralBackReferences`` makes it), ``\\x`` x."""
    out: list[str] = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            j = i + 1
            while j < len(replacement) and replacement[j].isdigit():
                j += 1
            n = int(replacement[i + 1 : j])
            if n <= groups:
                out.append(match.group(n) or "")
            else:
                out.append(replacement[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


@dataclass(frozen=True)
class PrincipalMapper:
    """``ssl.principal.mapping.rules`` parsed; :meth:`principal` maps a name."""

    rules: tuple[Rule, ...]
    source: str = DEFAULT_RULES

    @classmethod
    def parse(cls, value: str | None) -> PrincipalMapper:
        """Parse the rules; ``ValueError`` names a rule that is not one (Kafka's message)."""
        text = DEFAULT_RULES if value is None else value.strip()
        rules: list[Rule] = []
        for m in _SPLITTER.finditer(text):
            rule = m.group(1)
            parsed = _PARSER.match(rule)
            if parsed is None:
                raise ValueError(f"Invalid rule: {rule}")
            if parsed.end() != len(rule):
                raise ValueError(
                    f"Invalid rule: `{rule}`, unmatched substring: `{rule[parsed.end() :]}`"
                )
            if parsed.group(1) is not None:
                rules.append(Rule(None))
            elif parsed.group(2) is not None:
                try:
                    pattern = re.compile(parsed.group(2))
                except re.error as exc:
                    raise ValueError(f"Invalid rule: {rule}: {exc}") from None
                rules.append(Rule(pattern, parsed.group(4), parsed.group(6)))
            if m.end() == len(text):
                break
        return cls(tuple(rules), text)

    def name(self, distinguished_name: str) -> str:
        """The mapped name of ``distinguished_name``; raises :class:`PrincipalMappingError`."""
        for rule in self.rules:
            mapped = rule.apply(distinguished_name)
            if mapped is not None:
                return mapped
        raise PrincipalMappingError(f"No rules apply to {distinguished_name}, rules {self.source}")

    def principal(self, distinguished_name: str) -> str:
        """Kafka's principal: ``User:`` + the mapped name."""
        return "User:" + self.name(distinguished_name)


_RFC2253_KEYWORDS = {
    x509.NameOID.COMMON_NAME: "CN",
    x509.NameOID.COUNTRY_NAME: "C",
    x509.NameOID.LOCALITY_NAME: "L",
    x509.NameOID.STATE_OR_PROVINCE_NAME: "ST",
    x509.NameOID.ORGANIZATION_NAME: "O",
    x509.NameOID.ORGANIZATIONAL_UNIT_NAME: "OU",
    x509.NameOID.STREET_ADDRESS: "STREET",
    x509.NameOID.DOMAIN_COMPONENT: "DC",
    x509.NameOID.USER_ID: "UID",
}


def rfc2253(name: x509.Name) -> str:
    """``name`` as Java's RFC 2253 form: most specific RDN first, the keywords RFC 2253 lists
    and, for any other attribute (emailAddress, serialNumber, ...), ``OID=#`` its DER value
    in hex."""

    def value(attr: x509.NameAttribute[str | bytes]) -> str:
        keyword = _RFC2253_KEYWORDS.get(attr.oid)
        text = attr.value if isinstance(attr.value, str) else attr.value.decode("latin-1")
        if keyword is None:
            raw = text.encode("utf-16-be" if attr._type.value == 30 else "utf-8")
            return f"{attr.oid.dotted_string}=#{_der(attr._type.value, raw).hex()}"
        return f"{keyword}={_escape(text)}"

    return ",".join("+".join(value(a) for a in rdn) for rdn in reversed(list(name.rdns)))


def _der(tag: int, raw: bytes) -> bytes:
    n = len(raw)
    if n < 0x80:
        return bytes([tag, n]) + raw
    size = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + raw


def _escape(text: str) -> str:
    out = []
    for i, c in enumerate(text):
        if c in ',+"\\<>;' or (c == "#" and i == 0) or (c == " " and i in (0, len(text) - 1)):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)
