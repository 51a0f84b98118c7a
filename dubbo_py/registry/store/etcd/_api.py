"""etcd's v3 gRPC API (KV, Watch, Lease, Auth) for the etcd store: message classes and method stubs.

The messages are built at import time from the serialized descriptors of etcd's own protos
(vendored, trimmed, in protos/etcd/; compiled by scripts/gen_etcd_api.py) rather than from
generated ``_pb2`` modules: generated code checks at import that the protobuf runtime is at least
the version of the protoc that made it (and grpc stubs likewise check grpcio), which would pin
every installation of dubbo-py to the generator's versions. Descriptors load on any protobuf
this package supports. They go into a pool of their own, so another etcd client in the same
process, with its own ``etcdserverpb`` classes in the default pool, cannot clash with ours.

No maintained Python etcd v3 client fits (docs/registry.md says which were considered): the
methods here are plain grpc multicallables on etcd's method paths.
"""

from __future__ import annotations

import base64
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from dubbo_py.registry.store.etcd._descriptor import FILE_DESCRIPTOR_SET

__all__ = ["EtcdAuthStub", "EtcdStub", "message"]

_POOL = descriptor_pool.DescriptorPool()
for _file in descriptor_pb2.FileDescriptorSet.FromString(
    base64.b64decode(FILE_DESCRIPTOR_SET)
).file:
    _POOL.Add(_file)

_CLASSES: dict[str, Any] = {}


def message(name: str) -> Any:
    """The message class of a fully qualified etcd type, e.g. ``etcdserverpb.RangeRequest``."""
    cls = _CLASSES.get(name)
    if cls is None:
        cls = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(name))
        _CLASSES[name] = cls
    return cls


RangeRequest = message("etcdserverpb.RangeRequest")
RangeResponse = message("etcdserverpb.RangeResponse")
PutRequest = message("etcdserverpb.PutRequest")
PutResponse = message("etcdserverpb.PutResponse")
DeleteRangeRequest = message("etcdserverpb.DeleteRangeRequest")
DeleteRangeResponse = message("etcdserverpb.DeleteRangeResponse")
TxnRequest = message("etcdserverpb.TxnRequest")
TxnResponse = message("etcdserverpb.TxnResponse")
Compare = message("etcdserverpb.Compare")
RequestOp = message("etcdserverpb.RequestOp")
WatchRequest = message("etcdserverpb.WatchRequest")
WatchResponse = message("etcdserverpb.WatchResponse")
WatchCreateRequest = message("etcdserverpb.WatchCreateRequest")
WatchCancelRequest = message("etcdserverpb.WatchCancelRequest")
LeaseGrantRequest = message("etcdserverpb.LeaseGrantRequest")
LeaseGrantResponse = message("etcdserverpb.LeaseGrantResponse")
LeaseRevokeRequest = message("etcdserverpb.LeaseRevokeRequest")
LeaseRevokeResponse = message("etcdserverpb.LeaseRevokeResponse")
LeaseKeepAliveRequest = message("etcdserverpb.LeaseKeepAliveRequest")
LeaseKeepAliveResponse = message("etcdserverpb.LeaseKeepAliveResponse")
LeaseTimeToLiveRequest = message("etcdserverpb.LeaseTimeToLiveRequest")
LeaseTimeToLiveResponse = message("etcdserverpb.LeaseTimeToLiveResponse")
AuthenticateRequest = message("etcdserverpb.AuthenticateRequest")
AuthenticateResponse = message("etcdserverpb.AuthenticateResponse")
Permission = message("authpb.Permission")

#: ``authpb.Permission.Type`` values.
PERM_READ, PERM_WRITE, PERM_READWRITE = 0, 1, 2

#: ``Compare.CompareTarget`` and ``Compare.CompareResult`` values.
VERSION, CREATE, MOD, VALUE, LEASE = 0, 1, 2, 3, 4
EQUAL, GREATER, LESS, NOT_EQUAL = 0, 1, 2, 3
#: ``mvccpb.Event.EventType`` values.
PUT, DELETE = 0, 1


