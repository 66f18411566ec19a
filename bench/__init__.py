"""agent-ls benchmarks: every target of issue 8 measured side by side with its baseline.

Run ``python bench/run.py`` (see ``bench/README.md``). Not part of the test suite's pass/fail;
``tests/test_bench_smoke.py`` only checks that a quick run completes.
"""
