"""The resource API over HTTP: the verbs (get, list, watch, create, update, patch, delete),
how answers are represented, the document routes, health endpoints and deprecation warnings."""
