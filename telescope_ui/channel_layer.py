"""The Redis channel layer (scale-out), with one change: a page's WebSocket opens while Redis
is down.

channels gives every consumer its own channel at the handshake (`new_channel`), and
channels_redis's pub/sub layer subscribes to it in Redis then and there; with Redis away that
raised (redis-py 8), and the page got HTTP 500 instead of its live view read from the
database (telescope_ui.live). Here the channel is made and its queue registered even when the
subscription fails: the pages only take group messages (the layer hands each to its members'
queues, whether or not their own channel is subscribed), and they join their groups once the
layer answers again (`LiveConsumer._join`). Relies on channels_redis's pub/sub internals, of the
version pinned in pyproject.toml.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from channels_redis.pubsub import RedisPubSubChannelLayer

log = logging.getLogger("telescope_ui.live")


class PubSubChannelLayer(RedisPubSubChannelLayer):
    async def new_channel(self, prefix: str = "specific.") -> str:
        layer = self._get_layer()  # this event loop's
        channel = f"{layer.prefix}{prefix}{uuid.uuid4().hex}"
        layer.channels[channel] = asyncio.Queue()
        try:
            await layer._get_shard(channel).subscribe(channel)
        except Exception as exc:  # noqa: BLE001 - Redis away: the page reads the database
            log.warning("live updates: a page's own channel not subscribed (%s: %s); its runs' "
                        "groups are joined once the channel layer is back",
                        type(exc).__name__, exc)
        return channel
