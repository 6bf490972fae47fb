"""Who is using the console: one cluster session per login.

When the cluster has SASL users (a SASL_PLAINTEXT listener with a SCRAM mechanism),
the console logs in to the brokers over SASL with the user and password given on
its login page, so the broker's ACLs decide what that principal sees and may do;
the page holds only a random token in an HttpOnly cookie. Otherwise everyone is the
listener's anonymous principal and no login is asked for. A login idle for
`IDLE_LOGOUT_S` is closed.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import attrs
import trio

from broker.client.security_config import PLAINTEXT_CONFIG, SaslCredentials, SecurityConfig
from broker.client.session import ClientError
from broker.console.console_session import ConsoleSession

IDLE_LOGOUT_S = 30 * 60
ANONYMOUS = "ANONYMOUS"


@attrs.define
class Login:
    principal: str
    security: SecurityConfig
    session: ConsoleSession | None
    lock: trio.Lock = attrs.field(factory=trio.Lock)
    last_used: float = 0.0


class Logins:
    def __init__(self, bootstrap: Callable[[], str | None], mechanism: str | None) -> None:
        """`bootstrap`: the listener to use (HOST:PORT; None while it is not up);
        `mechanism`: the SCRAM mechanism to log in with, None for no login."""
        self._bootstrap = bootstrap
        self.mechanism = mechanism
        self._logins: dict[str, Login] = {}
        self._anonymous = Login(ANONYMOUS, PLAINTEXT_CONFIG, None)

    @property
    def login_required(self) -> bool:
        return self.mechanism is not None

    async def connect(self, security: SecurityConfig) -> ConsoleSession:
        bootstrap = self._bootstrap()
        if bootstrap is None:
            raise ClientError("the brokers are not up yet")
        session = await ConsoleSession.open(bootstrap, 10.0, security=security)
        assert isinstance(session, ConsoleSession)
        return session

    async def log_in(self, user: str, password: str) -> str:
        """A new token, or ClientError when the brokers refuse the credentials."""
        assert self.mechanism is not None
        security = SecurityConfig(
            protocol="SASL_PLAINTEXT",
            sasl=SaslCredentials(mechanism=self.mechanism, username=user, password=password),
            tls=None,
        )
        session = await self.connect(security)
        token = secrets.token_urlsafe(32)
        self._logins[token] = Login(
            f"User:{user}", security, session, last_used=trio.current_time()
        )
        return token

    async def log_out(self, token: str | None) -> None:
        login = self._logins.pop(token or "", None)
        if login is not None and login.session is not None:
            await login.session.aclose()

    def find(self, token: str | None) -> Login | None:
        if not self.login_required:
            return self._anonymous
        login = self._logins.get(token or "")
        now = trio.current_time()
        if login is None or now - login.last_used > IDLE_LOGOUT_S:
            return None
        login.last_used = now
        return login

    async def session_of(self, login: Login) -> ConsoleSession:
        """The login's session, reconnected after a failure closed it."""
        if login.session is None:
            login.session = await self.connect(login.security)
        return login.session

    async def drop_session(self, login: Login) -> None:
        if login.session is not None:
            session, login.session = login.session, None
            await session.aclose()

    async def aclose(self) -> None:
        for token in list(self._logins):
            await self.log_out(token)
        await self.drop_session(self._anonymous)
