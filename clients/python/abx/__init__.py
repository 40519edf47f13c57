"""abx: the zero-step Python client (standard library only).

    import abx
    client = abx.Client()                 # the local server and its token file
    client.files.list(path=".")           # the attribute tree comes from GET /ops
    client.call("files.read", path="README.md")

See docs/clients.md."""
from .client import (CATALOG_VERSION, Client, Event, EventStream, Namespace, Operation, __version__, check_args,
                     default_token, default_url)
from .errors import (AbxError, ArgumentError, AuthError, ContractMismatchError, NotFoundError, PolicyError,
                     RateLimitError, TransportError)

__all__ = ["Client", "Operation", "Namespace", "Event", "EventStream", "check_args", "default_url", "default_token",
           "AbxError", "ArgumentError", "AuthError", "ContractMismatchError", "NotFoundError", "PolicyError",
           "RateLimitError", "TransportError", "CATALOG_VERSION", "__version__"]
