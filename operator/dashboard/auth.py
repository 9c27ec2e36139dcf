"""Who is asking, and may they do it: the API server decides, the dashboard only asks.

- Authentication: a bearer token (an ``Authorization: Bearer`` header from a script, or the
  token a person pasted on the login page, kept server-side behind a session cookie) is
  checked with a TokenReview, every time it is used, so a revoked token stops working at once.
- Authorisation: each state-changing action is checked with a SubjectAccessReview for the user
  TokenReview returned (name, uid, groups, extra), for the verb and the very object the action
  patches -- the answer ``kubectl auth can-i patch rebalance/x -n ns --as user`` gives. The
  patch itself is then made with the operator's identity.
- CSRF: browser sessions carry a random token rendered into each page; a state-changing form
  or fetch must send it back (synchroniser token pattern, OWASP), and the cookie is
  SameSite=Strict. Requests authenticated by an ``Authorization`` header need no CSRF token:
  a browser never adds that header to a cross-site request by itself.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from spindle.operator.dashboard.client import ApiError, AsyncKube

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


@dataclass(frozen=True)
class User:
    """The user a TokenReview vouched for."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Session:
    """A browser's login: the token (re-reviewed on every use) and its CSRF token."""

    id: str
    token: str
    user: User
    csrf: str
    expires: float
    #: Messages for the next page this browser sees (the outcome of an action).
    flash: list[str] = field(default_factory=list)


class Sessions:
    """In-memory browser sessions, bounded; the operator runs one replica, and a restart
    only asks people to paste their token again."""

    def __init__(
        self,
        *,
        ttl: float = 8 * 3600,
        limit: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl
        self._limit = limit
        self._clock = clock
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def create(self, token: str, user: User) -> Session:
        while len(self._sessions) >= self._limit:
            self._sessions.popitem(last=False)
        session = Session(
            id=secrets.token_urlsafe(32),
            token=token,
            user=user,
            csrf=secrets.token_urlsafe(32),
            expires=self._clock() + self._ttl,
        )
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if session.expires <= self._clock():
            del self._sessions[session_id]
            return None
        return session

    def drop(self, session_id: str | None) -> None:
        if session_id:
            self._sessions.pop(session_id, None)


def csrf_matches(expected: str, given: str | None) -> bool:
    """Constant-time comparison of the session's CSRF token with the one sent back."""
    return bool(given) and hmac.compare_digest(expected.encode(), str(given).encode())


def token_fingerprint(token: str) -> str:
    """A short, non-reversible name for a token, for logs (never the token itself)."""
    return hashlib.sha256(token.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str


class Authority:
    """TokenReview and SubjectAccessReview through the operator's API connection."""

    def __init__(self, kube: AsyncKube, *, audiences: tuple[str, ...] = ()) -> None:
        self._kube = kube
        self._audiences = audiences

    async def authenticate(self, token: str) -> User | None:
        """The token's user, or ``None`` when the API server does not vouch for it."""
        if not token or len(token) > 16_384:
            return None
        spec: dict[str, Any] = {"token": token}
        if self._audiences:
            spec["audiences"] = list(self._audiences)
        review = await self._kube.create(
            TOKEN_REVIEWS,
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec},
        )
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return None
        info = status.get("user") or {}
        if not info.get("username"):
            return None
        return User(
            username=str(info["username"]),
            uid=str(info.get("uid") or ""),
            groups=tuple(info.get("groups") or ()),
            extra={k: list(v) for k, v in (info.get("extra") or {}).items()},
        )

    async def authorize(
        self,
        user: User,
        *,
        verb: str,
        group: str,
        resource: str,
        namespace: str,
        name: str,
        subresource: str = "",
    ) -> Decision:
        """Whether ``user`` may ``verb`` this one object, as the API server's authorizer says."""
        attributes = {
            "verb": verb,
            "group": group,
            "resource": resource,
            "namespace": namespace,
            "name": name,
        }
        if subresource:
            attributes["subresource"] = subresource
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user.username,
                "uid": user.uid,
                "groups": list(user.groups),
                "extra": user.extra,
                "resourceAttributes": attributes,
            },
        }
        try:
            review = await self._kube.create(ACCESS_REVIEWS, body)
        except ApiError as exc:
            return Decision(False, f"the access review failed: {exc.server_message}")
        status = review.get("status") or {}
        allowed = bool(status.get("allowed")) and not status.get("denied")
        reason = status.get("reason") or status.get("evaluationError") or ""
        if not allowed and not reason:
            reason = (
                f'user "{user.username}" cannot {verb} resource "{resource}" in API group '
                f'"{group}" in the namespace "{namespace}"'
            )
        return Decision(allowed, reason)
