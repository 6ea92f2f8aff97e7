"""Storage: the object store (etcd + watch cache), the registry's write semantics on top of it
(validation, patches, managed fields, finalizers, garbage collection, namespaces), and the
built-in resource types. Knows nothing of HTTP or users."""
