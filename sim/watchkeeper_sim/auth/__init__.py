"""Authentication and authorization: users, bearer and service-account tokens, client
certificates (TLS), RBAC with escalation checks, impersonation, and the review APIs."""
