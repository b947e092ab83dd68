"""Benchmark files that more than one test module writes into its pytester folder."""

COLD = """
import time

calls = []

def step():
    calls.append(1)
    time.sleep(0.3 if len(calls) == 1 else 0.002)  # a trace on the first call, then steady

def test_cold(benchmark):
    benchmark(step)
"""
