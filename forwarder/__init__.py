"""The zipper-node forwarder: admits both clusters and relays their cross-cluster traffic."""

from .daemon import Forwarder

__all__ = ["Forwarder"]
