"""The console's connection to the cluster: our client's routing session, acting as one
principal, plus the two kinds of request it sends beyond the leader/coordinator routing
of `RoutingSession`: to every broker (ListGroups: each coordinator lists its own groups),
and to a group's coordinator (DescribeGroups, DeleteGroups).
"""

from __future__ import annotations

from typing import Any

from broker.client.routing_session import RoutingSession
from broker.client.session import ClientSession


class ConsoleSession(RoutingSession):
    async def every_broker(self) -> list[ClientSession]:
        sessions: list[ClientSession] = []
        for _, address in sorted((await self.brokers()).items()):
            session = await self.session_at(address)
            if all(session is not s for s in sessions):
                sessions.append(session)
        return sessions or [self]

    async def call_coordinator(self, group: str, body: Any) -> Any:
        """`body` at the highest common version, sent to `group`'s coordinator."""
        session = await self.session_at(await self._coordinator(group))
        version = self.version_for(int(body.API_KEY))
        return await ClientSession.request(session, body, version)
