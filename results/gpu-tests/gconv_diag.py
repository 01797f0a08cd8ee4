import sys, os
sys.path.insert(0, "tests")
from test_gpu_rule_gaps import _grouped_conv_bn, _samples
from ansor.core.task import create_task
from ansor.targets.cuda.rules import default_script
from ansor.targets import generate_sketches
from ansor.measure.measurer import reference_outputs
from ansor.measure import verify
from ansor.targets.cuda.lowering import compile_task_cuda
import random
for shape in [(2, 16, 13, 2), (25, 16, 8, 2)]:
    task = create_task(_grouped_conv_bn(*shape), name="gconv", target="cuda")
    inputs, refs, _ = reference_outputs(task)
    sk = next(s for s in generate_sketches(task) if s.rule != "skip")
    vals = [None] + [sk.sample(random.Random(s)).values() for s in range(8)]
    for i, v in enumerate(vals):
        script = default_script(task) if v is None else sk.script(v)
        kernel = compile_task_cuda(task, script)
        res = []
        for which in (0, 1):
            outs = kernel.run(inputs, verify.poisoned(task.outputs, which))
            res.append(verify.check_task_outputs(task, outs, refs))
        print(shape, os.environ.get("ANSOR_CUDA_CACHE_WINDOWS", "1"), i, "ok" if res == [None, None] else ("BAD " + str(res[0])[:150]), v, flush=True)
