"""watchkeeper: Kubernetes watches and controllers that are kind to the API server."""

from watchkeeper._version import __version__

__all__ = ["__version__"]
