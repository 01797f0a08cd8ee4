"""The search space, the same for every target (imports `core`).

    sketch.py        Knob, LoopSplit, the Sketch interface every target's sketches implement, SkipSketch
    schedule.py      Schedule (a sketch name + knob values), SamplingError, tile-size arithmetic
    search_space.py  what the evolutionary search knows about one sketch (SearchSpace)
    script.py        ScriptBuilder: writing transform scripts with knob holes
    windowed.py      windowed ops MLIR's vectorizer handles only in 1-D (DECOMPOSE)
"""
