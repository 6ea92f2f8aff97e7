"""Webhook serving: certificates that manage themselves (``watchkeeper[webhooks]``).

Importing this package never imports cryptography; building a ``CertificateManager``
does, and says which extra to install when it is missing.
"""

from watchkeeper.webhooks.certs import CertificateManager, MissingExtra
from watchkeeper.webhooks.config import Lifetimes, WebhookCerts
from watchkeeper.webhooks.tls import ServingTLS

__all__ = ["CertificateManager", "Lifetimes", "MissingExtra", "ServingTLS", "WebhookCerts"]
