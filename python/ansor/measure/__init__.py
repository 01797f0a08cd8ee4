"""Measurement: build, verify and time candidates in worker processes (imports `core`, `space`,
the target registry; never `search` — the worker loads feature extraction by name).

    measurer.py    Measurer, SyntheticMeasurer, MeasureInput/Result, RunOptions, reference
                   outputs, timing, the worker loop (its two halves: builder.py, runner.py)
    builder.py     Builder, BuildResult, InlineBuilder, LocalBuilder (a pool of build workers)
    runner.py      Runner, LocalRunner (verify + time on this machine)
    local.py       LocalMeasurer: a builder and a runner of this machine
    cluster.py     RayMeasurer: builder and runner actors on a Ray cluster (the only module that imports Ray)
    worker.py      the worker process's entry point (`python -m ansor.measure.worker`)
    verify.py      what "correct" means: poisoned outputs, element-wise tolerance
    baselines.py   numpy references of the built-in workloads, numpy's BLAS
    provenance.py  what every record says about how it was measured
"""
