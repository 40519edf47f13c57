"""Exceptions of the abx client: one base class carrying the server's error code, HTTP
status and message (see docs/reference/errors.md for every code), a few subclasses by
family, and the client-side ones (arguments refused before sending, contract mismatch)."""


class AbxError(Exception):
    """An abx error: `code` ("files.not_found"), `status` (HTTP status, None when the
    client refused the call before sending it), `message`, `details`, `request_id`."""

    def __init__(self, code, message, status=None, details=None, request_id=None, op=None):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message
        self.status = status
        self.details = details
        self.request_id = request_id
        self.op = op


class AuthError(AbxError):
    """auth.*: no token, an unknown token, or too many failures."""


class PolicyError(AbxError):
    """policy.* and approval refusals: the policy does not allow this call."""


class NotFoundError(AbxError):
    """op.not_enabled and the *.not_found codes."""


class RateLimitError(AbxError):
    """limit.rate, limit.concurrency, auth.rate_limited: try again after `retry_after` seconds."""

    retry_after = None


class ArgumentError(AbxError, TypeError):
    """args.*: an argument is unknown, missing or has the wrong type or value. Raised by
    the client before any request when the fetched schema refuses the arguments, and for
    the server's own 400 args.* answers."""


class ContractMismatchError(AbxError, AttributeError):
    """E3111: the op is not listed by the server for this caller (an older server, or an op
    the policy does not mount). Raised before any request is sent."""

    CODE = "E3111"

    def __init__(self, op, message=None):
        super().__init__(self.CODE, message or "the server does not list operation '%s' for this caller" % op,
                         op=op)


class TransportError(AbxError):
    """The server could not be reached, or answered something that is not abx."""


def error_class(code, status):
    """The exception class for a server error code."""
    if code.startswith("args."):
        return ArgumentError
    if code in ("limit.rate", "limit.concurrency", "auth.rate_limited"):
        return RateLimitError
    if code.startswith("auth."):
        return AuthError
    if code.startswith("policy.") or code in ("approval.denied", "approval.no_approver", "approval.self_approval"):
        return PolicyError
    if code == "op.not_enabled" or code.endswith(".not_found"):
        return NotFoundError
    return AbxError
