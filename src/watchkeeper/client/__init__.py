"""Talking to the API server: configuration, HTTP, resources, verbs and typed errors."""

from watchkeeper.client.api import Api, ObjectList, RawEvent
from watchkeeper.client.client import Client
from watchkeeper.client.config import ClientConfig, ConfigError, Impersonation
from watchkeeper.client.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    ConnectionFailed,
    Forbidden,
    Gone,
    Invalid,
    InvalidResponse,
    NotFound,
    ServerError,
    Timeout,
    TooManyRequests,
    Unauthorized,
    WebhookFailed,
)
from watchkeeper.client.models import ObjectMeta, OwnerReference, from_dict, to_dict
from watchkeeper.client.resource import BUILTINS, Resource, UnknownResource
from watchkeeper.client.stream import WatchStream
from watchkeeper.client.transport import Timeouts
from watchkeeper.client.typed_api import Identified, TypedApi

__all__ = [
    "BUILTINS",
    "AlreadyExists",
    "Api",
    "ApiError",
    "BadRequest",
    "Client",
    "ClientConfig",
    "ConfigError",
    "Conflict",
    "ConnectionFailed",
    "Forbidden",
    "Gone",
    "Identified",
    "Impersonation",
    "Invalid",
    "InvalidResponse",
    "NotFound",
    "ObjectList",
    "ObjectMeta",
    "OwnerReference",
    "RawEvent",
    "Resource",
    "ServerError",
    "Timeout",
    "Timeouts",
    "TooManyRequests",
    "TypedApi",
    "Unauthorized",
    "UnknownResource",
    "WatchStream",
    "WebhookFailed",
    "from_dict",
    "to_dict",
]
