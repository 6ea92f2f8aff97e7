"""Benchmarks: watchkeeper side by side with its peers against the same simulator.

Run them all with ``make bench`` (``python -m benchmarks.run_all``); each module also runs
on its own (``python -m benchmarks.watch_throughput --help``). Results: docs/benchmarks.md.
"""
