"""Benchmark tooling: metric quality on labelled data (``quality``) and step timings (``speed``)."""
