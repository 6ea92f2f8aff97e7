"""The differential conformance suite: scenarios run on the simulator and on a real
kube-apiserver, normalized and compared (docs/simulator.md)."""
