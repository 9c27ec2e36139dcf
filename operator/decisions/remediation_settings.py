"""The operator-wide remediation settings (``spindle-operator run --remediation-*``), checked
once, when the operator starts; ``remediation.decide`` is given them on every pass besides the
record and the facts. Apart from the decision module, which only reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from spindle.operator.specs.broker import REMEDIATION_POLICIES

POLICIES = REMEDIATION_POLICIES


class RemediationError(ValueError):
    """A remediation setting that cannot be used; the message names it."""


@dataclass(frozen=True)
class RemediationSettings:
    """The operator-wide remediation settings (``spindle-operator run --remediation-*``)."""

    #: Policy of Brokers that name none.
    default_policy: str = "Auto"
    #: Failures of one volume within ``window_seconds`` after which it is left Offline.
    max_failures: int = 2
    #: The cool-down window, in seconds.
    window_seconds: float = 3600.0
    #: How long ``Replacing`` (old claim and Pod gone, new ones bound and serving) may take
    #: before the remediation is given up as Failed (a claim that never binds, a Pod that
    #: never starts); ``Rebuilding`` has no deadline: copying takes what the data takes.
    replace_timeout_seconds: float = 900.0

    def __post_init__(self) -> None:
        check_policy(self.default_policy, "--remediation-policy")
        if self.max_failures < 1:
            raise RemediationError(
                f"--remediation-max-failures must be at least 1, got {self.max_failures}"
            )
        if self.window_seconds <= 0:
            raise RemediationError(
                f"--remediation-window must be positive, got {self.window_seconds}"
            )
        if self.replace_timeout_seconds <= 0:
            raise RemediationError(
                "--remediation-replace-timeout must be positive, "
                f"got {self.replace_timeout_seconds}"
            )


def check_policy(policy: str, where: str) -> str:
    if policy not in POLICIES:
        raise RemediationError(f"{where} must be one of {', '.join(POLICIES)}, got {policy!r}")
    return policy
