"""The simulator as a webhook *client*: it calls admission and conversion webhooks the way
kube-apiserver does (``call.py`` is the one HTTPS caller both use)."""
