"""Webhook serving: certificates that manage themselves (``watchkeeper[webhooks]``), and the
HTTPS server of admission and conversion webhooks (``WebhookServer``).

Importing this package never imports cryptography; building a ``CertificateManager``
does, and says which extra to install when it is missing.
"""

from watchkeeper.webhooks.admission import AdmissionRequest, Denied
from watchkeeper.webhooks.certs import CertificateManager, MissingExtra
from watchkeeper.webhooks.config import Lifetimes, WebhookCerts
from watchkeeper.webhooks.jsonpatch import diff as json_patch
from watchkeeper.webhooks.server import WebhookServer, WebhookServerDown
from watchkeeper.webhooks.tls import ServingTLS

__all__ = ["AdmissionRequest", "CertificateManager", "Denied", "Lifetimes", "MissingExtra",
           "ServingTLS", "WebhookCerts", "WebhookServer", "WebhookServerDown", "json_patch"]
