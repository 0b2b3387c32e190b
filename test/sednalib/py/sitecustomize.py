"""Gives a worker process the network of its pod on Nereid's local run.

Python imports this module (sitecustomize) before the worker's own code, when
the harness (test/sednalib) puts this folder on PYTHONPATH. On the local run
pods are kwok's: they have an address (127.64.x.y, on this machine's loopback)
but no network namespace, no DNS and no kube-proxy. What a pod's network would
do, this does for the process, from NEREID_PODNET (JSON, set by the harness):

  podIP   every IPv4 socket the process opens speaks from it, and a server
          bound to every address ("0.0.0.0" or "") listens on it alone, as
          in the pod's own network namespace;
  routes  "host:port" -> "ip:port": what DNS and kube-proxy do for a Service
          (its names and its cluster IP, to a ready pod of it) and what the
          node's address is for its LocalController (LC_SERVER);
  a UDP socket "connected" to an address no route names (Sedna's get_host_ip
  asks for the way to 8.8.8.8) gets the pod's address, as the pod's default
  route would give it; a TCP connection to such an address is refused: the
  local run has no other network.

Nothing of Sedna's library is changed: it runs as it does in a pod.
"""

import errno
import ipaddress
import json
import os
import socket

_cfg = json.loads(os.environ.get("NEREID_PODNET", "{}"))
_pod_ip = _cfg.get("podIP", "")


def _split(hostport):
    host, port = hostport.rsplit(":", 1)
    return host, int(port)


_routes = {_split(k): _split(v) for k, v in _cfg.get("routes", {}).items()}


def _is_loopback(host):
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_getaddrinfo = socket.getaddrinfo


def _podnet_getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
    if isinstance(host, bytes):
        host = host.decode()
    try:
        target = _routes.get((host, int(port)))
    except (TypeError, ValueError):
        target = None
    if target is not None:
        socktype = type or socket.SOCK_STREAM
        return [(socket.AF_INET, socktype, proto or socket.IPPROTO_TCP, "", target)]
    return _getaddrinfo(host, port, family, type, proto, flags)


_socket = socket.socket
_connect = _socket.connect
_connect_ex = _socket.connect_ex
_bind = _socket.bind


def _from_pod(sock):
    """Binds an unbound IPv4 socket to the pod's address."""
    if sock.family != socket.AF_INET or not _pod_ip:
        return
    if sock.getsockname() == ("0.0.0.0", 0):
        _bind(sock, (_pod_ip, 0))


def _route(sock, address):
    if sock.family != socket.AF_INET or not isinstance(address, tuple):
        return address
    host, port = address[0], address[1]
    target = _routes.get((host, port))
    if target is not None:
        return target
    if _is_loopback(host) or not _pod_ip:
        return address
    if sock.type & socket.SOCK_DGRAM:
        return (_pod_ip, port)
    raise OSError(errno.ENETUNREACH, f"the local run's pods reach no network beyond their routes: {host}:{port}")


def _podnet_connect(self, address):
    address = _route(self, address)
    _from_pod(self)
    return _connect(self, address)


def _podnet_connect_ex(self, address):
    try:
        address = _route(self, address)
    except OSError as e:
        return e.errno
    _from_pod(self)
    return _connect_ex(self, address)


def _podnet_bind(self, address):
    if self.family == socket.AF_INET and _pod_ip and isinstance(address, tuple) and address[0] in ("", "0.0.0.0"):
        address = (_pod_ip,) + tuple(address[1:])
    return _bind(self, address)


if _pod_ip:
    socket.getaddrinfo = _podnet_getaddrinfo
    _socket.connect = _podnet_connect
    _socket.connect_ex = _podnet_connect_ex
    _socket.bind = _podnet_bind
