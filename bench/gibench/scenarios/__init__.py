"""Named scenarios: each run(ctx) measures, then returns a Report."""
from . import batchcost, build, mutate, orient, pqmodes, search, stages, stream

SCENARIOS = {"build": build, "search": search, "stream": stream, "mutate": mutate,
             "orient": orient, "batchcost": batchcost, "stages": stages,
             "pqmodes": pqmodes}
