"""HTTP plumbing shared by the API and auth handlers: URL parsing, request bodies, JSON
responses as the apiserver writes them on the wire, and the request log."""