def _unary(channel: grpc.Channel, path: str, request: Any, response: Any) -> Any:
    return channel.unary_unary(
        path,
        request_serializer=request.SerializeToString,
        response_deserializer=response.FromString,
    )


def _stream(channel: grpc.Channel, path: str, request: Any, response: Any) -> Any:
    return channel.stream_stream(
        path,
        request_serializer=request.SerializeToString,
        response_deserializer=response.FromString,
    )


class EtcdStub:
    """The etcd methods the store calls, on one channel (each a grpc multicallable)."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.Range = _unary(channel, "/etcdserverpb.KV/Range", RangeRequest, RangeResponse)
        self.Put = _unary(channel, "/etcdserverpb.KV/Put", PutRequest, PutResponse)
        self.DeleteRange = _unary(
            channel, "/etcdserverpb.KV/DeleteRange", DeleteRangeRequest, DeleteRangeResponse
        )
        self.Txn = _unary(channel, "/etcdserverpb.KV/Txn", TxnRequest, TxnResponse)
        self.Watch = _stream(channel, "/etcdserverpb.Watch/Watch", WatchRequest, WatchResponse)
        self.LeaseGrant = _unary(
            channel, "/etcdserverpb.Lease/LeaseGrant", LeaseGrantRequest, LeaseGrantResponse
        )
        self.LeaseRevoke = _unary(
            channel, "/etcdserverpb.Lease/LeaseRevoke", LeaseRevokeRequest, LeaseRevokeResponse
        )
        self.LeaseKeepAlive = _stream(
            channel,
            "/etcdserverpb.Lease/LeaseKeepAlive",
            LeaseKeepAliveRequest,
            LeaseKeepAliveResponse,
        )
        self.LeaseTimeToLive = _unary(
            channel,
            "/etcdserverpb.Lease/LeaseTimeToLive",
            LeaseTimeToLiveRequest,
            LeaseTimeToLiveResponse,
        )
        self.Authenticate = _unary(channel, AUTHENTICATE, AuthenticateRequest, AuthenticateResponse)


#: The method that trades a user name and password for a token (sent without one).
AUTHENTICATE = "/etcdserverpb.Auth/Authenticate"


class EtcdAuthStub:
    """etcd's user and role administration (what ``etcdctl user/role/auth`` calls), for setting
    up an etcd's access control; each method takes the request :meth:`request` makes."""

    def __init__(self, channel: grpc.Channel) -> None:
        def method(name: str) -> Any:
            return _unary(
                channel,
                f"/etcdserverpb.Auth/{name}",
                message(f"etcdserverpb.{_AUTH_REQUESTS[name]}"),
                message(f"etcdserverpb.{_AUTH_REQUESTS[name].replace('Request', 'Response')}"),
            )

        self.UserAdd = method("UserAdd")
        self.UserChangePassword = method("UserChangePassword")
        self.UserGrantRole = method("UserGrantRole")
        self.RoleAdd = method("RoleAdd")
        self.RoleGrantPermission = method("RoleGrantPermission")
        self.RoleRevokePermission = method("RoleRevokePermission")
        self.AuthEnable = method("AuthEnable")

    @staticmethod
    def request(method: str, **fields: Any) -> Any:
        """The request message of ``method`` (e.g. ``request("UserAdd", name=..., ...)``)."""
        return message(f"etcdserverpb.{_AUTH_REQUESTS[method]}")(**fields)


_AUTH_REQUESTS = {
    "UserAdd": "AuthUserAddRequest",
    "UserChangePassword": "AuthUserChangePasswordRequest",
    "UserGrantRole": "AuthUserGrantRoleRequest",
    "RoleAdd": "AuthRoleAddRequest",
    "RoleGrantPermission": "AuthRoleGrantPermissionRequest",
    "RoleRevokePermission": "AuthRoleRevokePermissionRequest",
    "AuthEnable": "AuthEnableRequest",
}


def prefix_end(prefix: bytes) -> bytes:
    """The end of the range of keys starting with ``prefix`` (etcd's ``GetPrefixRangeEnd``)."""
    end = bytearray(prefix)
    for i in range(len(end) - 1, -1, -1):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[: i + 1])
    return b"\x00"  # every key
