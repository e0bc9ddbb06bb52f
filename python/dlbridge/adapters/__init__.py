"""Adapters for the array libraries that need more than their own from_dlpack (issue 16).

targets: their rows of convert's table; importing: dlbridge.from_dlpack with Arrow's second chance;
one module per library for what its own importer cannot do.
"""
