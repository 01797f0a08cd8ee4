"""Core: what every stage stands on, and nothing above it (imports only `core` and `config`).

    task.py    SearchTask, create_task (validation with one-line errors, FLOPs, structural hash)
    loops.py   preprocessing (inline, fast-math contract, op tags) and the loop structure of ops
    mlir.py    parse a payload, apply a transform script, run a pass pipeline, LoweringError
    native.py  libAnsorMLIR.so through ctypes (the C++ passes, the dialect, feature extraction)
    host.py    the host CPU's vector width;  dtypes.py  element types
"""
