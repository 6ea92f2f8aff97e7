"""Documents the simulator renders, as pure functions: discovery, OpenAPI, Table and
printer columns, protobuf, key order and the two forms of Events."""
