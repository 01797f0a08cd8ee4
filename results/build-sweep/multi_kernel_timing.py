"""Per-call time of the multi-kernel tasks of tests/test_gpu_multi_kernel.py against the same kernels
as the partitioned model's tasks (run on the GPU host from the repository root; output in
gpu-multi-kernel.txt). Arguments: workload names (default: the first three of the test's NAMES,
the tasks of the first run)."""
import sys; sys.path.insert(0, "tests")
from test_gpu_multi_kernel import NAMES, _task
from ansor.frontend import workloads
from ansor.targets.cuda.rules import default_script
from ansor.targets.cuda.lowering import compile_task_cuda
from ansor.measure.measurer import reference_outputs
from ansor.frontend.partition import extract_tasks
for name in sys.argv[1:] or NAMES[:3]:
    task = _task(name)
    inputs, refs, _ = reference_outputs(task)
    k = compile_task_cuda(task, default_script(task))
    k.time(inputs, 20)
    t = min(k.time(inputs, 200) for _ in range(3)) / 200
    net = extract_tasks(workloads.get(name), target="cuda")
    parts = []
    for st in net.tasks:
        pk = compile_task_cuda(st, default_script(st))
        pin, _, _ = reference_outputs(st)
        pk.time(pin, 20)
        parts.append(min(pk.time(pin, 200) for _ in range(3)) / 200)
    ws = ", ".join("x".join(map(str, s.shape)) + " " + s.dtype for s in k.workspace) or "none"
    print(f"{name}: multi-kernel task {t*1e6:.1f} us per call (workspace: {ws}); its partitioned tasks "
          f"{', '.join(f'{p*1e6:.1f}' for p in parts)} us (sum {sum(parts)*1e6:.1f})", flush=True)
