"""The authorizer's settings, by Kafka's keys: a mixin of :class:`~spindle.broker.server.config.BrokerSettings`.

``authorizer.class.name`` switches ACLs on, as in Kafka: empty (Kafka's default) means no
authorizer -- every request is allowed and the ACL APIs answer SECURITY_DISABLED -- and
Kafka's ``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` means the ACLs in the
metadata store decide (:mod:`.acls`). Any other class is refused at start-up: a broker that
accepted ``authorizer.class.name=com.example.MyAuthorizer`` and allowed everything would not do
what its configuration says.
"""

from __future__ import annotations

from pydantic import Field, field_validator
from spindle.broker.common.settings import KafkaSettings

from .acls import AuthorizerSettings, parse_super_users

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"""Kafka's KRaft authorizer, whose semantics :mod:`.acls` follows."""


class AuthorizerConfig(KafkaSettings):
    """``authorizer.class.name``, ``super.users``, ``allow.everyone.if.no.acl.found``."""

    authorizer_class_name: str = Field(
        "",
        description="Empty: no authorizer (everything allowed). "
        f"{STANDARD_AUTHORIZER}: ACLs decide.",
    )
    super_users: str = Field(
        "",
        description="Principals allowed everything, separated by ';' (User:admin;User:op).",
    )
    allow_everyone_if_no_acl_found: bool = Field(
        False,
        description="With an authorizer: allow a request on a resource no ACL names.",
    )

    @field_validator("authorizer_class_name")
    @classmethod
    def _known_authorizer(cls, value: str) -> str:
        value = value.strip()
        if value not in ("", STANDARD_AUTHORIZER):
            raise ValueError(
                f"authorizer {value!r} is not available; Spindle's authorizer is Kafka's "
                f"{STANDARD_AUTHORIZER} (or leave it empty for none)"
            )
        return value

    @field_validator("super_users")
    @classmethod
    def _principals(cls, value: str) -> str:
        parse_super_users(value)
        return value

    @property
    def acls_enabled(self) -> bool:
        return self.authorizer_class_name == STANDARD_AUTHORIZER

    @property
    def authorizer_settings(self) -> AuthorizerSettings:
        return AuthorizerSettings(
            super_users=parse_super_users(self.super_users),
            allow_if_no_acl=self.allow_everyone_if_no_acl_found,
        )
