"""The Redis broker transport zenweb's workers use.

kombu 5.7's Redis transport can fail a worker on a Redis restart: after
"Connection to broker lost", closing the old channel (which restores its
unacknowledged messages) builds a client from a connection that is already
gone, and raises ``AttributeError: 'NoneType' object has no attribute
'hostname'`` (kombu issues #582, #970). That is not in the transport's
``connection_errors``, so Celery's consumer took it as unrecoverable and the
worker died. Listed there, it is handled as what it is: the consumer
reconnects, and a message left unacknowledged is the sweeper's (leases).
"""

from __future__ import annotations

from kombu.transport import redis


class Transport(redis.Transport):
    connection_errors = (*redis.Transport.connection_errors, AttributeError)
