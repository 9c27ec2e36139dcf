"""An SSL client's principal: Kafka's ``ssl.principal.mapping.rules`` (the cases of Kafka's
``SslPrincipalMapperTest``) and the RFC 2253 name Java gives a certificate's subject."""

from __future__ import annotations

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID
from spindle.broker.server.security.principal import (
    PrincipalMapper,
    PrincipalMappingError,
    rfc2253,
)

KAFKA_RULES = (
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
    "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U,"
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,"
    "DEFAULT"
)


@pytest.mark.parametrize(
    ("name", "mapped"),
    [
        ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "Duke"),
        ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
        ("cn=duke,ou=javasoft,dc=sun,dc=com", "DUKE@JAVASOFT"),
        ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
        ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
    ],
)
def test_the_first_rule_that_matches_names_the_principal(name: str, mapped: str) -> None:
    mapper = PrincipalMapper.parse(KAFKA_RULES)
    assert mapper.name(name) == mapped
    assert mapper.principal(name) == f"User:{mapped}"


def test_default_is_the_whole_distinguished_name() -> None:
    assert PrincipalMapper.parse(None).principal("CN=a,O=b") == "User:CN=a,O=b"
    assert PrincipalMapper.parse("DEFAULT").principal("CN=a\\,b,O=c") == "User:CN=a\\,b,O=c"


def test_escaped_slashes_and_literal_dollars_in_rules() -> None:
    mapper = PrincipalMapper.parse("RULE:^CN=([^,]*)\\/x,.*$/u-$1-$9/")
    assert mapper.name("CN=alice/x,O=org") == "u-alice-$9"


def test_a_name_no_rule_maps_is_refused() -> None:
    mapper = PrincipalMapper.parse("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(PrincipalMappingError, match="No rules apply to CN=x,OU=Other"):
        mapper.name("CN=x,OU=Other")


@pytest.mark.parametrize(
    "rules",
    [
        "RUL:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/U/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    ],
)
def test_malformed_rules_are_refused_as_kafka_refuses_them(rules: str) -> None:
    with pytest.raises(ValueError, match="Invalid rule"):
        PrincipalMapper.parse(rules)


def test_a_subject_reads_most_specific_first_with_java_keywords_and_hex_for_the_rest() -> None:
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COUNTRY_NAME, "GB"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme, Ltd"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
            x509.NameAttribute(NameOID.COMMON_NAME, "alice"),
            x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@b.c"),
        ]
    )
    # Java: new X500Principal(...).getName() (RFC 2253): emailAddress is not one of its
    # keywords, so it is the OID and the DER IA5String (tag 0x16) in hex.
    assert rfc2253(name) == (
        "1.2.840.113549.1.9.1=#16056140622e63,CN=alice,OU=eng,O=Acme\\, Ltd,C=GB"
    )
